"""The compiled Stockfish 19 evaluator (:mod:`nnue.inference.kinds.sfnnv16.compiled`) against the torch
path of :mod:`nnue.inference.kinds.sfnnv16` (``backend="torch"``): the same integers (``torch.equal``)
on random nets of several L1, every layer stack, padding anywhere, and nets built so that the
int16 accumulators, the int32 PSQT sums and the int32 layer sums wrap; for each of those, the
torch path with that wrap left out gives other values, so the comparison does test the wraps."""
from __future__ import annotations

import pytest
import torch

from nnue.inference.kinds.sfnnv16 import net as sf16
from nnue.inference.kinds.sfnnv16 import (FC0_OUTPUTS, FC1_INPUTS, FC1_OUTPUTS, FC2_INPUTS, INT8_INPUTS, LAYER_STACKS,
                                    NUM_INPUTS, PSQ_INPUTS, PSQT_BUCKETS, SCHEME, SFNNv16IntegerNet, THREAT_INPUTS)

compiled = pytest.importorskip("nnue.inference.kinds.sfnnv16.compiled", reason="numba is not installed")

I32 = 2 ** 31


def _arch(hidden: int) -> dict:
    # the registry's sfnnv16 feature set is not needed: these tests start from indices
    return {"kind": "sfnnv16", "feature_set": "sfnnv16", "feature_hash": "0", "num_inputs": NUM_INPUTS,
            "hidden": hidden, "output_buckets": "SFPieceCount<8>", "num_buckets": LAYER_STACKS,
            "l1_outputs": FC0_OUTPUTS, "l2_outputs": FC1_OUTPUTS, "psqt_buckets": PSQT_BUCKETS, "description": ""}


def _normal(gen, shape, std, mean=0.0, lo=-127, hi=127, dtype=torch.int8):
    return (torch.randn(shape, generator=gen) * std + mean).round().clamp(lo, hi).to(dtype)


def random_net(L1: int, seed: int, wrap: str | None = None) -> SFNNv16IntegerNet:
    """A net of L1 ``L1`` whose activations spread over their ranges (accumulators around
    0..255, layer sums around their shifts). ``wrap``: "acc" (int16 rows and bias near ±2^15: the
    accumulators wrap), "psqt" (PSQT values near ±2^30: their sums wrap), "layers" (biases of
    fc_0, fc_1 and fc_2 near ±2^31: the layer sums wrap)."""
    gen = torch.Generator().manual_seed(seed)
    S = LAYER_STACKS
    big16 = wrap == "acc"
    net = SFNNv16IntegerNet(
        _arch(L1), SCHEME,
        ft_bias=_normal(gen, (L1,), 20000 if big16 else 60, 0 if big16 else 90, -32768, 32767, torch.int16),
        threat_weight=_normal(gen, (INT8_INPUTS, L1), 127 if big16 else 12),
        threat_psqt=_normal(gen, (INT8_INPUTS, PSQT_BUCKETS), 2 ** 29 if wrap == "psqt" else 3000, 0, -I32, I32 - 1,
                            torch.int32),
        ft_weight=_normal(gen, (PSQ_INPUTS, L1), 20000 if big16 else 40, 0, -32768, 32767, torch.int16),
        psqt=_normal(gen, (PSQ_INPUTS, PSQT_BUCKETS), 2 ** 30 if wrap == "psqt" else 3000, 0, -I32, I32 - 1,
                     torch.int32),
        fc0_bias=_normal(gen, (S, FC0_OUTPUTS), 3000, 0, -I32, I32 - 1, torch.int32),
        fc0_weight=_normal(gen, (S, FC0_OUTPUTS, L1), 128 / L1 ** 0.5),
        fc1_bias=_normal(gen, (S, FC1_OUTPUTS), 2000, 0, -I32, I32 - 1, torch.int32),
        fc1_weight=_normal(gen, (S, FC1_OUTPUTS, FC1_INPUTS), 10),
        fc2_bias=_normal(gen, (S, 1), 1000, 0, -I32, I32 - 1, torch.int32),
        fc2_weight=_normal(gen, (S, 1, FC2_INPUTS), 20))
    if wrap == "layers":   # biases at the edge of int32, either sign: bias + dot crosses it
        for name in ("fc0_bias", "fc1_bias", "fc2_bias"):
            t = getattr(net, name)
            sign = torch.where(torch.rand(t.shape, generator=gen) < 0.5, -1, 1)
            edge = (I32 - 1 - torch.randint(0, 3000, t.shape, generator=gen)) * sign
            setattr(net, name, edge.to(torch.int32))
    return net


def indices(N: int, seed: int, A: int = 160) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(stm, nstm (N, A) int32 with −1 padding anywhere, bucket (N,) int64 covering 0..7):
    per perspective up to 90 threats, 30 pawn pairs and 32 HalfKAv2_hm features, a row of
    padding only, the first and last input of each range."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(2):
        rows = torch.full((N, A), -1, dtype=torch.int32)
        for i in range(N):
            nt, npp, nk = (int(torch.randint(0, c + 1, (1,), generator=gen)) for c in (90, 30, 32))
            f = torch.cat([torch.randint(0, THREAT_INPUTS, (nt,), generator=gen),
                           torch.randint(THREAT_INPUTS, INT8_INPUTS, (npp,), generator=gen),
                           torch.randint(INT8_INPUTS, NUM_INPUTS, (nk,), generator=gen)])
            rows[i, torch.randperm(A, generator=gen)[:f.numel()]] = f.int()
        out.append(rows)
    stm, nstm = out
    stm[0] = -1                                       # a perspective without any feature
    stm[1, :4] = torch.tensor([0, THREAT_INPUTS - 1, INT8_INPUTS - 1, INT8_INPUTS], dtype=torch.int32)
    nstm[2, -2:] = torch.tensor([NUM_INPUTS - 1, THREAT_INPUTS], dtype=torch.int32)
    nstm[3, 5] = -7                                   # any negative value is padding
    bucket = torch.arange(N) % LAYER_STACKS
    bucket = bucket[torch.randperm(N, generator=gen)]
    return stm, nstm, bucket


def _both(net, stm, nstm, bucket):
    want = sf16.value_from_indices(net, stm, nstm, bucket, backend="torch")
    got = compiled.values_sfnnv16(net, stm, nstm, bucket)
    return got, want


@pytest.mark.parametrize("L1", [64, 128, 1024])
def test_equals_torch_path(L1):
    net = random_net(L1, L1)
    stm, nstm, bucket = indices(67, L1)
    got, want = _both(net, stm, nstm, bucket)
    assert got.dtype == torch.int64 and torch.equal(got, want)
    # the net exercises the arithmetic: values spread, pairwise products neither all 0 nor all 127
    x0 = sf16.transform(*(sf16.accumulate(net, t)[0] for t in (stm, nstm)))
    assert 0.1 < float((x0 > 0).float().mean()) < 0.9 and bool((x0 == 127).any())
    assert len(torch.unique(got)) > 50
    # every layer stack, each position's own
    for b in range(LAYER_STACKS):
        sel = bucket == b
        assert sel.any()
        one = compiled.values_sfnnv16(net, stm[sel], nstm[sel], torch.full((int(sel.sum()),), b))
        assert torch.equal(one, want[sel])


@pytest.mark.parametrize("wrap,bits", [("acc", 16), ("psqt", 32), ("layers", 32)])
def test_wraps_as_the_engine(wrap, bits, monkeypatch):
    """Nets whose int16 accumulators, int32 PSQT sums or int32 layer sums wrap: compiled ==
    torch; and the torch path with that width's wrap left out gives other values (so the
    equality above is a test of the wraps, not of values that never reach them)."""
    net = random_net(128, 7, wrap)
    stm, nstm, bucket = indices(61, 8)
    got, want = _both(net, stm, nstm, bucket)
    assert torch.equal(got, want)
    real = sf16._wrap
    monkeypatch.setattr(sf16, "_wrap", lambda t, b: t if b == bits else real(t, b))
    unwrapped = sf16.value_from_indices(net, stm, nstm, bucket, backend="torch")
    assert not torch.equal(unwrapped, want), f"no {bits}-bit wrap happened in the {wrap} net"
    assert not torch.equal(got, unwrapped)


def test_wrapping_net_reaches_the_wraps():
    """The wrapping nets do what they are built for, measured directly: accumulators summed in
    int64 leave int16, PSQT sums leave int32, fc_0's sums (bias + dot) leave int32."""
    stm, nstm, bucket = indices(61, 8)
    net = random_net(128, 7, "acc")
    idx = stm.long().clamp(min=-1) + 1
    table = torch.cat([torch.zeros(1, 128, dtype=torch.int64), net.threat_weight.long(), net.ft_weight.long()])
    acc = table[idx].sum(1) + net.ft_bias.long()
    assert bool(((acc > 32767) | (acc < -32768)).any())
    net = random_net(128, 7, "psqt")
    ptab = torch.cat([torch.zeros(1, 8, dtype=torch.int64), net.threat_psqt.long(), net.psqt.long()])
    ps = ptab[idx].sum(1)
    assert bool(((ps >= I32) | (ps < -I32)).any())
    net = random_net(128, 7, "layers")
    x0 = sf16.transform(*(sf16.accumulate(net, t)[0] for t in (stm, nstm))).long()
    s0 = torch.einsum("nk,nmk->nm", x0, net.fc0_weight.long()[bucket]) + net.fc0_bias.long()[bucket]
    assert bool(((s0 >= I32) | (s0 < -I32)).any())


def test_backends_and_forward_int():
    """value_from_indices: auto (None) and "compiled" give the compiled integers, "torch" the
    torch path's; forward_int's centipawns are the same with and without return_parts."""
    net = random_net(64, 3)
    stm, nstm, bucket = indices(23, 4)
    want = sf16.value_from_indices(net, stm, nstm, bucket, backend="torch")
    for backend in (None, "auto", "compiled"):
        assert torch.equal(sf16.value_from_indices(net, stm, nstm, bucket, backend=backend), want)
    cp = sf16.forward_int(net, stm, nstm, bucket)
    cp_parts, parts = sf16.forward_int(net, stm, nstm, bucket, return_parts=True)
    assert torch.equal(cp, cp_parts) and torch.equal(parts["value"], want)
    # int64 indices, and a net changed in place is re-read (the prepared arrays follow it)
    assert torch.equal(compiled.values_sfnnv16(net, stm.long(), nstm.long(), bucket), want)
    net.fc2_bias.add_(5000)
    assert torch.equal(compiled.values_sfnnv16(net, stm, nstm, bucket),
                       sf16.value_from_indices(net, stm, nstm, bucket, backend="torch"))


def test_refusals():
    net = random_net(64, 1)
    stm, nstm, bucket = indices(5, 2)
    with pytest.raises(ValueError, match="out of range 86896"):
        compiled.values_sfnnv16(net, stm + NUM_INPUTS, nstm, bucket)
    with pytest.raises(ValueError, match="outside 0..7"):
        compiled.values_sfnnv16(net, stm, nstm, bucket + 8)
    with pytest.raises(ValueError, match="must be"):
        compiled.values_sfnnv16(net, stm, nstm[:2], bucket)
    assert compiled.values_sfnnv16(net, stm[:0], nstm[:0], bucket[:0]).shape == (0,)
    # a net the kernel does not take: None, and backend="compiled" says so
    net.fc1_weight = net.fc1_weight[:, :, :32].contiguous()
    assert not compiled.applicable(net) and compiled.values_sfnnv16(net, stm, nstm, bucket) is None
    with pytest.raises(RuntimeError, match="does not apply"):
        sf16.value_from_indices(net, stm, nstm, bucket, backend="compiled")
