"""MCTS: leaf values from the integer net, exact terminal values, mates found, batching."""
from __future__ import annotations

import math
import random

import chess
import pytest
import torch

from nnue.inference import evaluate_fens
from nnue.selfplay.mcts import (BatchSearch, SearchConfig, eval_to_value, make_tree, terminal_value,
                                value_to_cp)
from tests.netfiles import make_int_net


@pytest.fixture(scope="module")
def net():
    torch.set_num_threads(1)
    return make_int_net("chess768", hidden=32, seed=3)


def test_value_mapping_round_trips():
    for cp in (-3000, -400, -1, 0, 1, 57, 400, 2999):
        v = float(eval_to_value(cp))
        assert -1 < v < 1 and v == pytest.approx(2 / (1 + math.exp(-cp / 400)) - 1)
        assert value_to_cp(v) == cp
    assert value_to_cp(1.0) == 10000 and value_to_cp(-1.0) == -10000


def test_terminal_values():
    def tv(fen, seen=None):
        b = chess.Board(fen)
        return terminal_value(b, list(b.legal_moves), seen)
    assert tv("3R2k1/5ppp/8/8/8/8/5PPP/6K1 b - - 0 1") == -1.0  # mated
    assert tv("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1") == 0.0  # stalemate
    assert tv("8/8/4k3/8/8/3K4/8/8 w - - 0 1") == 0.0  # insufficient material
    assert tv("8/8/4k3/8/8/3K4/4R3/8 w - - 100 80") == 0.0  # fifty-move rule
    assert tv("8/8/4k3/8/8/3K4/4R3/8 w - - 99 80") is None
    from nnue.selfplay.mcts import position_key
    b = chess.Board("8/8/4k3/8/8/3K4/4R3/8 w - - 20 80")
    assert tv(b.fen(), {position_key(b)}) == 0.0  # repetition


def test_root_value_is_the_nets_eval_and_leaves_are_batched(net):
    fens = ["rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
            "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3",
            "8/5k2/8/3P4/8/8/5K2/8 b - - 0 50"]
    cps = evaluate_fens(net, fens)
    trees = [make_tree(chess.Board(f), SearchConfig(nodes=1), net) for f in fens]
    BatchSearch().run([(t, net) for t in trees])
    for t, cp in zip(trees, cps):
        assert t.root.n == 1 and t.value() == pytest.approx(math.tanh(cp / 800))
    trees = [make_tree(chess.Board(f), SearchConfig(nodes=20), net) for f in fens]
    bs = BatchSearch("batch")  # the default evaluates in line with incremental accumulators
    bs.run([(t, net) for t in trees])
    assert all(t.root.n == 20 for t in trees)
    assert bs.stats.evals == sum(t.evals for t in trees) <= 60
    assert bs.stats.mean_batch > 2  # three trees share each round's net call
    # every visited child of the root holds its own leaf eval after one visit
    t = trees[0]
    b = chess.Board(fens[0])
    for m, ch in zip(t.root.moves, t.root.children):
        if ch is not None and ch.n == 1:
            b.push(m)
            assert ch.q == pytest.approx(math.tanh(evaluate_fens(net, [b.fen()])[0] / 800))
            b.pop()


@pytest.mark.parametrize("backup", ["mean", "max", "power_mean"])
@pytest.mark.parametrize("priors", ["uniform", "captures", "checks"])
def test_finds_mate_in_one_and_keeps_terminal_values_exact(net, backup, priors):
    fen = "6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1"  # Rd8#
    b = chess.Board(fen)
    t = make_tree(b, SearchConfig(nodes=200, backup=backup, priors=priors), net)
    BatchSearch().run([(t, net)])
    assert t.best_move() == chess.Move.from_uci("d1d8")
    mate = t.root.children[t.best_index()]
    assert mate.terminal and mate.q == -1.0 and mate.n > 1 and mate.moves == []
    assert b.fen() == fen and not b.move_stack  # the board is left as it was
    if backup == "max":
        assert t.value() == 1.0
    assert -1.0 <= t.value() <= 1.0
    # a terminal node is never evaluated by the net: evals = nodes that got moves from an eval
    def count(node):
        own = 1 if (node.moves and not node.terminal) else 0
        return own + sum(count(c) for c in (node.children or []) if c is not None and c.n)
    assert t.evals == count(t.root)


def test_avoids_stalemate_when_winning(net):
    # white to move, queen up; Qf7?? stalemates; the search must not rate it as a win
    fen = "7k/8/6K1/5Q2/8/8/8/8 w - - 0 1"
    t = make_tree(chess.Board(fen), SearchConfig(nodes=300, backup="max"), net)
    BatchSearch().run([(t, net)])
    moves = [m.uci() for m in t.root.moves]
    st = t.root.children[moves.index("f5f7")]
    assert st is not None and st.terminal and st.q == 0.0


def test_sample_search_positions_are_legal_and_scored_by_subtree(net):
    b = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    t = make_tree(b, SearchConfig(nodes=100, sample_rate=0.5), net, rng=random.Random(0))
    BatchSearch().run([(t, net)])
    rows = t.sampled_positions()
    assert 10 < len(rows) < 100
    for fen, uci, cp, ply, white in rows:
        pb = chess.Board(fen)
        assert chess.Move.from_uci(uci) in pb.legal_moves and fen != b.fen()
        assert pb.ply() == ply and pb.turn == white and abs(cp) <= 10000
    node = t.samples[0]
    assert rows[0][2] == value_to_cp(node.q) or node.terminal


def test_selfplay_imports_neither_trainer_nor_lightning_nor_pyarrow():
    import subprocess
    import sys

    code = ("import sys\nimport nnue.selfplay.match, nnue.selfplay.generate, nnue.selfplay.datagen, "
            "nnue.commands.selfplay_run, nnue.commands.match_run, nnue.commands.datagen_run, nnue.commands.sprt_run"
            "\nbad = [m for m in ('pyarrow', 'pytorch_lightning', 'lightning', 'hydra', "
            "'nnue.trainer', 'nnue.kernels') if m in sys.modules]\nprint(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
