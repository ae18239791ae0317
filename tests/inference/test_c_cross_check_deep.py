"""Hard gate for deep nets (L0 → L1 → L2 → out): the independent C evaluator
(tests/c/nnue_eval.c, ``--deep``) equals :mod:`nnue.inference.kinds.deep` exactly, on ≥ 10,000 real
self-play positions per net, for every L0 activation × hidden activation, several feature sets
and both output-bucket kinds; with weights at the int8 limits and sums at the int32 limits.

Note on the floor shift y = s >> 6: a floor and a truncating shift differ only for
−64 < s < 0 (−1 against 0), and both clamp to 0 in every hidden activation, so the evals
cannot tell them apart; the tests check that negative non-multiples of 64 occur (the path is
exercised), the C code floors explicitly as the formula says.
"""
from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest
import torch

from nnue.cli import main as cli_main
from nnue.inference.kinds.deep import DeepIntegerNet, forward_int, make_deep_arch
from nnue.inference.api import boards_from_fens, evaluate, evaluate_fens
from nnue.inference.exact import INT32_MAX, INT32_MIN
from nnue.spec.quant import QuantScheme
from tests.cref import c_args_for_arch, legal_fens, run_c
from tests.netfiles import INT16_LIMIT, make_adversarial_deep_int_net, make_deep_int_net

N_REAL = 10_000
QA, QB, SCALE = 255, 64, 400
KB768_EXPLICIT = "kb768:01234567/89abcdef/ghhiijjk/llllmmmm/nnnnoooo/nnnnoooo/pppppppp/pppppppp"


def _cross_check(c_eval, net: DeepIntegerNet, fens, tmp_path, boards=None) -> list[int]:
    """C eval of net.bin == evaluate_fens(net, fens) (or evaluate(net, boards), the same with
    the FENs packed once), exactly; returns the evals."""
    net.write_bin(tmp_path / "net.bin")
    theirs = run_c(c_eval, tmp_path / "net.bin", c_args_for_arch(net.arch), fens)
    ours = evaluate_fens(net, fens) if boards is None else evaluate(net, boards).tolist()
    assert len(ours) == len(theirs) == len(fens)
    bad = [(f, o, t) for f, o, t in zip(fens, ours, theirs) if o != t]
    assert not bad, f"{len(bad)} of {len(fens)} differ, first (fen, python, C): {bad[:3]}"
    return ours


def _parts(net: DeepIntegerNet, fens_or_boards):
    """forward_int with its parts: (evals, {"s1", "s2", "out", "acc"}, buckets)."""
    b = boards_from_fens(fens_or_boards) if isinstance(fens_or_boards, list) else fens_or_boards
    stm, nstm = net.features.encode(b)
    bucket = net.buckets.of(b)
    ev, parts = forward_int(net, stm, nstm, bucket, return_parts=True)
    return ev, parts, bucket


def _regimes(s: torch.Tensor) -> tuple[float, float, float]:
    """Fractions of y = s >> 6 below 0, inside [0, 255], above 255."""
    y = torch.div(s, QB, rounding_mode="floor")
    return (float((y < 0).float().mean()), float(((y >= 0) & (y <= QA)).float().mean()),
            float((y > QA).float().mean()))


def _ids(cases):
    out = []
    for c in cases:
        v = c.values if hasattr(c, "values") else c
        out.append(f"{v[0].split(':')[0]}-{v[1]}-{v[2]}-{v[6]}")
    return out


# (feature set, L0 activation, hidden activation, H, N1, N2, output buckets): every L0
# activation × hidden activation, spread over the feature sets and both bucket kinds (the
# default run covers all six pairs; `-m slow` adds more)
CASES = [
    ("chess768", "crelu", "crelu", 32, 16, 32, "MaterialCount<8>"),
    ("halfkav2_hm", "crelu", "screlu", 48, 8, 16, "SFPieceCount<8>"),
    ("kb768hm4", "screlu", "crelu", 64, 16, 32, "SFPieceCount<8>"),
    ("chess768", "screlu", "screlu", 64, 16, 32, "MaterialCount<8>"),
    ("halfkp", "pairwise_crelu", "crelu", 64, 16, 16, "MaterialCount<8>"),
    ("kb768hm16", "pairwise_crelu", "screlu", 64, 32, 32, "SFPieceCount<8>"),
    pytest.param(KB768_EXPLICIT, "screlu", "crelu", 32, 8, 8, "MaterialCount<5>", marks=pytest.mark.slow),
    pytest.param("halfkav2_hm", "pairwise_crelu", "crelu", 96, 15, 7, "MaterialCount<1>", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("fs_name,act,hact,hidden,n1,n2,spec", CASES,
                         ids=_ids(CASES))
def test_deep_equals_c(fs_name, act, hact, hidden, n1, n2, spec, c_eval, fens, boards, tmp_path):
    net = make_deep_int_net(fs_name, act, hidden, spec, n1, n2, hact, seed=hidden + n1)
    ours = _cross_check(c_eval, net, fens, tmp_path, boards)
    assert min(ours) < 0 < max(ours)
    assert len(set(ours)) > len(ours) // 10
    ev, parts, bucket = _parts(net, boards[:3000])  # the first 3,000: the sums' statistics
    assert ev.tolist() == ours[:3000]
    # every hidden regime is hit in both layers: dead, linear, clipped at 255
    for name in ("s1", "s2"):
        assert min(_regimes(parts[name])) > 0.05, (name, _regimes(parts[name]))
        s = parts[name]
        assert bool(((s < 0) & (s % QB != 0)).any())
    # the truncating eval division sees negative non-multiples
    out = parts["out"]
    assert bool(((out < 0) & (out * SCALE % (QA * QB) != 0)).any())
    assert set(net.buckets.of(boards).tolist()) == set(range(net.arch["num_buckets"]))


def test_deep_through_cli(c_eval, fens, tmp_path):
    """`nnue eval NET.safetensors --fens FILE` on a deep net == C on its net.bin."""
    fens = legal_fens(fens)  # the CLI checks positions as nnue pack does
    net = make_deep_int_net("halfkav2_hm", "screlu", 32, "SFPieceCount<8>", 16, 32, "screlu", seed=5)
    net.save(tmp_path / "net.safetensors")
    net.write_bin(tmp_path / "net.bin")
    (tmp_path / "fens.txt").write_text("\n".join(fens) + "\n")
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert cli_main(["eval", str(tmp_path / "net.safetensors"), "--fens", str(tmp_path / "fens.txt")]) == 0
    ours = [int(v) for v in buf.getvalue().split()]
    theirs = run_c(c_eval, tmp_path / "net.bin", c_args_for_arch(net.arch), fens)
    assert len(ours) == len(fens) >= N_REAL
    assert ours == theirs
    assert min(ours) < 0 < max(ours)


# default: every L0 activation and both hidden activations; `-m slow` adds more
ADVERSARIAL = [
    pytest.param("chess768", "crelu", "crelu", 64, 16, 32, "MaterialCount<8>", marks=pytest.mark.slow),
    ("chess768", "screlu", "screlu", 96, 16, 32, "SFPieceCount<8>"),
    pytest.param("halfkp", "pairwise_crelu", "screlu", 64, 32, 16, "MaterialCount<8>", marks=pytest.mark.slow),
    ("halfkav2_hm", "pairwise_crelu", "crelu", 64, 8, 16, "SFPieceCount<8>"),
    pytest.param("kb768hm16", "screlu", "crelu", 128, 32, 32, "MaterialCount<8>", marks=pytest.mark.slow),
    ("kb768hm4", "crelu", "screlu", 48, 16, 8, "MaterialCount<4>"),
]


@pytest.mark.parametrize("fs_name,act,hact,hidden,n1,n2,spec", ADVERSARIAL,
                         ids=_ids(ADVERSARIAL))
def test_deep_adversarial(fs_name, act, hact, hidden, n1, n2, spec, c_eval, fens, boards, tmp_path):
    net = make_adversarial_deep_int_net(fs_name, act, hidden, spec, n1, n2, hact, seed=hidden + n2)
    # weights at the int8 limits, the worst-case sums of a third of the neurons exactly at int32
    for w, b in ((net.l1w, net.l1b), (net.l2w, net.l2b)):
        assert int(w.min()) == -128 and int(w.max()) == 127
        worst = b.to(torch.int64).abs() + w.to(torch.int64).abs().sum(2) * QA
        assert int(worst.max()) == INT32_MAX
    assert set(net.outw.unique().tolist()) == {-128, 127}
    ev, parts, _ = _parts(net, boards)  # the path evaluate_fens takes, with its parts
    ours = ev.tolist()
    net.write_bin(tmp_path / "net.bin")
    theirs = run_c(c_eval, tmp_path / "net.bin", c_args_for_arch(net.arch), fens)
    bad = [(f, o, t) for f, o, t in zip(fens, ours, theirs) if o != t]
    assert len(theirs) == len(ours) and not bad, f"{len(bad)} differ, first (fen, python, C): {bad[:3]}"
    assert int(parts["acc"].max()) == INT16_LIMIT and int(parts["acc"].min()) == -INT16_LIMIT
    assert min(ours) < 0 < max(ours)
    for name in ("s1", "s2"):
        s = parts[name]
        assert int(s.max()) > 2**31 - 2**24 and int(s.min()) < -(2**31) + 2**24  # near the int32 limits
        assert bool(((s < 0) & (s % QB != 0)).any())
        assert min(_regimes(s)) > 0.01, (name, _regimes(s))
    out = parts["out"]
    assert bool(((out < 0) & (out * SCALE % (QA * QB) != 0)).any())


# ---------------------------------------------------------------------------------------------
# int32 boundaries, layer by layer: at the limit the sum is evaluated (C == Python); one past,
# Python raises OverflowError and C reports the overflow


def _boundary_net(act: str, hact: str, layer: str, side: int, past: bool) -> DeepIntegerNet:
    """chess768, every L0 neuron at QA on every position (rows +1023, bias 31). Each dense
    layer's weights are all +127 or all −128, its bias set so that the sum is exactly INT32_MAX
    (+127 weights) or INT32_MIN (−128 weights) on every position; ``past`` moves ``layer``'s
    (l1, l2 or out) bias one further. ``side`` +1/−1 picks the extreme of ``layer``; the other
    layers sit at +INT32_MAX, so that every activation after them is at its top."""
    H, n1, n2 = 8, 4, 4
    arch = make_deep_arch("chess768", H, act, "MaterialCount<1>", n1, n2, hact)
    L1 = arch["l1_inputs"]
    x0max = QA if act == "crelu" else (QA * QA) >> 8
    xhmax = QA if hact == "crelu" else (QA * QA) >> 8
    l0w = torch.full((768, H), 1023, dtype=torch.int16)
    l0b = torch.full((H,), 31, dtype=torch.int16)

    def dense(name: str, m: int, k: int, xmax: int):
        s = side if name == layer else 1
        w = 127 if s > 0 else -128
        target = INT32_MAX if s > 0 else INT32_MIN
        b = target - w * k * xmax
        if past and name == layer:
            b += s
        return torch.full((1, m, k), w, dtype=torch.int8), torch.full((1, m), b, dtype=torch.int64)

    l1w, l1b = dense("l1", n1, L1, x0max)
    x1max = xhmax if (layer != "l1" or side > 0) else 0
    l2w, l2b = dense("l2", n2, n1, x1max)
    x2max = xhmax if (layer != "l2" or side > 0) else 0
    ow, ob = dense("out", 1, n2, x2max)
    for b in (l1b, l2b, ob):
        if not past:
            assert INT32_MIN <= int(b.min()) and int(b.max()) <= INT32_MAX
    clamp32 = lambda b: b.clamp(INT32_MIN, INT32_MAX).to(torch.int32)  # noqa: E731
    # a bias one past the limit may itself leave int32 only when the sum's other part is 0
    return DeepIntegerNet(arch, QuantScheme(), l0w, l0b, l1w, clamp32(l1b), l2w, clamp32(l2b),
                          ow.view(1, n2), clamp32(ob.view(1)))


@pytest.mark.parametrize("act,hact", [("crelu", "crelu"), ("screlu", "screlu"), ("pairwise_crelu", "crelu")])
@pytest.mark.parametrize("layer", ["l1", "l2", "out"])
@pytest.mark.parametrize("side", [1, -1])
def test_int32_boundaries(act, hact, layer, side, c_eval, fens, tmp_path):
    some = fens[::100]
    at = _boundary_net(act, hact, layer, side, past=False)
    ours = _cross_check(c_eval, at, some, tmp_path)
    _, parts, _ = _parts(at, some)
    key = {"l1": "s1", "l2": "s2", "out": "out"}[layer]
    assert set(parts[key].flatten().tolist()) == {INT32_MAX if side > 0 else INT32_MIN}
    if layer == "out":  # out·400 leaves int32: the eval is computed in 64 bits, truncating
        want = side * ((INT32_MAX if side > 0 else -INT32_MIN) * SCALE // (QA * QB))
        assert set(ours) == {want}
    past = _boundary_net(act, hact, layer, side, past=True)
    with pytest.raises(OverflowError):
        evaluate_fens(past, some)
    past.write_bin(tmp_path / "past.bin")
    assert run_c(c_eval, tmp_path / "past.bin", c_args_for_arch(past.arch), some, allow_overflow=True) == \
        [None] * len(some)


@pytest.mark.parametrize("act,hact", [("pairwise_crelu", "crelu"), ("screlu", "screlu")])
def test_exported_deep_net_equals_c(act, hact, c_eval, fens, boards, tmp_path, sample_dataset):
    """A float DeepNet through `export` (quantise, audit, output-bias calibration): the net.bin
    it writes, read by C, gives the evals of the net.safetensors it writes, read by Python."""
    from tests.netfiles import make_deep_model, write_weights

    from nnue.inference import load
    from nnue.trainer.export import export

    model = make_deep_model(act, hidden=32, hidden_activation=hact, seed=13, dense_scale=1.5)
    ck = write_weights(model, tmp_path / "w.safetensors", sample_dataset, val_fraction=1.0)
    export(ck, tmp_path / "net", max_positions=2000)
    net = load(tmp_path / "net" / "net.safetensors")
    assert (tmp_path / "net" / "net.bin").read_bytes() == net.raw_bytes()
    theirs = run_c(c_eval, tmp_path / "net" / "net.bin", c_args_for_arch(net.arch), fens)
    ours = evaluate(net, boards).tolist()
    assert ours == theirs and min(ours) < 0 < max(ours)
