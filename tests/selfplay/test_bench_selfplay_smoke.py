"""`nnue bench selfplay` runs end to end on a toy net (timings meaningless): both leaf-eval modes
and both move generators play the same games, the reuse counters and the profile are reported."""
from __future__ import annotations

import json

from nnue.bench import bench_selfplay
from tests.netfiles import make_int_net


def test_bench_selfplay_smoke(tmp_path):
    net = tmp_path / "net.safetensors"
    make_int_net("chess768", hidden=16, seed=2).save(net)
    out = tmp_path / "selfplay.json"
    rc = bench_selfplay.main(["--net", str(net), "--games", "2", "--nodes", "6", "--in-flight", "2",
                              "--profile", "--out", str(out)])
    assert rc == 0
    r = json.loads(out.read_text())
    assert r["same_games_in_every_run"] is True
    assert [x["leaf_eval"] for x in r["runs"]] == ["auto", "batch"]
    auto, batch = r["runs"]
    assert auto["mean_leaf_batch"] == 0.0 and batch["mean_leaf_batch"] > 0
    assert auto["positions_written"] == batch["positions_written"] > 0
    assert auto["cache_hits"] == batch["cache_hits"] > 0
    assert r["goal"]["nodes_per_cpu_second"] == 20000 and r["profile"]["top_own_time"]
    assert r["profile"]["share_of_time"]["compiled legal move generation and priors"] > 0


def test_bench_selfplay_compares_the_move_generators(tmp_path):
    net = tmp_path / "net.safetensors"
    make_int_net("chess768", hidden=16, seed=2).save(net)
    out = tmp_path / "selfplay.json"
    rc = bench_selfplay.main(["--net", str(net), "--games", "2", "--nodes", "6", "--in-flight", "2",
                              "--leaf-eval", "auto", "--movegen", "compiled,python", "--out", str(out)])
    assert rc == 0
    r = json.loads(out.read_text())
    assert r["same_games_in_every_run"] is True
    assert [x["movegen"] for x in r["runs"]] == ["compiled", "python"]
    assert r["runs"][0]["positions_written"] == r["runs"][1]["positions_written"] > 0
    assert "best_auto_compiled" in r["goal"]
    assert bench_selfplay.main(["--net", str(net), "--movegen", "rust"]) == 2


def test_bench_selfplay_refuses_a_missing_net(tmp_path, capsys):
    assert bench_selfplay.main(["--net", str(tmp_path / "none.safetensors")]) == 2
    assert "no such net" in capsys.readouterr().out


def test_bench_selfplay_sfnnv5_batch_only(tmp_path, monkeypatch):
    """An sfnnv5 net: the incremental mode, the batched one and ``batch-only`` (every leaf
    through sfnnv5's batch evaluator, no one-position path) play the same games."""
    import dataclasses

    from nnue.inference import api, kinds
    from tests.engines.test_sfnnv5 import random_int_net

    net = tmp_path / "net.safetensors"
    random_int_net(l1=32, seed=3).save(net)
    calls = []
    kind = kinds.get("sfnnv5")
    batch = kind.evaluate
    monkeypatch.setitem(kinds.KINDS, "sfnnv5", dataclasses.replace(
        kind, evaluate=lambda *a, **k: calls.append((api.SMALL_BATCH, a[1].shape[0])) or batch(*a, **k)))
    out = tmp_path / "selfplay.json"
    rc = bench_selfplay.main(["--net", str(net), "--games", "2", "--nodes", "6", "--in-flight", "2",
                              "--leaf-eval", "auto,batch-only", "--out", str(out)])
    assert rc == 0
    r = json.loads(out.read_text())
    assert r["same_games_in_every_run"] is True
    auto, only = r["runs"]
    assert (auto["leaf_eval"], only["leaf_eval"]) == ("auto", "batch-only")
    assert auto["mean_leaf_batch"] == 0.0 and only["mean_leaf_batch"] > 0
    # batch-only: calls of 1-2 positions reach the batch evaluator (the call-cost probe's calls
    # of 64 and 256 positions come before, with the one-position path in place)
    assert {n for small, n in calls if small == 0} == {1, 2} and api.SMALL_BATCH == 8
    assert bench_selfplay.main(["--net", str(net), "--leaf-eval", "fast"]) == 2
