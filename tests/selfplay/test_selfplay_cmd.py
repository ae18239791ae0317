"""nnue selfplay / match / gate_match: dumps that pack with zero rejects, atomic files, resume
after a kill, SPRT stopping, and bad input refused in one line."""
from __future__ import annotations

import inspect
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import chess
import chess.pgn
import pytest

from nnue.pipeline.pack import pack
from tests.netfiles import make_int_net

NNUE = [sys.executable, "-m", "nnue.cli"]
QUICK = ["--nodes", "6", "--adjudicate", "maxply=40", "--in-flight", "8", "--no-progress"]
JSON = ["--json"]


def nnue(*args):
    """``nnue`` in this process: (returncode, stdout, stderr)."""
    import contextlib
    import io

    from nnue.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    d = tmp_path_factory.mktemp("nets")
    a, b = d / "a" / "net.safetensors", d / "b" / "net.safetensors"
    for i, p in enumerate((a, b)):
        p.parent.mkdir()
        make_int_net("chess768", hidden=16, seed=10 + i).save(p)
    bad = d / "bad.safetensors"
    from safetensors.torch import save_file
    import torch
    save_file({"l0w": torch.zeros(2, 2, dtype=torch.int16)}, str(bad), {"nnue_forge": json.dumps({"format": "other"})})
    return a, b, bad


def test_selfplay_dumps_pack_with_zero_rejects(nets, tmp_path):
    out = tmp_path / "sp"
    rc, so, se = nnue("selfplay", nets[0], "-o", out, "--games", "5", "--games-per-file", "2",
                      "--sample-search", "1/16", *QUICK, *JSON)
    assert rc == 0, se
    summary = json.loads(so)
    files = sorted(p.name for p in out.iterdir())
    assert files == ["run.json", "selfplay-00000.plain", "selfplay-00001.plain", "selfplay-00002.plain"]
    assert summary["games"] == 5 and summary["files_written"] == 3
    res = pack([out], tmp_path / "ds", progress=False)
    assert res["read"] == res["packed"] == summary["positions"] > 0 and sum(res["rejected"].values()) == 0
    text = (out / "selfplay-00000.plain").read_text()
    recs = [r.split("\n") for r in text.strip().split("\ne\n")]
    plies = []
    for r in recs:
        fen, move, score, ply, result = (x.split(" ", 1)[1] for x in r[:5])
        b = chess.Board(fen)
        assert chess.Move.from_uci(move) in b.legal_moves and b.ply() == int(ply)
        assert abs(int(score)) <= 10000 and int(result) in (-1, 0, 1)
        plies.append(int(ply))
    assert plies[0] == 8  # 8 random plies, then the searched positions
    # the same run again does nothing (every file is there) ...
    rc, so, _ = nnue("selfplay", nets[0], "-o", out, "--games", "5", "--games-per-file", "2",
                     "--sample-search", "1/16", *QUICK, *JSON)
    assert rc == 0 and json.loads(so)["files_written"] == 0
    # ... and other settings into the same folder are refused in one line
    rc, _, se = nnue("selfplay", nets[0], "-o", out, "--games", "5", *QUICK[:2], "--no-progress")
    assert rc == 2 and se.count("\n") == 1 and "other settings" in se


def test_selfplay_rerun_fills_in_missing_files_identically(nets, tmp_path):
    """What a kill leaves (some files, a stale temporary one): the rerun writes exactly the
    missing files, byte-identical to an uninterrupted run's."""
    args = ["selfplay", str(nets[0]), "--games", "3", "--games-per-file", "1", "--nodes", "4",
            "--adjudicate", "maxply=30", "--in-flight", "3", "--no-progress", "--json"]
    ref, cut = tmp_path / "ref", tmp_path / "cut"
    assert nnue(*args, "-o", ref)[0] == 0
    assert nnue(*args, "-o", cut)[0] == 0
    (cut / "selfplay-00001.plain").unlink()
    (cut / ".selfplay-00001.plain.abc.tmp").write_text("fen half")
    rc, so, _ = nnue(*args, "-o", cut)
    assert rc == 0 and json.loads(so)["files_written"] == 1
    assert sorted(q.name for q in cut.iterdir()) == sorted(q.name for q in ref.iterdir())
    for f in ref.glob("*.plain"):
        assert (cut / f.name).read_bytes() == f.read_bytes()


@pytest.mark.slow
def test_selfplay_resumes_after_kill_with_identical_files(nets, tmp_path):
    args = ["selfplay", str(nets[0]), "--games", "6", "--games-per-file", "1", "--nodes", "4",
            "--adjudicate", "maxply=40", "--in-flight", "1", "--no-progress"]
    ref = tmp_path / "ref"
    assert nnue(*args, "-o", ref)[0] == 0
    killed = tmp_path / "killed"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.Popen([*NNUE, *args, "-o", str(killed)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(killed.glob("selfplay-*.plain")):
        time.sleep(0.05)
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    landed = sorted(killed.glob("selfplay-*.plain"))
    assert 1 <= len(landed) < 6, "the kill should land mid-run"
    for f in landed:  # whatever landed is complete: identical to the uninterrupted run's file
        assert f.read_bytes() == (ref / f.name).read_bytes()
    (killed / ".selfplay-00005.plain.x.tmp").write_text("fen half")  # a stale temporary file
    assert nnue(*args, "-o", killed)[0] == 0
    assert sorted(q.name for q in killed.iterdir()) == sorted(q.name for q in ref.iterdir())
    for f in ref.glob("*.plain"):
        assert (killed / f.name).read_bytes() == f.read_bytes()


def test_gate_match_signature_files_and_result(nets, tmp_path):
    from nnue.selfplay.match import gate_match

    sig = inspect.signature(gate_match)
    assert list(sig.parameters) == ["candidate", "champion", "out_dir", "games", "nodes", "elo0", "elo1", "alpha",
                                    "beta", "concurrency", "openings", "seed"]
    assert {k: v.default for k, v in sig.parameters.items() if v.default is not inspect._empty} == dict(
        games=200, nodes=64, elo0=0.0, elo1=5.0, alpha=0.05, beta=0.05, concurrency=1, openings=None, seed=0)
    ops = tmp_path / "openings.epd"
    ops.write_text("rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1\n"
                   "# comment\n\nrnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq -\n")
    r = gate_match(nets[0], nets[1], tmp_path / "gate", games=2, nodes=4, openings=ops, seed=1)
    assert r["verdict"] in ("H1", "H0", "inconclusive")
    assert {"verdict", "llr", "elo", "elo_ci95", "penta", "games", "pgn", "json"} <= set(r)
    assert len(r["penta"]) == 5 and sum(r["penta"]) * 2 == r["games"] == 2
    on_disk = json.loads(Path(r["json"]).read_text())
    assert on_disk["penta"] == r["penta"] and on_disk["verdict"] == r["verdict"]
    with open(r["pgn"]) as f:
        games = [g for g in iter(lambda: chess.pgn.read_game(f), None)]
    assert len(games) == 2
    # each opening is played twice, once with each colour: A is white in x.1, black in x.2
    rounds = {g.headers["Round"]: g for g in games}
    for p in (1,):
        w1, w2 = rounds[f"{p}.1"], rounds[f"{p}.2"]
        assert w1.headers["White"] == w2.headers["Black"] and w1.headers["FEN"] == w2.headers["FEN"]
    score_a = sum({"1-0": 1, "0-1": 0, "1/2-1/2": 0.5}[g.headers["Result"]] if g.headers["White"].startswith("A:")
                  else {"1-0": 0, "0-1": 1, "1/2-1/2": 0.5}[g.headers["Result"]] for g in games)
    assert score_a == pytest.approx(sum(i * 0.5 * n for i, n in enumerate(r["penta"])))


def test_match_stops_at_the_sprt_bound(nets, tmp_path):
    # the same net on both sides, games drawn at ply 12: with bounds [100, 150] nElo each drawn
    # pair adds about -0.16 to the LLR, so H0 comes after about 20 pairs, well before 100
    rc, so, se = nnue("match", "--net", nets[0], "--net", nets[0], "-o", tmp_path / "m", "--max-games", "200",
                      "--nodes", "4", "--elo0", "100", "--elo1", "150", "--in-flight", "4", "--adjudicate", "maxply=12",
                      "--json")
    assert rc == 0, se
    r = json.loads(so)
    assert r["verdict"] == "H0" and r["sprt_stopped"] and r["games"] < 100
    assert r["llr"] <= -2.94 and r["sprt"]["llr_bounds"][0] == pytest.approx(-2.944, abs=1e-3)
    assert r["stop"]["reason"] == "H0 bound" and r["stop"]["max_games"] == 200
    assert r["stop"]["games_at_stop"] <= r["games"] and r["stop"]["llr_at_stop"] <= -2.94
    lines = json.loads(Path(r["json"]).read_text())["lines"]
    assert f"STOP: H0 bound after {r['stop']['games_at_stop']} of at most 200 games" in lines
    assert "LLR" in se and "W " in se  # the live line


def test_match_game_budget_reports_the_unfinished_verdict(nets, tmp_path):
    """--max-games: no bound within the budget (3 pairs, bounds [0, 5]): exactly the budget is
    played (an odd budget: whole pairs, one game fewer) and the verdict is the unfinished one."""
    for budget, played in (("6", 6), ("7", 6)):
        rc, so, se = nnue("match", "--net", nets[0], "--net", nets[1], "-o", tmp_path / f"m{budget}",
                          "--max-games", budget, "--nodes", "4", "--in-flight", "6", "--adjudicate", "maxply=30")
        assert rc == 0, se
        r = json.loads((tmp_path / f"m{budget}" / "match.json").read_text())
        lo, hi = r["sprt"]["llr_bounds"]
        assert r["games"] == played == 2 * sum(r["penta"]) and lo < r["llr"] < hi
        assert r["verdict"] == "inconclusive" and not r["sprt_stopped"]
        assert r["stop"]["reason"] == "budget" and r["stop"]["max_games"] == played
        lean = "H1" if r["llr"] > 0 else "H0" if r["llr"] < 0 else "neither"
        assert r["stop"]["leaning"] == lean
        # printed in seed 000's layout, then the stop line
        out = so.splitlines()
        assert out[0].startswith("LLR: ") and out[0].endswith(" inconclusive") and out[3].startswith("PENTA: ")
        assert out[4].startswith(f"STOP: budget of {played} games spent, no bound reached: inconclusive, leaning {lean}")


def test_the_verdict_is_the_bound_crossed_first():
    """Pairs in flight when the LLR crosses a bound are counted, but cannot undo the crossing."""
    from nnue.selfplay.match import Tally, _report

    t = Tally(100.0, 150.0, 0.05, 0.05)
    for p in range(1000):  # drawn pairs: the LLR falls to the H0 bound
        t.add(p, 0.5)
        if t.add(p, 0.5) and t.crossed():
            break
    at = t.stopped_at
    assert at["verdict"] == "H0" and at["llr"] <= -2.94
    for q in range(3):  # then won pairs that were in flight pull it back inside
        t.add(20_000 + q, 1.0)
        t.add(20_000 + q, 1.0)
    assert t.result().verdict == "inconclusive"
    assert t.crossed() is False and t.stopped_at == at  # recorded once
    r = _report(t, {"pairs_planned": 100}, {}, 0.0, True)
    assert r["verdict"] == "H0" and r["sprt_stopped"] and r["stop"]["reason"] == "H0 bound"
    assert r["games"] == at["games"] + 6 and r["stop"]["games_at_stop"] == at["games"]
    assert r["lines"][0].endswith(f"H0 (crossed at {at['games']} games, LLR {at['llr']:+.2f})")


def test_bad_input_is_one_line(nets, tmp_path):
    bad_ops = tmp_path / "bad.epd"
    bad_ops.write_text("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1\n8/8/8/8/8/8/8/8 w - - 0 1\n")
    cases = [
        (["selfplay", nets[2], "-o", tmp_path / "x", "--games", "1"], "bad.safetensors"),
        (["match", "--net", nets[0], "--net", nets[2], "-o", tmp_path / "y"], "bad.safetensors"),
        (["selfplay", nets[0], "-o", tmp_path / "z", "--games", "1", "--openings", bad_ops], "line 2"),
        (["match", "--net", nets[0], "--net", nets[1], "--openings", bad_ops, "-o", tmp_path / "w"], "line 2"),
        (["selfplay", nets[0], "-o", tmp_path / "v", "--games", "1", "--adjudicate", "win=3"], "--adjudicate"),
        (["selfplay", nets[0], "-o", tmp_path / "u", "--games", "1", "--sample-search", "1/0"], "--sample-search"),
        (["match", "--net", nets[0], "-o", tmp_path / "t"], "two --net"),
    ]
    for args, needle in cases:
        rc, _, se = nnue(*args)
        assert rc == 2 and se.count("\n") == 1 and needle in se and "error" in se, (args, se)
    assert not (tmp_path / "z").exists() or not list((tmp_path / "z").glob("*.plain"))


def _tiny_net(seed: int = 3):
    """A random tiny integer net (L0 -> L1 -> out), the weights of tests/inference's tiny gate, smaller."""
    import torch

    from nnue.spec.quant import QuantScheme
    from nnue.inference.kinds.tiny import TinyIntegerNet, make_tiny_arch
    from nnue.pipeline.features import get_feature_set

    arch = make_tiny_arch("chess768", 16, "crelu", "MaterialCount<1>", 8, "crelu")
    g = torch.Generator().manual_seed(seed)
    f, h, b, l1 = get_feature_set("chess768").num_inputs, 16, arch["num_buckets"], arch["l1_inputs"]
    return TinyIntegerNet(arch, QuantScheme(), torch.randint(-60, 61, (f, h), generator=g).to(torch.int16),
                          torch.randint(0, 120, (h,), generator=g).to(torch.int16),
                          torch.randint(-127, 128, (b, 8, l1), generator=g).to(torch.int8),
                          torch.randint(-2000, 2001, (b, 8), generator=g).to(torch.int32),
                          torch.randint(-127, 128, (b, 8), generator=g).to(torch.int8),
                          torch.randint(-1000, 1001, (b,), generator=g).to(torch.int32))


def test_selfplay_and_match_with_tiny_and_residual_nets(tmp_path):
    """A tiny net and a residual net on the material base (computed by nnue.inference at every
    node) play self-play that packs with zero rejects, and a match against each other; a residual
    net on a Stockfish base is refused in one line before anything is written (our search cannot
    compute that base)."""
    from nnue.inference import residual

    tiny, res, sf = tmp_path / "tiny.safetensors", tmp_path / "res.safetensors", tmp_path / "sf.safetensors"
    _tiny_net().save(tiny)
    net = make_int_net("chess768", hidden=16, seed=12)
    net.arch["residual"] = residual.header("material", 0.5)
    net.save(res)
    net.arch["residual"] = residual.header("stockfish-classical", 0.5)
    net.save(sf)
    for p in (tiny, res):
        out = tmp_path / f"sp-{p.stem}"
        rc, so, se = nnue("selfplay", p, "-o", out, "--games", "3", *QUICK, *JSON)
        assert rc == 0, se
        s = json.loads(so)
        got = pack([out], tmp_path / f"ds-{p.stem}", progress=False)
        assert got["read"] == got["packed"] == s["positions"] > 0 and sum(got["rejected"].values()) == 0
    rc, so, se = nnue("match", "--net", tiny, "--net", res, "-o", tmp_path / "m", "--games", "2", "--quiet", "--json",
                      *QUICK[:4])
    assert rc == 0, se
    m = json.loads(so)
    assert m["games"] == 2 and sum(m["wdl"]) == 2 and sum(m["penta"]) == 1
    for args in (["selfplay", sf, "-o", tmp_path / "x", "--games", "1"],
                 ["match", "--net", res, "--net", sf, "-o", tmp_path / "y"]):
        rc, _, se = nnue(*args)
        assert rc == 2 and se.count("\n") == 1 and "stockfish-classical base" in se, se
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_selfplay_summary_says_how_games_ended_and_when_all_were_drawn(nets, tmp_path):
    """The printed summary: games, results from white's view, how they ended; a warning when every
    game was drawn (here all reach the ply limit: 8 random plies, then 2 searched)."""
    rc, so, se = nnue("selfplay", nets[0], "-o", tmp_path / "sp", "--games", "3", "--nodes", "2",
                      "--adjudicate", "maxply=10", "--no-progress")
    assert rc == 0, se
    lines = so.splitlines()
    assert lines[0].startswith("selfplay: 3 games played in this run, ")
    assert lines[1] == "results (white's view): 1-0 0 / draw 3 / 0-1 0 (100% draws)"
    assert lines[2] == "ended by: ply limit 3"
    assert lines[3].startswith("WARNING: all 3 games were drawn")
    rc, so, _ = nnue("selfplay", nets[0], "-o", tmp_path / "sp", "--games", "3", "--nodes", "2",
                     "--adjudicate", "maxply=10", "--no-progress", "--json")
    s = json.loads(so)
    assert rc == 0 and s["games"] == 0 and s["wdl_white"] == [0, 0, 0]  # a rerun: nothing left to play


def test_every_option_says_its_default():
    from nnue.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    for name in ("sprt", "selfplay", "match", "datagen"):
        for act in sub.choices[name]._actions:
            if not act.option_strings or act.dest == "help":
                continue
            text = act.help or ""
            assert "default" in text or "required" in text, (name, act.option_strings, text)
            if act.default not in (None, False) and "%(default)" not in text:
                assert str(act.default).rstrip("0").rstrip(".") in text, (name, act.option_strings, text)
