"""The compiled perspective and deep kernels (inference/kinds/{perspective,deep}/compiled.py) against the plain int64 reference
(torch.equal): accumulators, L1 sums and evals from index lists and from packed boards.

Covers both accumulator modes (int16 register lanes when the per-net bound proves int16, int32
lanes with the run-time check otherwise), widths that leave a tail past the last full register
(H mod 32, H mod 16), weights at the int16 limits, partial sums outside int16 whose final sum
is inside, odd batch sizes, padding anywhere, every bucket, both sides to move, king-relative
sets (halfkav2_hm, halfkp, kb768hm4) and chess768, bad boards, more than 32 occupied squares;
the deep-net kernel against the deep module's Python-int reference and its torch path.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

pytest.importorskip("numba")

import nnue.inference.exact as exactmod  # noqa: E402
import nnue.inference.kinds.perspective as netmod  # noqa: E402
from nnue.inference import backends  # noqa: E402
from nnue.inference.kinds.deep import compiled as deep_compiled  # noqa: E402
from nnue.inference.kinds.perspective import compiled  # noqa: E402
from nnue.inference.api import boards_from_fens  # noqa: E402
from nnue.inference.kinds.perspective import IntegerNet, make_arch  # noqa: E402
from nnue.inference.kinds.perspective import evaluate, forward_int  # noqa: E402
from nnue.pipeline.features import get_feature_set  # noqa: E402
from nnue.spec.quant import QuantScheme  # noqa: E402
from tests.inference.test_forward_int_paths import (ACTS, random_lists, random_net, reference,  # noqa: E402
                                                    reference_acc)
from tests.samples import SAMPLE  # noqa: E402


@pytest.fixture(scope="module")
def sample_boards():
    fens = [line[4:].strip() for line in open(SAMPLE) if line.startswith("fen ")]
    return boards_from_fens(fens)


def eval_reference(net, boards):
    stm, nstm = net.features.encode(boards)
    return reference(net, stm, nstm, net.buckets.of(boards))[0]


def table_net(fs_name: str, act: str, hidden: int, seed: int, ft: int = 700, spec: str = "MaterialCount<8>"):
    fs = get_feature_set(fs_name)
    arch = make_arch(fs_name, hidden, act, spec)
    g = torch.Generator().manual_seed(seed)
    lim = 32767 if act == "crelu" else 128
    return IntegerNet(arch, QuantScheme(),
                      torch.randint(-ft, ft + 1, (fs.num_inputs, hidden), generator=g).to(torch.int16),
                      torch.randint(-300, 600, (hidden,), generator=g).to(torch.int16),
                      torch.randint(-lim, lim + 1, (arch["num_buckets"], arch["l1_inputs"]), generator=g).to(torch.int16),
                      torch.randint(-9000, 9000, (arch["num_buckets"],), generator=g).to(torch.int16))


# -- index lists ------------------------------------------------------------------------------------

@pytest.mark.parametrize("hidden", [2, 16, 48, 70, 256])
@pytest.mark.parametrize("ft", [900, 2000])  # 900: int16 proven (int16 lanes); 2000: not (int32 lanes)
@pytest.mark.parametrize("act", ACTS)
def test_lists_equal_int64_reference(act, ft, hidden):
    net = random_net(act, "limit", hidden=hidden, seed=hidden + ft, ft=ft)
    assert exactmod.acc_int16_proven(net, 32) == (ft == 900)
    nb = net.arch["num_buckets"]
    g = torch.Generator().manual_seed(hidden)
    for n in (1, 3, 511, 1025):
        stm, nstm = random_lists(n, 768, seed=n)
        if ft == 2000:  # keep the unproven net's sums inside int16: rows 0..95 only, at most 16 of them
            stm, nstm = stm // 8, nstm // 8
            stm[:, 16:], nstm[:, 16:] = -1, -1
        bucket = torch.randint(0, nb, (n,), generator=g)
        total, acc = compiled.l1_sums_lists(net, stm, nstm, bucket, return_acc=True)
        ref, ref_acc, ref_total = reference(net, stm, nstm, bucket)
        assert acc.dtype == torch.int32 and total.dtype == torch.int64
        assert torch.equal(acc.long(), ref_acc)
        assert torch.equal(total, ref_total)
        assert torch.equal(compiled.l1_sums_lists(net, stm, nstm, bucket), total)
        assert torch.equal(forward_int(net, stm, nstm, bucket, backend="compiled"), ref)


def test_every_bucket_and_perspective_weighs_its_own_columns():
    """A net whose L1 weights are 1 on one column of one bucket and 0 elsewhere: the sum is that
    column's activation, for each bucket and each half (stm, nstm)."""
    net = random_net("crelu", "small", hidden=40, seed=4)
    stm, nstm = random_lists(64, 768, seed=2)
    accs = [reference_acc(net, stm).clamp(0, 255), reference_acc(net, nstm).clamp(0, 255)]
    for b in range(net.arch["num_buckets"]):
        for col in (0, 39, 40, 79):
            l1w = torch.zeros_like(net.l1w)
            l1w[b, col] = 1
            one = dataclasses.replace(net, l1w=l1w)
            bucket = torch.full((64,), b, dtype=torch.int64)
            want = accs[col // 40][:, col % 40]
            assert torch.equal(compiled.l1_sums_lists(one, stm, nstm, bucket), want)
            other = torch.full((64,), (b + 1) % net.arch["num_buckets"], dtype=torch.int64)
            assert not compiled.l1_sums_lists(one, stm, nstm, other).any()


@pytest.mark.parametrize("hidden", [32, 37])
def test_int16_limits_proven(hidden):
    """The static bound met with equality: |l0b| + 32·max|l0w| = 767 + 32·1000 = 32767. 32
    copies of the +1000 row (and of the −1000 row) reach ±32767 exactly in int16 lanes."""
    arch = make_arch("chess768", hidden, "screlu", "MaterialCount<2>")
    l0w = torch.zeros((768, hidden), dtype=torch.int16)
    l0w[3], l0w[4] = 1000, -1000
    l0b = torch.tensor([767, -767] * (hidden // 2) + [767] * (hidden % 2), dtype=torch.int16)
    net = IntegerNet(arch, QuantScheme(), l0w, l0b, torch.full((2, 2 * hidden), 128, dtype=torch.int16),
                     torch.zeros(2, dtype=torch.int16))
    assert exactmod.acc_int16_proven(net, 32)
    stm = torch.tensor([[3] * 32, [4] * 32, [3] * 16 + [4] * 16], dtype=torch.int32)
    nstm = stm.flip(0)
    bucket = torch.tensor([0, 1, 1])
    total, acc = compiled.l1_sums_lists(net, stm, nstm, bucket, return_acc=True)
    ref, ref_acc, ref_total = reference(net, stm, nstm, bucket)
    assert int(ref_acc.max()) == 32767 and int(ref_acc.min()) == -32767
    assert torch.equal(acc.long(), ref_acc) and torch.equal(total, ref_total)


@pytest.mark.parametrize("hidden", [16, 21])
def test_int16_limits_unproven(hidden):
    """Rows at ±32767 and −32768 (nothing proven): sums whose partial sums leave int16 but whose
    final value is inside evaluate exactly (int32 lanes); a final value outside raises."""
    arch = make_arch("chess768", hidden, "crelu", "MaterialCount<1>")
    l0w = torch.zeros((768, hidden), dtype=torch.int16)
    l0w[1], l0w[2], l0w[3] = 32767, -32768, 32767
    net = IntegerNet(arch, QuantScheme(), l0w, torch.full((hidden,), 1, dtype=torch.int16),
                     torch.full((1, 2 * hidden), -32768, dtype=torch.int16), torch.zeros(1, dtype=torch.int16))
    assert not exactmod.acc_int16_proven(net, 3)
    stm = torch.tensor([[1, 3, 2], [2, -1, 1], [1, 2, -1], [-1, -1, -1]], dtype=torch.int32)
    nstm = torch.tensor([[1, 2, 3], [1, 2, 2], [3, 2, 1], [2, -1, -1]], dtype=torch.int32)
    bucket = torch.zeros(4, dtype=torch.int64)
    total, acc = compiled.l1_sums_lists(net, stm, nstm, bucket, return_acc=True)
    ref, ref_acc, ref_total = reference(net, stm, nstm, bucket)
    assert torch.equal(acc.long(), ref_acc) and torch.equal(total, ref_total)
    assert torch.equal(forward_int(net, stm, nstm, bucket, backend="compiled"), ref)
    over = torch.tensor([[1, -1, -1]], dtype=torch.int32)  # 32767 + 1
    with pytest.raises(OverflowError, match="accumulator leaves int16"):
        compiled.l1_sums_lists(net, over, over, bucket[:1])
    with pytest.raises(OverflowError, match="accumulator leaves int16"):
        forward_int(net, over, over, bucket[:1], backend="compiled")
    with pytest.raises(OverflowError, match="accumulator leaves int16"):
        forward_int(net, over, over, bucket[:1], backend="torch")


def test_empty_lists_give_the_bias_alone():
    net = random_net("screlu", "limit", hidden=40, seed=3)
    empty = torch.zeros((5, 0), dtype=torch.int32)
    bucket = torch.arange(5)
    total, acc = compiled.l1_sums_lists(net, empty, empty, bucket, return_acc=True)
    ref, ref_acc, ref_total = reference(net, empty, empty, bucket)
    assert torch.equal(acc.long(), ref_acc) and torch.equal(total, ref_total)
    assert torch.equal(forward_int(net, empty, empty, bucket, backend="compiled"), ref)


def test_bucket_out_of_range_raises():
    net = random_net("screlu", "small", hidden=32)
    stm, nstm = random_lists(4, 768)
    with pytest.raises(IndexError):
        compiled.l1_sums_lists(net, stm, nstm, torch.tensor([0, 1, 8, 2]))


# -- packed boards ----------------------------------------------------------------------------------

@pytest.mark.parametrize("fs_name,act,hidden,ft", [
    ("chess768", "screlu", 256, 700),
    ("chess768", "crelu", 48, 1100),           # unproven (600 + 32·1100 > 32767): int32 lanes, checked
    ("halfkav2_hm", "screlu", 64, 700),
    ("halfkav2_hm", "pairwise_crelu", 70, 900),
    ("halfkp", "crelu", 33, 700),              # kings are not features: 30-wide lists
    ("kb768hm4", "pairwise_crelu", 48, 700),
])
def test_boards_equal_int64_reference(fs_name, act, hidden, ft, sample_boards):
    net = table_net(fs_name, act, hidden, seed=hidden, ft=ft)
    g = torch.Generator().manual_seed(hidden)
    boards = sample_boards[torch.randperm(len(sample_boards), generator=g)]
    btm = boards[:, 24] >> 7
    assert 0 < int(btm.sum()) < len(boards)  # both sides to move
    assert exactmod.acc_int16_proven(net, 32) == (ft < 1000)
    ref = eval_reference(net, boards)
    total, bucket = compiled.l1_sums_boards(net, boards)
    assert torch.equal(bucket, net.buckets.of(boards))
    assert set(bucket.tolist()) == set(range(net.arch["num_buckets"])) or fs_name != "chess768"
    assert torch.equal(evaluate(net, boards, backend="compiled"), ref)
    for n in (1, 9, 513):
        assert torch.equal(evaluate(net, boards[:n], backend="compiled"), ref[:n])
    assert torch.equal(evaluate(net, boards[1::2], backend="compiled"), ref[1::2])  # a strided view


def test_boards_kernel_agrees_with_torch_path_on_odd_boards(sample_boards):
    """Boards the features code handles in its own way: no pieces, an unused piece code (no
    feature in chess768), a lone king; more than 32 occupied squares is refused by its row."""
    net = table_net("chess768", "screlu", 40, seed=3)
    odd = torch.zeros((3, 32), dtype=torch.uint8)
    odd[1, 0], odd[1, 8] = 3, 0x75                     # a white king and an unused code 7
    odd[2] = sample_boards[0]
    odd[2, 8] = (odd[2, 8] & 0xF0) | 7
    boards = torch.cat([odd, sample_boards[:20]])
    want = evaluate(net, boards, backend="torch")
    assert torch.equal(evaluate(net, boards, backend="compiled"), want)
    assert torch.equal(want, eval_reference(net, boards))
    full = boards.clone()
    full[4, :8] = 255                                  # 64 occupied squares
    with pytest.raises(ValueError, match="board 4: more than 32 occupied squares"):
        evaluate(net, full, backend="compiled")


@pytest.mark.parametrize("fs_name", ["halfkav2_hm", "halfkp"])
def test_bad_board_named_by_its_input_row(fs_name, sample_boards):
    net = table_net(fs_name, "crelu", 32, seed=1)
    bad = sample_boards[:40].clone()
    bad[17, 8:24] = 0  # every piece a white pawn: no kings
    with pytest.raises(ValueError, match="board 17: a king-relative feature set needs exactly one king"):
        evaluate(net, bad, backend="compiled")
    with pytest.raises(ValueError, match="exactly one king"):
        evaluate(net, bad, backend="torch")
    code7 = sample_boards[:20].clone()
    code7[5, 8] = (code7[5, 8] & 0xF0) | 7
    with pytest.raises(ValueError, match="board 5"):
        evaluate(net, code7, backend="compiled")


def test_fallbacks_and_backend_argument(sample_boards):
    """The compiled path declines what it cannot do (the torch path then runs under "auto";
    "compiled" raises); an unknown backend is refused."""
    net = table_net("chess768", "screlu", 32, seed=2)
    boards = sample_boards[:50]
    ref = eval_reference(net, boards)
    assert compiled.applicable(net)
    wide = dataclasses.replace(net, scheme=dataclasses.replace(net.scheme, qa=1 << 16))
    assert not compiled.applicable(wide)
    with pytest.raises(RuntimeError, match="does not apply"):
        evaluate(wide, boards, backend="compiled")
    with pytest.raises(ValueError, match="backend"):
        evaluate(net, boards, backend="fast")
    assert torch.equal(evaluate(net, boards, backend="auto"), ref)
    assert backends.DEFAULT_BACKEND == "auto"


def test_small_batches_through_the_api(sample_boards):
    """Calls of at most SMALL_BATCH positions take perspective.evaluate_small (the compiled
    kernel, outputs as Python ints): the same integers as the reference, one by one and in
    small groups; a bad board raises there too."""
    from nnue.inference import api

    net = table_net("halfkav2_hm", "screlu", 48, seed=6)
    ref = eval_reference(net, sample_boards[:64])
    assert netmod.evaluate_small(net, sample_boards[:3]) == ref[:3].tolist()
    for n in range(1, api.SMALL_BATCH + 1):
        got = api.evaluate(net, sample_boards[:n])
        assert got.dtype == torch.int64 and torch.equal(got, ref[:n])
    assert torch.equal(torch.cat([api.evaluate(net, sample_boards[i:i + 1]) for i in range(64)]), ref)
    bad = sample_boards[:2].clone()
    bad[1, 8:24] = 0
    with pytest.raises(ValueError, match="board 1"):
        api.evaluate(net, bad)


# -- deep nets ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("act", ["crelu", "screlu", "pairwise_crelu"])
@pytest.mark.parametrize("hact,l2act", [("crelu", "crelu"), ("screlu", "screlu"), ("crelu", "screlu")])
@pytest.mark.parametrize("n1,n2", [(9, 5), (33, 16), (16, 20)])
def test_deep_boards_equal_python_reference(act, hact, l2act, n1, n2):
    """The compiled deep kernel (inference/kinds/deep/compiled.py, _eval_boards) against the deep
    module's one-position Python-int reference and the torch path, for every supported
    activation pair, odd widths (register tails), layers narrower than one register (int64
    loops), of one register, of two and a tail (the int32-lane products) and both sides to move."""
    from nnue.inference.kinds import deep
    from tests.inference.test_deep import random_deep_net, reference_eval, sample_boards as deep_boards

    net = random_deep_net(act=act, hact=hact, hidden=70 if act == "pairwise_crelu" else 37, n1=n1, n2=n2,
                          seed=len(act + hact + l2act) + n1)
    net.arch = dict(net.arch, l2_activation=l2act)
    assert deep_compiled.applicable(net, l2act)
    boards = deep_boards(300)
    got = deep.evaluate(net, boards, backend="compiled")
    assert got.tolist() == reference_eval_l2(net, boards, reference_eval, l2act)
    assert torch.equal(got, deep.evaluate(net, boards, backend="torch"))
    for n in (1, 7):
        assert torch.equal(deep.evaluate(net, boards[:n], backend="compiled"), got[:n])
    from nnue.inference import api

    for i in range(0, 40, 3):  # one position and small groups through the api (evaluate_small)
        assert torch.equal(api.evaluate(net, boards[i:i + 1 + i % 4]), got[i:i + 1 + i % 4])


def reference_eval_l2(net, boards, reference_eval, l2act):
    """reference_eval of tests/inference/test_deep.py applies the hidden activation after both
    layers; for another activation after L2, evaluate the net with that one as the torch path
    does (the torch path is checked against the same reference in test_deep.py)."""
    if l2act == net.arch["hidden_activation"]:
        return reference_eval(net, boards)
    from nnue.inference.kinds import deep

    return deep.evaluate(net, boards, backend="torch").tolist()


@pytest.mark.parametrize("fs_name,buckets", [("halfkav2_hm", "SFPieceCount<8>"), ("halfkp", "MaterialCount<1>"),
                                             ("kb768hm4", "MaterialCount<4>")])
def test_deep_other_feature_sets(fs_name, buckets):
    from nnue.inference.kinds import deep
    from tests.inference.test_deep import random_deep_net, reference_eval, sample_boards as deep_boards

    net = random_deep_net(fs_name, "screlu", "screlu", hidden=33, n1=4, n2=3, buckets=buckets, seed=3)
    boards = deep_boards(200)
    assert deep.evaluate(net, boards, backend="compiled").tolist() == reference_eval(net, boards)


def test_deep_overflows_named_like_the_torch_path():
    from nnue.inference.kinds import deep
    from tests.inference.test_deep import random_deep_net, sample_boards as deep_boards

    boards = deep_boards(40)
    for layer, what in (("l1b", "L1 sum"), ("l2b", "L2 sum"), ("outb", "output sum")):
        net = random_deep_net(seed=5)
        getattr(net, layer).fill_(2**31 - 10)
        for backend in ("compiled", "torch"):
            with pytest.raises(OverflowError, match=f"{what}.*int32"):
                deep.evaluate(net, boards, backend=backend)
    net = random_deep_net(act="screlu", seed=6)
    net.scheme = dataclasses.replace(net.scheme, l0_shift=7)  # 255² >> 7 = 508: not u8
    net.l0b.fill_(255)
    for backend in ("compiled", "torch"):
        with pytest.raises(OverflowError, match="L0 activation leaves u8"):
            deep.evaluate(net, boards, backend=backend)


def test_deep_hardswish_takes_the_torch_path():
    """A hidden activation without a compiled rule (hardswish): "auto" evaluates through torch,
    "compiled" refuses."""
    from nnue.inference.kinds import deep
    from tests.inference.test_deep import random_deep_net, sample_boards as deep_boards

    net = random_deep_net(hact="hardswish", seed=7)
    assert not deep_compiled.applicable(net, net.arch["hidden_activation"])
    boards = deep_boards(30)
    assert torch.equal(deep.evaluate(net, boards), deep.evaluate(net, boards, backend="torch"))
    with pytest.raises(RuntimeError, match="does not apply"):
        deep.evaluate(net, boards, backend="compiled")


@pytest.mark.parametrize("act,n1,n2", [("screlu", 33, 17), ("pairwise_crelu", 16, 32), ("crelu", 32, 16)])
def test_deep_int64_path_of_every_layer(act, n1, n2):
    """Each layer mode of the deep kernel, forced on for every layer of a net, gives the torch
    path's evals: 2 (weights and biases prove every sum within int32: no int64 sums, no check;
    L1 over the nonzero input pairs only where N1 is a multiple of 16, the output layer as one
    padded block of 16 where N2 is even), 1 (int32-lane products, int64 sums, the int32
    check), 0 (int64 sums, taken where K·255·128 ≥ 2^31 could wrap int32 lanes)."""
    from nnue.inference.kinds import deep
    from tests.inference.test_deep import random_deep_net, sample_boards as deep_boards

    net = random_deep_net(act=act, hact="screlu", hidden=70 if act == "pairwise_crelu" else 37, n1=n1, n2=n2,
                          seed=9 + n1)
    boards = deep_boards(200)
    want = deep.evaluate(net, boards, backend="torch")
    assert torch.equal(deep.evaluate(net, boards, backend="compiled"), want)
    narrow = deep_compiled.prepared(net, "screlu")[0][-1]
    assert narrow.tolist() == [2, 2, 2]
    for mode in (1, 0):
        narrow[:] = mode  # the cached flags: every layer in this mode from here on
        assert torch.equal(deep.evaluate(net, boards, backend="compiled"), want), mode


def test_deep_layer_mode_needs_the_bound():
    """A bias one step from the int32 edge leaves the layer in mode 1 (checked), whose overflow
    is named; the same net with small biases gets mode 2."""
    from nnue.inference.kinds import deep
    from tests.inference.test_deep import random_deep_net

    net = random_deep_net(act="pairwise_crelu", hact="crelu", hidden=70, n1=16, n2=32, seed=4)
    assert deep_compiled.prepared(net, "crelu")[0][-1].tolist() == [2, 2, 2]
    net.l2b[0, 0] = 2**31 - 1
    assert deep_compiled.prepared(net, "crelu")[0][-1].tolist() == [2, 1, 2]
