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
