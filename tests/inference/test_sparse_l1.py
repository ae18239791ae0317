"""Block-sparse L1: identical evals to forward_int (torch.equal), and a correct sparsity report."""
from __future__ import annotations

import pytest
import torch

from nnue.inference.api import boards_from_fens, evaluate
from nnue.inference.kinds.perspective import IntegerNet, activations, forward_int
from nnue.inference.sparse_l1 import block_stats, evaluate_sparse, forward_sparse
from nnue.inference.sparse_sums import l1_sum
from nnue.spec.quant import QuantScheme
from nnue.pipeline.features import get_feature_set
from tests.netfiles import make_int_net
from tests.samples import SAMPLE

ACTS = ["crelu", "screlu", "pairwise_crelu"]
METHODS = ["gather", "compact"]


@pytest.fixture(scope="module")
def boards():
    fens = [line[4:].strip() for line in open(SAMPLE) if line.startswith("fen ")]
    return boards_from_fens(fens)  # 4,015 positions of real games


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("kind", ["random", "many_dead", "none_dead"])
def test_identical_to_forward_int(act, kind, boards):
    if kind == "many_dead":
        net = make_int_net("chess768", act, hidden=64, seed=1, dead=0.85)
    elif kind == "none_dead":  # |w| ≤ 6, bias ≥ 200 > 32·6: every accumulator above 0
        net = make_int_net("chess768", act, hidden=60, seed=2, bias=(200, 250))
        net.l0w = (net.l0w // 25).to(torch.int16)
    else:
        net = make_int_net("chess768", act, hidden=48, seed=3)
    fs, bk = net.features, net.buckets
    boards = boards[::2]  # 2,008 positions
    stm, nstm = fs.encode(boards)
    bucket = bk.of(boards)
    ref, parts = forward_int(net, stm, nstm, bucket, return_parts=True)
    stats = None
    for method in METHODS:
        ev, stats = forward_sparse(net, stm, nstm, bucket, method=method, return_stats=True)
        assert torch.equal(ev, ref), method
        # the sum before the division too
        x = activations(net, parts["acc"])
        assert torch.equal(l1_sum(net, x, bucket, method=method), parts["sum"])
    assert min(ref.tolist()) < 0 < max(ref.tolist())
    if kind == "many_dead":
        # 85 % of neurons dead at random: a block of 4 is dead with p ≈ 0.85⁴ ≈ 0.52
        assert stats["sparsity"] > 0.55 and stats["dead_fraction"] > 0.4
    elif kind == "none_dead":
        assert stats["zero_blocks"] == 0 and stats["sparsity"] == 0.0 and stats["dead_blocks"] == 0
    else:
        assert 0.0 <= stats["sparsity"] < 1.0


@pytest.mark.parametrize("fs_name,act", [("kb768hm4", "screlu"), ("halfkp", "pairwise_crelu"),
                                          ("halfkav2_hm", "crelu")])
def test_identical_on_other_feature_sets_and_block_sizes(fs_name, act, boards):
    net = make_int_net(fs_name, act, hidden=36, seed=4, dead=0.5)  # L1 of 18 or 36: partial blocks
    b = boards[::3]
    ref = evaluate(net, b)
    for block in (1, 4, 8):
        for method in METHODS:
            ev, st = evaluate_sparse(net, b, chunk=500, block=block, method=method, return_stats=True)
            assert torch.equal(ev, ref), (block, method)
            assert st["positions"] == b.shape[0] and 0.0 < st["sparsity"] < 1.0
            if block == 1:  # half the neurons dead, and some of the rest off
                assert st["sparsity"] > 0.5


def test_block_stats_hand_made():
    # 2 positions, L = 6 per perspective: blocks of 4 are [0:4] and [4:6] + 2 zeros of padding
    x = torch.zeros(2, 2, 6, dtype=torch.int32)
    x[0, 0, 1] = 5        # position 0, stm, block 0
    x[0, 1, 5] = 9        # position 0, nstm, block 1 (the padded one)
    x[1, 0, 0] = 1        # position 1, stm, block 0
    x[1, 0, 4] = 2        # position 1, stm, block 1
    st = block_stats(x)
    assert st["blocks"] == 8 and st["zero_blocks"] == 4 and st["sparsity"] == 0.5
    assert st["sparsity_stm"] == 0.25 and st["sparsity_nstm"] == 0.75
    assert st["dead_blocks"] == 1 and st["dead_fraction"] == 0.25  # nstm block 0 never fires
    st1 = block_stats(x, block=1)
    assert st1["blocks"] == 24 and st1["zero_blocks"] == 20


def test_sparsity_through_a_hand_made_net():
    """Zero FT weights: every accumulator is the bias, so the blocks are known for any position."""
    H = 12
    fs = get_feature_set("chess768")
    bias = torch.tensor([0, 0, 0, 0, 7, 0, 0, 0, -5, 300, 0, 0], dtype=torch.int16)
    net = IntegerNet({"feature_set": fs.name, "feature_hash": fs.hash, "num_inputs": 768, "hidden": H,
                      "activation": "screlu", "output_buckets": "MaterialCount<2>", "num_buckets": 2,
                      "l1_inputs": 2 * H},
                     QuantScheme(), torch.zeros(768, H, dtype=torch.int16), bias,
                     torch.arange(-12, 12, dtype=torch.int16).repeat(2, 1), torch.tensor([5, -7], dtype=torch.int16))
    b = boards_from_fens(["rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
                          "4k3/8/8/8/8/8/4P3/4K3 b - - 0 1"])
    ev, st = evaluate_sparse(net, b, return_stats=True)
    assert torch.equal(ev, evaluate(net, b))
    # per perspective 3 blocks: [0 0 0 0] zero, [7 0 0 0] live, [-5→0 300→255 0 0] live
    assert st["blocks"] == 12 and st["zero_blocks"] == 4 and st["sparsity"] == pytest.approx(1 / 3)
    # by hand: (7²·(w[4] + w[16]) + 255²·(w[9] + w[21])) / QA + bias, w = arange(-12, 12)
    total = 49 * ((4 - 12) + (16 - 12)) + 255 * 255 * ((9 - 12) + (21 - 12))
    out = [int(total / 255) + bb for bb in (-7, 5)]  # 32 pieces -> bucket 1, 3 pieces -> bucket 0
    assert ev.tolist() == [int(o * 400 / (255 * 64)) for o in out]
    # pairwise: v[:6]·v[6:] is zero everywhere, so every block is zero and the sum is 0
    net.arch = dict(net.arch, activation="pairwise_crelu", l1_inputs=H)
    net.l1w = net.l1w[:, :H].contiguous()
    ev, st = evaluate_sparse(net, b, return_stats=True)
    assert torch.equal(ev, evaluate(net, b)) and st["sparsity"] == 1.0


def test_overflow_raised_like_forward_int():
    net = make_int_net("chess768", "screlu", hidden=64, seed=5)
    net.l1w = torch.full_like(net.l1w, 32767)
    net.l0b = torch.full_like(net.l0b, 255)
    b = boards_from_fens(["rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"])
    stm, nstm = net.features.encode(b)
    with pytest.raises(OverflowError, match="int32"):
        forward_int(net, stm, nstm, net.buckets.of(b))
    for method in METHODS:
        with pytest.raises(OverflowError, match="int32"):
            forward_sparse(net, stm, nstm, net.buckets.of(b), method=method)
    with pytest.raises(ValueError, match="method"):
        forward_sparse(net, stm, nstm, net.buckets.of(b), method="dense")
