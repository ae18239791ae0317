"""Hard gate: the independent C evaluator (tests/c/nnue_eval.c) equals the integer inference
engine exactly, for every feature set and output-bucket function of perspective nets, on
≥ 10,000 real self-play positions per net, and at the export audit's limits.

The C program is written from the index formulas (pipeline/features docstrings), not from the
Python encoders, so an indexing, bucketing or arithmetic slip on either side shows up here.
"""
from __future__ import annotations

import io
from contextlib import redirect_stdout

import pytest
import torch

from nnue.cli import main as cli_main
from nnue.inference.kinds.perspective import IntegerNet, make_arch
from nnue.inference.api import boards_from_fens, evaluate_fens
from nnue.inference.exact import INT32_MAX, INT32_MIN
from nnue.inference.kinds.perspective import forward_int
from nnue.spec.quant import QuantScheme
from nnue.trainer.export import export
from tests.netfiles import (INT16_LIMIT, l1_weight_limit, make_adversarial_int_net, make_int_net_spec,
                            make_model, write_weights)
from tests.cref import c_args_for_arch, legal_fens, piece_count, real_fens, run_c, run_c_eval
from tests.samples import SAMPLE, selfplay

FRC = "sf15-960-xfen-s2.plain"
N_REAL = 10_000
QA, QB, SCALE = 255, 64, 400

#: non-mirrored king-bucket map with left/right asymmetry and 26 buckets
KB768_EXPLICIT = "kb768:01234567/89abcdef/ghhiijjk/llllmmmm/nnnnoooo/nnnnoooo/pppppppp/pppppppp"
#: a mirrored map spelled out (not a preset)
KB768HM_EXPLICIT = "kb768hm:0123/4567/8888/9999/aaaa/aaaa/bbbb/bbbb"


def _sample_fens(path, n):
    fens = []
    for line in open(path):
        if line.startswith("fen "):
            fens.append(line[4:].strip())
    step = max(1, len(fens) // n)
    return fens[::step][:n]


def _c(c_eval, net: IntegerNet, fens, tmp_path, allow_overflow: bool = False):
    """The C evals of ``net`` (written as net.bin) on ``fens``."""
    net.write_bin(tmp_path / "net.bin")
    return run_c(c_eval, tmp_path / "net.bin", c_args_for_arch(net.arch), fens, allow_overflow)


def _same(fens, ours, theirs):
    bad = [(f, o, t) for f, o, t in zip(fens, ours, theirs) if o != t]
    assert len(ours) == len(theirs) == len(fens)
    assert not bad, f"{len(bad)} of {len(fens)} differ, first (fen, python, C): {bad[:3]}"


def _cross_check(c_eval, net: IntegerNet, fens, tmp_path):
    """C eval of net.bin == evaluate_fens, exactly; returns the evals."""
    theirs = _c(c_eval, net, fens, tmp_path)
    ours = evaluate_fens(net, fens)
    _same(fens, ours, theirs)
    return ours


@pytest.mark.parametrize("act,hidden", [("crelu", 33), ("screlu", 64), ("pairwise_crelu", 48)])
def test_c_reference_equals_nnue_eval(act, hidden, c_eval, tmp_path, sample_dataset):
    """An exported net (export → net.safetensors + net.bin): `nnue eval` == C on the sample."""
    model = make_model(act, hidden=hidden, seed=hidden, ft_scale=0.25, l1_scale=1.9)
    ck = write_weights(model, tmp_path / "w.safetensors", sample_dataset)
    export(ck, tmp_path / "net")
    fens = _sample_fens(SAMPLE, 1200)
    (tmp_path / "fens.txt").write_text("\n".join(fens) + "\n")
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert cli_main(["eval", str(tmp_path / "net" / "net.safetensors"), "--fens", str(tmp_path / "fens.txt")]) == 0
    ours = [int(v) for v in buf.getvalue().split()]
    theirs = run_c_eval(c_eval, tmp_path / "net" / "net.bin", hidden, 8, act, fens)
    assert len(ours) == len(fens) >= 1000
    assert ours == theirs
    assert min(ours) < 0 < max(ours)


def _ids(cases):
    out = []
    for i, c in enumerate(cases):
        v = c.values if hasattr(c, "values") else c
        out.append(f"{v[0].split(':')[0]}-{v[1]}-{v[3]}-{i}")
    return out


# (feature set, activation, H, output buckets): every feature set, every activation and both
# bucket kinds (with bucket counts that clamp: SFPieceCount<4>, and uneven: MaterialCount<5>, <3>);
# the default run covers each feature set, activation and bucket kind, `-m slow` the rest
CASES = [
    ("chess768", "crelu", 33, "MaterialCount<8>"),
    ("chess768", "pairwise_crelu", 48, "SFPieceCount<8>"),
    pytest.param("chess768", "screlu", 16, "MaterialCount<1>", marks=pytest.mark.slow),
    ("halfkp", "screlu", 16, "MaterialCount<8>"),
    ("halfkp", "pairwise_crelu", 24, "SFPieceCount<8>"),
    pytest.param("halfkp", "crelu", 8, "MaterialCount<5>", marks=pytest.mark.slow),
    ("halfkav2_hm", "crelu", 32, "SFPieceCount<8>"),
    ("halfkav2_hm", "screlu", 40, "MaterialCount<5>"),
    pytest.param("halfkav2_hm", "pairwise_crelu", 32, "MaterialCount<8>", marks=pytest.mark.slow),
    ("kb768hm4", "pairwise_crelu", 64, "MaterialCount<8>"),
    pytest.param("kb768hm4", "screlu", 32, "SFPieceCount<4>", marks=pytest.mark.slow),
    ("kb768hm16", "crelu", 32, "MaterialCount<3>"),
    ("kb768hm16", "screlu", 48, "SFPieceCount<8>"),
    (KB768_EXPLICIT, "pairwise_crelu", 32, "SFPieceCount<8>"),
    pytest.param(KB768_EXPLICIT, "crelu", 24, "MaterialCount<8>", marks=pytest.mark.slow),
    (KB768HM_EXPLICIT, "screlu", 32, "MaterialCount<8>"),
]


@pytest.mark.parametrize("fs_name,act,hidden,spec", CASES, ids=_ids(CASES))
def test_every_feature_set_and_bucket_kind(fs_name, act, hidden, spec, c_eval, fens, boards, tmp_path):
    net = make_int_net_spec(fs_name, act, hidden, spec, seed=hidden + len(fs_name))
    ours = _cross_check(c_eval, net, fens, tmp_path)
    assert min(ours) < 0 < max(ours)
    assert len(set(ours)) > len(ours) // 20  # position-dependent, not a few saturated values
    # every output bucket is exercised
    reached = set(net.buckets.of(boards).tolist())
    assert reached == set(range(net.arch["num_buckets"]))


def test_cli_on_960_positions(c_eval, fens, tmp_path):
    """`nnue eval NET.safetensors --fens FILE` == C, on the Chess960 self-play positions (kings
    and rooks off their usual squares) and the standard ones, king-bucketed features."""
    frc = real_fens(selfplay(FRC), 5000, per_piece_count=0)
    assert len(frc) >= 4500
    all_fens = legal_fens(fens) + frc  # the CLI checks positions as nnue pack does
    net = make_int_net_spec("kb768hm16", "screlu", 64, "SFPieceCount<8>", seed=960)
    net.save(tmp_path / "net.safetensors")
    net.write_bin(tmp_path / "net.bin")
    (tmp_path / "fens.txt").write_text("\n".join(all_fens) + "\n")
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert cli_main(["eval", str(tmp_path / "net.safetensors"), "--fens", str(tmp_path / "fens.txt")]) == 0
    ours = [int(v) for v in buf.getvalue().split()]
    theirs = run_c(c_eval, tmp_path / "net.bin", c_args_for_arch(net.arch), all_fens)
    assert len(ours) == len(all_fens) >= 14_500
    assert ours == theirs
    assert min(ours) < 0 < max(ours)


def test_960_halfkp_halfka(c_eval, tmp_path):
    """Chess960 positions through the two king-relative Stockfish feature sets."""
    frc = real_fens(selfplay(FRC), 5000, per_piece_count=0)
    for fs_name, act in (("halfkp", "crelu"), ("halfkav2_hm", "pairwise_crelu")):
        ours = _cross_check(c_eval, make_int_net_spec(fs_name, act, 32, "MaterialCount<8>", seed=9), frc, tmp_path)
        assert min(ours) < 0 < max(ours)


# ---------------------------------------------------------------------------------------------
# adversarial nets: every weight class at the export audit's limits


def _audit_bounds(net: IntegerNet) -> tuple[int, int, int]:
    """(accumulator worst case over neurons, max |l1w|, L1 sum worst case over buckets), the
    quantities the export audit bounds, computed here in int64."""
    k = net.features.max_active
    l0w = net.l0w.to(torch.int64).abs()
    acc_worst = int((net.l0b.to(torch.int64).abs() + l0w.topk(k, dim=0).values.sum(0)).max())
    vmax = QA if net.arch["activation"] == "crelu" else QA * QA
    l1 = net.l1w.to(torch.int64).abs()
    return acc_worst, int(l1.max()), int((l1 * vmax).sum(1).max())


def _parts(net: IntegerNet, fens_or_boards):
    """forward_int with its parts: (evals, accumulators (N, 2, H), L1 sums, L1 outputs)."""
    b = boards_from_fens(fens_or_boards) if isinstance(fens_or_boards, list) else fens_or_boards
    stm, nstm = net.features.encode(b)
    bucket = net.buckets.of(b)
    ev, parts = forward_int(net, stm, nstm, bucket, return_parts=True)
    out = parts["sum"] if net.arch["activation"] == "crelu" else torch.div(parts["sum"], QA, rounding_mode="trunc")
    out = out + net.l1b.to(torch.int64)[bucket]
    return ev, parts["acc"], parts["sum"], out


ADVERSARIAL = [
    ("chess768", "crelu", 128, "MaterialCount<8>"),
    ("chess768", "screlu", 128, "SFPieceCount<8>"),
    pytest.param("chess768", "pairwise_crelu", 256, "MaterialCount<8>", marks=pytest.mark.slow),
    ("halfkp", "screlu", 60, "MaterialCount<8>"),
    pytest.param("halfkp", "crelu", 48, "SFPieceCount<8>", marks=pytest.mark.slow),
    ("halfkav2_hm", "pairwise_crelu", 96, "SFPieceCount<8>"),
    pytest.param("halfkav2_hm", "crelu", 72, "MaterialCount<4>", marks=pytest.mark.slow),
    ("kb768hm16", "screlu", 96, "MaterialCount<8>"),
    pytest.param("kb768hm4", "pairwise_crelu", 128, "SFPieceCount<8>", marks=pytest.mark.slow),
    (KB768_EXPLICIT, "screlu", 48, "MaterialCount<8>"),
]


@pytest.mark.parametrize("fs_name,act,hidden,spec", ADVERSARIAL, ids=_ids(ADVERSARIAL))
def test_adversarial_limits(fs_name, act, hidden, spec, c_eval, fens, boards, tmp_path):
    net = make_adversarial_int_net(fs_name, act, hidden, spec, seed=hidden)
    # the net is exactly at the audit's limits, and passes it
    acc_worst, l1_max, l1_worst = _audit_bounds(net)
    assert acc_worst == INT16_LIMIT
    assert l1_max == l1_weight_limit(act)
    assert int(net.l1b.abs().min()) == INT16_LIMIT
    assert l1_worst <= INT32_MAX
    ev, acc, total, out = _parts(net, boards)  # the path evaluate_fens takes, with its parts
    ours = ev.tolist()
    _same(fens, ours, _c(c_eval, net, fens, tmp_path))
    # real positions drive accumulators to exactly ±32767 (32 pieces; 30 non-king for halfkp)
    assert int(acc.max()) == INT16_LIMIT and int(acc.min()) == -INT16_LIMIT
    # evals of both signs; the truncating divisions see negative non-multiples
    assert min(ours) < 0 < max(ours)
    assert bool(((out < 0) & (out * SCALE % (QA * QB) != 0)).any())
    if act != "crelu":
        assert bool(((total < 0) & (total % QA != 0)).any())
        assert bool(((total > 0) & (total % QA != 0)).any())


def _saturated_net(hidden: int, act: str, l1w_row: list[int], l1b: int, bias: int = 31,
                   sign: int = 1) -> IntegerNet:
    """chess768, every neuron's l0w rows ``sign``·1023 and l0b ``sign``·bias: with bias 31 the
    accumulator is 31 + 1023·pieces ≥ 2077 (every neuron at QA on every position), exactly
    32767 at 32 pieces; one bucket, l1w = l1w_row (zero-padded)."""
    arch = make_arch("chess768", hidden, act, "MaterialCount<1>")
    l0w = torch.full((768, hidden), sign * 1023, dtype=torch.int16)
    l0b = torch.full((hidden,), sign * bias, dtype=torch.int16)
    row = torch.zeros(arch["l1_inputs"], dtype=torch.int16)
    row[: len(l1w_row)] = torch.tensor(l1w_row, dtype=torch.int16)
    return IntegerNet(arch, QuantScheme(), l0w, l0b, row.view(1, -1), torch.tensor([l1b], dtype=torch.int16))


def _python_or_overflow(net, fen):
    try:
        return evaluate_fens(net, [fen])[0]
    except OverflowError:
        return None


def test_int32_boundary_crelu_output(c_eval, fens, tmp_path):
    """crelu, every neuron at QA: L1 sum = 255·8,421,504 = 2,147,483,520 on every position; the
    bias 127 lands exactly on INT32_MAX (evaluated, C == Python), 128 one past it (Python raises
    OverflowError, C reports overflow); the same mirrored at INT32_MIN (−128 fits, −129 not)."""
    row = [32767] * 257 + [385]
    assert QA * sum(row) == 2_147_483_520 == INT32_MAX - 127
    some = fens[::50]
    for sgn, ok_b, bad_b in ((1, 127, 128), (-1, -128, -129)):
        signed_row = [sgn * w for w in row]
        ok = _saturated_net(129, "crelu", signed_row, ok_b)
        theirs = _cross_check(c_eval, ok, some, tmp_path)
        out = sgn * 2_147_483_520 + ok_b
        assert out == (INT32_MAX if sgn > 0 else INT32_MIN)
        assert set(theirs) == {sgn * (abs(out) * SCALE // (QA * QB))}  # truncating division
        bad = _saturated_net(129, "crelu", signed_row, bad_b)
        with pytest.raises(OverflowError):
            evaluate_fens(bad, some)
        bad.write_bin(tmp_path / "bad.bin")
        assert run_c(c_eval, tmp_path / "bad.bin", c_args_for_arch(bad.arch), some, allow_overflow=True) == \
            [None] * len(some)


def test_int32_boundary_screlu_sum(c_eval, fens, tmp_path):
    """screlu, every neuron at QA: L1 sum = 65025·Σ l1w. Σ l1w = 33025 gives 2,147,450,625 (fits:
    evaluated, C == Python); 33026 gives 2,147,515,650 > INT32_MAX (Python raises, C overflow).
    Both nets break the audit (L1 weights at 128 on 260 inputs), which is the point: the engine
    must refuse, not wrap."""
    some = fens[::50]
    for total, fits in ((33025, True), (33026, False)):
        row = [128] * 258 + [total - 258 * 128]
        for sgn in (1, -1):
            net = _saturated_net(130, "screlu", [sgn * w for w in row], 0)
            if fits:
                theirs = _cross_check(c_eval, net, some, tmp_path)
                assert set(theirs) == {sgn * (65025 * total // QA * SCALE // (QA * QB))}
            else:
                with pytest.raises(OverflowError):
                    evaluate_fens(net, some)
                net.write_bin(tmp_path / "net.bin")
                assert run_c(c_eval, tmp_path / "net.bin", c_args_for_arch(net.arch), some,
                             allow_overflow=True) == [None] * len(some)


def test_int16_accumulator_boundary(c_eval, fens, tmp_path):
    """Accumulator 31 + 32·1023 = 32767 at 32 pieces fits; with bias 32 it is 32768 and the
    32-piece positions overflow (Python raises, C reports it) while the others evaluate alike.
    Downwards −32768 still fits int16: bias −32 evaluates everywhere."""
    some = [f for f in fens if piece_count(f) == 32][:40] + [f for f in fens if piece_count(f) < 32][::200]
    row = [100, -90] * 60
    for bias, sign in ((32, 1), (32, -1)):
        net = _saturated_net(64, "screlu", row, 5, bias=bias, sign=sign)
        net.write_bin(tmp_path / "net.bin")
        theirs = run_c(c_eval, tmp_path / "net.bin", c_args_for_arch(net.arch), some, allow_overflow=True)
        ours = [_python_or_overflow(net, f) for f in some]
        assert ours == theirs
        n32 = sum(piece_count(f) == 32 for f in some)
        if sign > 0:
            assert theirs.count(None) == n32 >= 40
        else:
            assert None not in theirs
            _, acc, _, _ = _parts(net, some)
            assert int(acc.min()) == -32768
