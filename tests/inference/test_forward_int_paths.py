"""Every exact path of ``forward_int`` / ``evaluate`` against a plain int64 reference (torch.equal).

Paths: the compiled kernels (inference/kinds/perspective/compiled.py: numba, the default on CPU), and the torch
path (``backend="torch"``; inference/kinds/perspective/net.py, ``l1_plan``): the int8 ``torch._int_mm`` L1 with one-column products
(steps whose positions need few bucket columns), the same with whole products (many buckets, or
one-column products disabled), and the float64 fallback; the feature transformer with and
without the static int16 proof; ``evaluate``'s piece-count sort, truncated bags, table-encoder
bags and its generic-encoder path. Nets at the audit limits (|l1w| = 128 for screlu/pairwise,
|l1w| up to 32767 for crelu), odd batch sizes, the empty batch, −1 padding anywhere, every
bucket value, overflow at the int16 / int32 boundaries, and a run under oneDNN ISAs without
VNNI (where int8 products can saturate or, for one column, be wrong: the self-check must catch
it). No timings here: ``nnue bench infer`` measures speed.
"""
from __future__ import annotations

import dataclasses
import platform
import subprocess
import sys

import pytest
import torch

import nnue.inference.exact as exactmod
import nnue.inference.kinds.perspective as netmod
from nnue.inference import backends
from nnue.inference.kinds.perspective import IntegerNet, make_arch
from nnue.inference.api import boards_from_fens, evaluate
from nnue.inference.exact import accumulators, accumulators_f32
from nnue.inference.kinds.perspective import forward_int
from nnue.spec.quant import QuantScheme
from nnue.pipeline.features import get_feature_set
from tests.samples import SAMPLE

ACTS = ["crelu", "screlu", "pairwise_crelu"]
PATHS = ["compiled", "int8", "int8-no-gemv", "f64"]
INT32_MAX = (1 << 31) - 1


# -- the reference: the module docstring's formula in plain int64 ------------------------------

def reference_acc(net: IntegerNet, idx: torch.Tensor) -> torch.Tensor:
    """(N, A) index lists (any negative = padding) -> (N, H) int64 accumulators, unchecked."""
    f, h = net.l0w.shape
    rows = torch.cat([net.l0w.long(), torch.zeros(1, h, dtype=torch.long)])
    parts = [torch.zeros((0, h), dtype=torch.long)]
    for c in range(0, idx.shape[0], 256):  # bounded memory
        i = idx[c:c + 256].long()
        parts.append(rows[torch.where(i >= 0, i, f)].sum(1) + net.l0b.long())
    return torch.cat(parts)


def reference(net: IntegerNet, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor, accs=None):
    """(evals, accumulators (N, 2, H), L1 sums) in int64, or OverflowError like forward_int.
    accs: the two reference accumulators when already computed."""
    s, act = net.scheme, net.arch["activation"]
    h = net.l0w.shape[1]
    accs = accs or [reference_acc(net, stm), reference_acc(net, nstm)]
    xs = []
    for a in accs:
        if a.numel() and (a.min() < -32768 or a.max() > 32767):
            raise OverflowError("accumulator leaves int16")
        v = a.clamp(0, s.qa)
        if act == "screlu":
            v = v * v
        elif act == "pairwise_crelu":
            v = v[:, : h // 2] * v[:, h // 2:]
        xs.append(v)
    x = torch.cat(xs, 1)
    total = (x * net.l1w.long()[bucket]).sum(1)
    if total.numel() and (total.min() < -INT32_MAX - 1 or total.max() > INT32_MAX):
        raise OverflowError("L1 sum leaves the int32 range")
    out = total if act == "crelu" else torch.div(total, s.qa, rounding_mode="trunc")
    out = out + net.l1b.long()[bucket]
    if out.numel() and (out.min() < -INT32_MAX - 1 or out.max() > INT32_MAX):
        raise OverflowError("L1 output leaves the int32 range")
    ev = torch.div(out * s.scale, s.qa * s.qb, rounding_mode="trunc")
    return ev, torch.stack(accs, 1), total


# -- nets and inputs ----------------------------------------------------------------------------

def random_net(act: str, regime: str, hidden: int = 48, buckets: int = 8, seed: int = 0,
               fs_name: str = "chess768", ft: int = 900) -> IntegerNet:
    """regime "small": |l1w| ≤ 64 (one weight digit); "limit": the audit's limit with ±limit
    present in every bucket (128 for screlu/pairwise: two digits; 32767 for crelu: three, and
    −32768 too)."""
    fs = get_feature_set(fs_name)
    arch = make_arch(fs_name, hidden, act, f"MaterialCount<{buckets}>")
    g = torch.Generator().manual_seed(seed)
    l0w = torch.randint(-ft, ft + 1, (fs.num_inputs, hidden), generator=g)
    l0b = torch.randint(-400, 700, (hidden,), generator=g)
    lim = 64 if regime == "small" else (32767 if act == "crelu" else 128)
    l1w = torch.randint(-lim, lim + 1, (buckets, arch["l1_inputs"]), generator=g)
    l1w[:, 0], l1w[:, 1] = lim, -lim
    if regime == "limit" and act == "crelu":
        l1w[:, 2] = -32768
    l1b = torch.randint(-32768, 32768, (buckets,), generator=g)
    return IntegerNet(arch, QuantScheme(), l0w.to(torch.int16), l0b.to(torch.int16), l1w.to(torch.int16),
                      l1b.to(torch.int16))


def random_lists(n: int, num_inputs: int, width: int = 32, seed: int = 0):
    """(n, width) int32 index lists of both perspectives with −1 padding at random places
    (anywhere in the list, not only at the end), repeats allowed."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(2):
        idx = torch.randint(0, num_inputs, (n, width), generator=g, dtype=torch.int32)
        pad = torch.rand((n, width), generator=g) < torch.rand((n, 1), generator=g)
        out.append(torch.where(pad, -1, idx).to(torch.int32))
    return out


def with_path(net: IntegerNet, path: str, monkeypatch) -> IntegerNet:
    """A fresh copy of ``net`` (own caches) evaluated by ``path``: "compiled" (the numba kernels,
    required: RuntimeError if they do not run) or the torch path with the L1 plan ``path``
    (checks it was chosen)."""
    net = dataclasses.replace(net)
    monkeypatch.setattr(backends, "DEFAULT_BACKEND", "compiled" if path == "compiled" else "torch")
    if path == "compiled":
        return net
    if path == "f64":
        monkeypatch.setattr(exactmod, "int_mm_is_exact", lambda k2, cols: False)
    elif path == "int8-no-gemv":
        monkeypatch.setattr(exactmod, "int_mm_is_exact", lambda k2, cols: cols != 1)
    plan = netmod.l1_plan(net)
    if path.startswith("int8") and plan["mode"] != "int8":
        pytest.skip("torch._int_mm is not exact on this machine: only the float64 path runs here")
    assert plan["mode"] == ("f64" if path == "f64" else "int8")
    if path == "int8-no-gemv":
        assert not plan["gemv"]
    return net


@pytest.fixture(scope="module")
def sample_boards():
    fens = [line[4:].strip() for line in open(SAMPLE) if line.startswith("fen ")]
    return boards_from_fens(fens)  # 4,015 positions of real games


# -- forward_int ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("regime", ["small", "limit"])
@pytest.mark.parametrize("act", ACTS)
def test_forward_int_paths_equal_int64_reference(act, regime, path, monkeypatch):
    net = with_path(random_net(act, regime, seed=len(act) + len(regime)), path, monkeypatch)
    nb = net.arch["num_buckets"]
    g = torch.Generator().manual_seed(7)
    for n in (0, 1, 7, 513, 1100):  # empty, tiny, one past a step, several steps with a remainder
        stm, nstm = random_lists(n, 768, seed=n)
        accs = [reference_acc(net, stm), reference_acc(net, nstm)]
        for bucket in (torch.randint(0, nb, (n,), generator=g),          # every bucket in a step
                       torch.arange(n) * nb // max(n, 1),                # sorted: few per step
                       torch.full((n,), nb - 1, dtype=torch.int64)):     # one bucket
            ev, parts = forward_int(net, stm, nstm, bucket, return_parts=True)
            ref, acc, total = reference(net, stm, nstm, bucket, accs)
            assert ev.dtype == torch.int64 and parts["acc"].dtype == torch.int32
            assert torch.equal(ev, ref), (n, bucket[:8])
            assert torch.equal(parts["acc"].long(), acc)
            assert torch.equal(parts["sum"], total)
            assert torch.equal(forward_int(net, stm, nstm, bucket), ev)
    ev = forward_int(net, *random_lists(2000, 768, seed=3), torch.arange(2000) % nb)
    assert set(torch.arange(2000)[ev != 0].remainder(nb).tolist()) == set(range(nb))
    assert min(ev.tolist()) < 0 < max(ev.tolist())


@pytest.mark.parametrize("path", PATHS)
def test_unproven_accumulators_are_checked_at_run_time(path, monkeypatch):
    """|l0w| up to 2000: 32 rows could reach 64000, so nothing is proven statically; random
    lists stay in int16 and evaluate, a list of 17 copies of a row of +2000 overflows."""
    net = random_net("screlu", "limit", ft=2000, seed=5)
    net = with_path(net, path, monkeypatch)
    assert not exactmod.acc_int16_proven(net, 32)
    assert exactmod.acc_int16_proven(random_net("screlu", "limit"), 32)
    stm, nstm = random_lists(600, 768, seed=9)
    stm, nstm = stm // 8, nstm // 8  # rows 0..95 and −1 padding
    bucket = torch.zeros(600, dtype=torch.int64)
    ref, _, _ = reference(net, stm, nstm, bucket)
    assert torch.equal(forward_int(net, stm, nstm, bucket), ref)
    l0w = net.l0w.clone()
    l0w[5] = 2000
    bad = dataclasses.replace(net, l0w=l0w)
    nstm[599] = -1
    nstm[599, :17] = 5  # 17·2000 + l0b ≥ 33,600 on every neuron
    with pytest.raises(OverflowError, match="accumulator leaves int16"):
        reference(bad, stm, nstm, bucket)
    with pytest.raises(OverflowError, match="accumulator leaves int16"):
        forward_int(bad, stm, nstm, bucket)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("bias,fits", [(127, True), (128, False)])
def test_int32_boundary_with_three_digit_weights(path, bias, fits, monkeypatch):
    """crelu, every accumulator at QA (bias 300, no weights): the L1 sum 255·(257·32767 + 385)
    = 2,147,483,520; with l1b = 127 the output is exactly INT32_MAX (evaluated), 128 one past
    (OverflowError). Mirrored with negative weights at INT32_MIN − 1 and INT32_MIN."""
    for sign in (1, -1):
        arch = make_arch("chess768", 129, "crelu", "MaterialCount<1>")
        row = torch.tensor([32767] * 257 + [385], dtype=torch.int64) * sign
        net = IntegerNet(arch, QuantScheme(), torch.zeros((768, 129), dtype=torch.int16),
                         torch.full((129,), 300, dtype=torch.int16), row.view(1, -1).to(torch.int16),
                         torch.tensor([sign * bias - (sign < 0)], dtype=torch.int16))
        net = with_path(net, path, monkeypatch)
        stm, nstm = random_lists(5, 768, seed=1)
        bucket = torch.zeros(5, dtype=torch.int64)
        if fits:
            ev, parts = forward_int(net, stm, nstm, bucket, return_parts=True)
            assert torch.equal(ev, reference(net, stm, nstm, bucket)[0])
            assert set(parts["sum"].tolist()) == {sign * 2_147_483_520}
        else:
            with pytest.raises(OverflowError, match="int32"):
                forward_int(net, stm, nstm, bucket)


@pytest.mark.parametrize("path", PATHS)
def test_l1_sum_overflow_raised(path, monkeypatch):
    """screlu, every activation QA² = 65025 on 260 inputs of weight 128, plus one of 2: the sum
    65025·33282 leaves int32 (the audit would refuse this net; evaluation must not wrap)."""
    arch = make_arch("chess768", 131, "screlu", "MaterialCount<1>")
    row = torch.full((1, 262), 128, dtype=torch.int16)
    row[0, -2:] = torch.tensor([2, 0])
    net = IntegerNet(arch, QuantScheme(), torch.zeros((768, 131), dtype=torch.int16),
                     torch.full((131,), 255, dtype=torch.int16), row, torch.zeros(1, dtype=torch.int16))
    net = with_path(net, path, monkeypatch)
    stm, nstm = random_lists(3, 768)
    with pytest.raises(OverflowError, match="L1 sum.*int32"):
        forward_int(net, stm, nstm, torch.zeros(3, dtype=torch.int64))


def test_weight_digits_cover_int16():
    w = torch.arange(-32768, 32768, dtype=torch.int64).view(2, -1)
    digits = exactmod.weight_digits(w)
    assert len(digits) == 3 and all(int(d.abs().max()) <= 64 for d in digits)
    assert torch.equal(sum(d * 128 ** j for j, d in enumerate(digits)), w)
    small = torch.arange(-64, 65, dtype=torch.int64).view(1, -1)
    assert exactmod.weight_digits(small) == [small]
    two = exactmod.weight_digits(torch.arange(-128, 129, dtype=torch.int64).view(1, -1))
    assert len(two) == 2 and torch.equal(two[0] + 128 * two[1], torch.arange(-128, 129).view(1, -1))


def test_caches_follow_the_weights(monkeypatch):
    """The float tables and the L1 plan are kept on the net, and rebuilt when a weight tensor is
    replaced or changed in place."""
    net = random_net("screlu", "small", seed=11)
    stm, nstm = random_lists(300, 768, seed=4)
    bucket = torch.arange(300) % 8
    forward_int(net, stm, nstm, bucket)
    net.l1w[3, :10] = 128          # in place: the plan needs a second digit now
    net.l0w[7] += 5                # in place
    net.l0b = net.l0b + 1          # replaced
    assert torch.equal(forward_int(net, stm, nstm, bucket), reference(net, stm, nstm, bucket)[0])
    assert netmod.l1_plan(net)["mode"] != "int8" or netmod.l1_plan(net)["groups"] == 4
    net.l1w[2, :5] = -77           # the compiled kernels' copy follows too
    stm[0, :3] = 7
    for backend in ("compiled", "torch"):
        assert torch.equal(forward_int(net, stm, nstm, bucket, backend=backend),
                           reference(net, stm, nstm, bucket)[0])


def test_accumulators_treat_any_negative_as_padding_and_reject_out_of_range():
    net = random_net("crelu", "small", seed=2)
    stm, _ = random_lists(50, 768, seed=6)
    stm = torch.where(stm < 0, torch.randint(-9, 0, stm.shape, dtype=torch.int32), stm)
    ref = reference(net, stm, stm, torch.zeros(50, dtype=torch.int64))[1][:, 0]
    assert torch.equal(accumulators(net, stm).long(), ref)
    assert torch.equal(accumulators_f32(net, stm), ref.float())
    assert torch.equal(forward_int(net, stm, stm, torch.zeros(50, dtype=torch.int64)),
                       reference(net, stm, stm, torch.zeros(50, dtype=torch.int64))[0])
    stm[3, 4] = 768
    with pytest.raises(IndexError):
        accumulators(net, stm)
    with pytest.raises(IndexError):
        forward_int(net, stm, stm, torch.zeros(50, dtype=torch.int64))


# -- evaluate -------------------------------------------------------------------------------------

def eval_reference(net, boards):
    fs = net.features
    stm, nstm = fs.encode(boards)
    return reference(net, stm, nstm, net.buckets.of(boards))[0]


@pytest.mark.parametrize("backend", ["compiled", "torch"])
@pytest.mark.parametrize("fs_name,act,spec", [
    ("chess768", "screlu", "MaterialCount<8>"),
    ("chess768", "crelu", "SFPieceCount<8>"),
    ("halfkp", "pairwise_crelu", "MaterialCount<8>"),      # kings dropped: 30-wide lists
    ("kb768hm4", "screlu", "SFPieceCount<8>"),
    ("halfkav2_hm", "crelu", "MaterialCount<4>"),
])
def test_evaluate_equals_reference(fs_name, act, spec, backend, sample_boards, monkeypatch):
    monkeypatch.setattr(backends, "DEFAULT_BACKEND", backend)
    fs = get_feature_set(fs_name)
    arch = make_arch(fs_name, 48, act, spec)
    g = torch.Generator().manual_seed(len(fs_name))
    lim = 32767 if act == "crelu" else 128
    net = IntegerNet(arch, QuantScheme(),
                     torch.randint(-700, 701, (fs.num_inputs, 48), generator=g).to(torch.int16),
                     torch.randint(-300, 600, (48,), generator=g).to(torch.int16),
                     torch.randint(-lim, lim + 1, (arch["num_buckets"], arch["l1_inputs"]),
                                   generator=g).to(torch.int16),
                     torch.randint(-9000, 9000, (arch["num_buckets"],), generator=g).to(torch.int16))
    perm = torch.randperm(len(sample_boards), generator=g)
    boards = sample_boards[perm]  # shuffled: the piece-count sort and the way back matter
    ref = eval_reference(net, boards)
    assert torch.equal(evaluate(net, boards), ref)
    for n in (1, 2, 511, 513):
        assert torch.equal(evaluate(net, boards[:n]), ref[:n])
    assert evaluate(net, boards[:0]).shape == (0,) and evaluate(net, boards[:0]).dtype == torch.int64
    assert torch.equal(evaluate(net, boards, chunk=37), ref)


def test_evaluate_across_encode_chunks_and_paths(sample_boards, monkeypatch):
    """More than 4,096 positions (two encode calls), every L1 path."""
    boards = torch.cat([sample_boards, sample_boards[torch.randperm(len(sample_boards))[:900]]])
    for path in PATHS:
        with monkeypatch.context() as mp:
            net = with_path(random_net("screlu", "limit", hidden=32, seed=8), path, mp)
            assert torch.equal(evaluate(net, boards), eval_reference(net, boards)), path


@pytest.mark.parametrize("fs_name", ["chess768", "halfkp", "kb768hm4", "halfkav2_hm"])
def test_lookup_keys_give_the_encoded_lists(fs_name, sample_boards):
    """TableEncoder.lookup_keys: table[offsets + keys] is what encode returns, also past one
    encoder chunk (4,096 boards); the same errors on a bad board."""
    enc = get_feature_set(fs_name).encode
    boards = torch.cat([sample_boards, sample_boards[:200]])
    keys, offsets = enc.lookup_keys(boards)
    stm, nstm = enc(boards)
    assert keys.dtype == offsets.dtype == torch.int32 and offsets.shape == (len(boards), 2)
    for p, lists in enumerate((stm, nstm)):
        assert torch.equal(enc.table_cpu[(keys + offsets[:, p:p + 1]).long()], lists)
    if enc.king_relative:
        bad = sample_boards[:3].clone()
        bad[1, 8:24] = 0  # every piece a white pawn: no kings
        with pytest.raises(ValueError, match="board 1"):
            enc.lookup_keys(bad)


@pytest.mark.parametrize("backend", ["compiled", "torch"])
def test_evaluate_boards_without_pieces(backend, sample_boards, monkeypatch):
    """Empty boards (chess768 needs no kings): zero-width bags, the bias alone."""
    monkeypatch.setattr(backends, "DEFAULT_BACKEND", backend)
    net = random_net("screlu", "limit", seed=13)
    boards = torch.cat([torch.zeros((3, 32), dtype=torch.uint8), sample_boards[:5]] * 2)  # 16 > SMALL_BATCH
    assert torch.equal(evaluate(net, boards), eval_reference(net, boards))


class _GenericNet(IntegerNet):
    """An IntegerNet whose feature set encodes through a plain function (not a TableEncoder),
    optionally moving the padding to the front of each list."""

    pad_first = False

    @property
    def features(self):
        fs = get_feature_set(self.arch["feature_set"])
        flip = self.pad_first

        def encode(boards):
            stm, nstm = fs.encode(boards)
            return (stm.flip(1), nstm.flip(1)) if flip else (stm, nstm)
        return dataclasses.replace(fs, encode=encode)


@pytest.mark.parametrize("pad_first", [False, True])
def test_evaluate_generic_encoder(pad_first, sample_boards):
    base = random_net("pairwise_crelu", "limit", hidden=40, seed=12, fs_name="halfkp")
    net = _GenericNet(**{f.name: getattr(base, f.name) for f in dataclasses.fields(IntegerNet)})
    net.pad_first = pad_first
    boards = sample_boards[::3]
    assert torch.equal(evaluate(net, boards), eval_reference(base, boards))


@pytest.mark.parametrize("backend", ["compiled", "torch"])
def test_evaluate_raises_like_forward_int(backend, sample_boards, monkeypatch):
    """An accumulator overflow on 32-piece positions only (32·1000 + 800 > 32767): evaluate
    raises on a batch holding one, evaluates a batch without."""
    from nnue.pipeline.features.board_tensor import piece_count

    monkeypatch.setattr(backends, "DEFAULT_BACKEND", backend)
    arch = make_arch("chess768", 16, "screlu", "MaterialCount<8>")
    net = IntegerNet(arch, QuantScheme(), torch.full((768, 16), 1000, dtype=torch.int16),
                     torch.full((16,), 800, dtype=torch.int16), torch.ones((8, 32), dtype=torch.int16),
                     torch.zeros(8, dtype=torch.int16))
    pc = piece_count(sample_boards)
    full, other = sample_boards[pc == 32], sample_boards[pc < 31]
    assert len(full) and len(other)
    with pytest.raises(OverflowError, match="accumulator leaves int16"):
        evaluate(net, torch.cat([other[:100], full[:1]]))
    assert torch.equal(evaluate(net, other), eval_reference(net, other))


# -- int8 products on CPUs without VNNI -----------------------------------------------------------

SCRIPT = """
import torch
from tests.inference.test_forward_int_paths import random_net, random_lists, reference
from nnue.inference.kinds.perspective import forward_int, l1_plan as _l1_plan
out = []
for act, regime in (("screlu", "limit"), ("crelu", "limit"), ("pairwise_crelu", "small")):
    net = random_net(act, regime, hidden=96, seed=3)
    stm, nstm = random_lists(700, 768, seed=2)
    for bucket in (torch.arange(700) % 8, torch.arange(700) * 8 // 700):
        ok = torch.equal(forward_int(net, stm, nstm, bucket, backend="torch"), reference(net, stm, nstm, bucket)[0])
        plan = _l1_plan(net)
        out.append(f"{act}:{plan['mode']}:{plan.get('gemv')}:{ok}")
a = torch.full((64, 512), 127, dtype=torch.int8)
b = torch.full((512, 16), 127, dtype=torch.int8)
sat = not torch.equal(torch._int_mm(a, b).long(), (a.double() @ b.double()).long())
print(" ".join(out), "saturates_full_range=" + str(sat))
"""


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64") or not torch.backends.mkldnn.is_available(),
                    reason="oneDNN ISA limits are an x86 matter")
@pytest.mark.parametrize("isa", ["AVX2", "AVX512_CORE"])
def test_exact_under_isas_without_vnni(isa):
    """Without VNNI, oneDNN's int8 product can saturate full-range int8 inputs (seen on Intel
    processors; the script reports it) and, for one column under AVX512_CORE, return wrong sums: the digit bound (|d| ≤ 64) and the
    first-use check keep forward_int exact anyway."""
    from pathlib import Path

    env = {"ONEDNN_MAX_CPU_ISA": isa, "PATH": "/usr/bin:/bin"}
    repo = Path(__file__).resolve().parents[2]  # `python -c` imports from its working directory
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, cwd=repo, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    words = r.stdout.split()
    # Whether full-range int8 products saturate depends on the processor oneDNN finds (seen on an
    # Intel machine under both ISA caps; not on an AMD EPYC): the exactness below must hold either way.
    assert words[-1] in ("saturates_full_range=True", "saturates_full_range=False"), r.stdout
    for w in words[:-1]:
        act, mode, gemv, ok = w.split(":")
        assert ok == "True", w
        assert mode == "int8", w  # the digit bound keeps the int8 path exact even here
