"""Self-play search with incremental leaf evals: every leaf eval equals the batch integer path
(forward_int on the leaf's packed board) over whole games, the games and dumps are the same as
with batched leaf evals (sfnnv5 included), and nets without incremental support fall back to
batching."""
from __future__ import annotations

import random

import pytest
import torch

from nnue.inference import api
from nnue.pipeline.board import pack_board
from nnue.selfplay.generate import selfplay
from nnue.selfplay.mcts import BatchSearch, SearchConfig, Tree, incremental_ok
from nnue.selfplay.play import Adjudication, Game, Player, make_opening, play_games
from tests.netfiles import make_deep_int_net, make_int_net


def _nets():
    from tests.engines.test_sfnnv5 import random_int_net
    from tests.inference.test_c_cross_check_tiny import make_tiny_int_net

    return {
        # perspective nets with 8 output buckets: no refresh (chess768), king-bucket refreshes
        "chess768 screlu": lambda: make_int_net("chess768", "screlu", hidden=32, buckets=8, seed=3),
        "halfkav2_hm pairwise": lambda: make_int_net("halfkav2_hm", "pairwise_crelu", hidden=32, buckets=8, seed=4),
        "deep kb768hm4": lambda: make_deep_int_net("kb768hm4", "screlu", hidden=32, seed=5),
        "tiny chess768": lambda: make_tiny_int_net("chess768", "crelu", 16, 32, "crelu", "MaterialCount<8>", seed=6),
        # Stockfish 15.1's kind at a small L1: FT + PSQT rows, refreshes on every own king move
        "sfnnv5 l1=32": lambda: random_int_net(l1=32, seed=7),
    }


NETS = _nets()


def _games(net, leaf_eval: str, games: int = 4, nodes: int = 24, cfg: dict | None = None):
    """Play ``games`` whole self-play games (random openings, seeded); returns the finished
    games in start order and the BatchSearch."""
    search_cfg = SearchConfig(nodes=nodes, **(cfg or {}))
    adj = Adjudication(max_ply=70)
    made = [0]

    def new_game():
        if made[0] >= games:
            return None
        rng = random.Random(1000 + made[0])
        made[0] += 1
        p = Player(net, search_cfg)
        return Game(make_opening(rng, 6), p, p, adj, tag=made[0], rng=rng)

    search = BatchSearch(leaf_eval)
    done = sorted(play_games(new_game, 4, search), key=lambda g: g.tag)
    return done, search


class LeafChecker:
    """Wraps Tree._eval_incremental: records each leaf's packed board (python-chess's, at the
    leaf) and the incremental eval, to check them against forward_int in one batch."""

    def __init__(self, monkeypatch):
        self.packed, self.evals = [], []
        orig = Tree._eval_incremental

        def checked(tree, moves):
            cp = orig(tree, moves)
            self.packed.append(pack_board(tree.board))
            self.evals.append(cp)
            return cp

        monkeypatch.setattr(Tree, "_eval_incremental", checked)

    def check(self, net) -> int:
        boards = torch.frombuffer(bytearray(b"".join(self.packed)), dtype=torch.uint8).view(-1, 32)
        stm, nstm = net.features.encode(boards)
        ref = api.forward_int(net, stm, nstm, net.buckets.of(boards))
        assert torch.equal(torch.tensor(self.evals, dtype=torch.int64), ref)
        # and the batch evaluator (feature encoding from packed boards included)
        assert torch.equal(api.evaluator(net).evaluate(net, boards, 1024), ref)
        return len(self.evals)


@pytest.mark.parametrize("name", list(NETS))
def test_every_leaf_eval_equals_forward_int_and_games_equal_batched(name, monkeypatch):
    torch.set_num_threads(1)
    net = NETS[name]()
    assert incremental_ok(net)
    checker = LeafChecker(monkeypatch)
    inc_games, inc_search = _games(net, "incremental")
    n = checker.check(net)
    assert n == inc_search.stats.evals - inc_search.stats.cache_hits > 300
    assert inc_search.stats.batches == 0  # every leaf in line
    monkeypatch.undo()
    batch_games, batch_search = _games(net, "batch")
    assert batch_search.stats.batches > 0
    assert batch_search.stats.evals - batch_search.stats.cache_hits == n
    assert batch_search.stats.simulations == inc_search.stats.simulations
    for a, b in zip(inc_games, batch_games):
        assert a.plain_text() == b.plain_text()
        assert a.pgn() == b.pgn()
        assert (a.result, a.reason) == (b.result, b.reason)
    assert sum(len(g.records) for g in inc_games) > 100


def test_king_bucket_refreshes_happen_in_the_search(monkeypatch):
    """The halfkav2_hm games above test refreshes only if the searches push king moves that
    change the king square: count the refreshes the accumulators made."""
    net = NETS["halfkav2_hm pairwise"]()
    seen = [0]
    orig = Tree._eval_incremental

    def counting(tree, moves):
        before = sum(tree.acc.refreshes)
        cp = orig(tree, moves)
        seen[0] += sum(tree.acc.refreshes) - before
        return cp

    monkeypatch.setattr(Tree, "_eval_incremental", counting)
    _games(net, "incremental", games=4, nodes=24)
    assert seen[0] > 50


def test_sample_search_and_root_noise_give_the_same_dumps(monkeypatch):
    """Sampled tree positions and Dirichlet noise draw from the tree's rng in the same order
    either way."""
    net = NETS["chess768 screlu"]()
    cfg = {"sample_rate": 0.2, "noise": 0.25, "backup": "power_mean"}
    a, _ = _games(net, "incremental", games=3, nodes=16, cfg=cfg)
    b, _ = _games(net, "batch", games=3, nodes=16, cfg=cfg)
    assert [g.plain_text() for g in a] == [g.plain_text() for g in b]
    assert sum(len(g.samples) for g in a) > 10


@pytest.mark.parametrize("kind", ["perspective", "sfnnv5"])
def test_selfplay_files_are_identical_for_the_same_seed(kind, tmp_path):
    """``nnue selfplay``'s dumps, byte for byte: incremental leaf evals (the default) against
    batched ones (the search before this change), for a perspective net and an sfnnv5 net."""
    from tests.engines.test_sfnnv5 import random_int_net

    torch.set_num_threads(1)
    path = tmp_path / "net.safetensors"
    net = (make_int_net("chess768", "screlu", hidden=16, buckets=8, seed=12) if kind == "perspective"
           else random_int_net(l1=32, seed=12))
    net.save(path)
    kw = dict(games=6, nodes=12, games_per_file=4, in_flight=3, seed=7, sample_rate=0.05,
              adjudication=Adjudication(max_ply=60), progress=False)
    out_inc, out_batch = tmp_path / "inc", tmp_path / "batch"
    s1 = selfplay(path, out_inc, **kw)
    s2 = selfplay(path, out_batch, leaf_eval="batch", **kw)
    files = sorted(p.name for p in out_inc.glob("selfplay-*.plain"))
    assert files == ["selfplay-00000.plain", "selfplay-00001.plain"]
    assert files == sorted(p.name for p in out_batch.glob("selfplay-*.plain"))
    for f in files:
        assert (out_inc / f).read_bytes() == (out_batch / f).read_bytes()
    assert (s1["games"], s1["positions"], s1["evals"]) == (s2["games"], s2["positions"], s2["evals"])


@pytest.mark.parametrize("priors", ["captures", "checks", "uniform"])
def test_faster_tree_walk_plays_the_same_games(priors, monkeypatch):
    """Tree._select (only the visited children scored), the python-chess board state kept
    per node (the leaf reached from its parent's state, not by pushing the whole path), the
    compiled move generator and the
    cache of the last searches' leaves (and the mean backup written out) play the same games
    as scoring every child, pushing every move, generating and evaluating every leaf and
    calling the backup operator."""
    from nnue.selfplay import mcts

    net = NETS["chess768 screlu"]()
    cfg = {"priors": priors, "backup": "power_mean" if priors == "checks" else "mean"}
    fast, search = _games(net, "incremental", games=3, nodes=32, cfg=cfg)
    assert search.stats.cache_hits > 0.2 * search.stats.evals
    monkeypatch.setattr(Tree, "_select", Tree._select_scan)
    monkeypatch.setattr(mcts, "_BoardState", None)
    monkeypatch.setattr(Tree, "reuse", False)
    monkeypatch.setattr(Tree, "fast_movegen", False)  # python-chess's legal_moves and heuristic_priors
    monkeypatch.setattr(mcts, "MeanBackup", type("NotMean", (), {}))  # backup.value for every operator
    slow, search = _games(net, "incremental", games=3, nodes=32, cfg=cfg)
    assert search.stats.cache_hits == 0
    assert [g.pgn() for g in fast] == [g.pgn() for g in slow]
    assert [g.plain_text() for g in fast] == [g.plain_text() for g in slow]


def test_sfnnv5_games_equal_with_the_batch_evaluator(monkeypatch):
    """sfnnv5 self-play: the incremental search plays byte for byte the games of a search whose
    every leaf goes through the kind's batch evaluator (``nnue.inference.kinds.sfnnv5.evaluate``: the
    one-position path of small calls switched off), 4 games in flight."""
    import dataclasses

    from nnue.inference import kinds

    torch.set_num_threads(1)
    net = NETS["sfnnv5 l1=32"]()
    assert incremental_ok(net)
    inc_games, inc_search = _games(net, "incremental", games=4, nodes=16)
    assert inc_search.stats.batches == 0
    calls = []
    kind = kinds.get("sfnnv5")
    batch = kind.evaluate
    monkeypatch.setitem(kinds.KINDS, "sfnnv5", dataclasses.replace(
        kind, evaluate=lambda *a, **k: calls.append(a[1].shape[0]) or batch(*a, **k)))
    monkeypatch.setattr(api, "SMALL_BATCH", 0)
    batch_games, batch_search = _games(net, "batch", games=4, nodes=16)
    assert len(calls) == batch_search.stats.batches > 0
    assert sum(calls) == batch_search.stats.evals - batch_search.stats.cache_hits
    assert [g.plain_text() for g in inc_games] == [g.plain_text() for g in batch_games]
    assert [g.pgn() for g in inc_games] == [g.pgn() for g in batch_games]
    assert sum(len(g.records) for g in inc_games) > 100


def test_nets_without_incremental_support_are_batched(monkeypatch):
    """A kind without incremental support (every kind has it now: sfnnv5 made one without, in
    the registry of this test only) is evaluated in batches."""
    import dataclasses

    from nnue.inference import kinds
    from tests.engines.test_sfnnv5 import random_int_net

    monkeypatch.setitem(kinds.KINDS, "sfnnv5", dataclasses.replace(kinds.KINDS["sfnnv5"], accumulator_table=None))
    net = random_int_net(l1=32, seed=1)
    assert not incremental_ok(net)
    games, search = _games(net, "auto", games=1, nodes=8)
    assert search.stats.batches > 0 and search.stats.evals > 0 and games[0].over
    with pytest.raises(ValueError, match="incremental"):
        _games(net, "incremental", games=1, nodes=8)
    with pytest.raises(ValueError, match="leaf_eval"):
        BatchSearch("fast")


def test_stockfish_builtin_net_plays_the_same_games(tmp_path, monkeypatch):
    """Stockfish 15.1's own net (L1 1,024, from its ``export_net``): one self-play game with
    incremental leaf evals equals the game with every leaf through the batch evaluator."""
    from nnue.inference.kinds import sfnnv5
    from tests.engines.stockfish import export_builtin, require_stockfish_15_1

    torch.set_num_threads(1)
    net = sfnnv5.read_nnue(export_builtin(require_stockfish_15_1(), tmp_path / "builtin.nnue"))
    inc_games, inc_search = _games(net, "incremental", games=2, nodes=12)
    assert inc_search.stats.batches == 0
    monkeypatch.setattr(api, "SMALL_BATCH", 0)
    batch_games, batch_search = _games(net, "batch", games=2, nodes=12)
    assert batch_search.stats.batches > 0
    assert [g.plain_text() for g in inc_games] == [g.plain_text() for g in batch_games]
    assert sum(len(g.records) for g in inc_games) > 20
