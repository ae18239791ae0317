"""nnue datagen and nnue match --engine with real Stockfish 15.1 (Debian's /usr/games/stockfish,
installed by scripts/ensure_stockfish.sh): dumps that pack with zero rejects, the shared data's
conventions, crashes counted and survived, bad engines refused in one line."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import chess
import pytest

from nnue.pipeline.pack import pack

from tests.selfplay.test_selfplay_cmd import nnue

STOCKFISH = shutil.which("stockfish") or ("/usr/games/stockfish" if Path("/usr/games/stockfish").exists() else None)
needs_sf = pytest.mark.skipif(STOCKFISH is None, reason="stockfish not installed (scripts/ensure_stockfish.sh)")


def _records(path: Path):
    text = path.read_text()
    for r in text.strip().split("\ne\n"):
        lines = r.strip().split("\n")
        yield {k: v for k, v in (ln.split(" ", 1) for ln in lines if ln != "e")}


@needs_sf
def test_datagen_stockfish_dumps_pack_with_zero_rejects(tmp_path):
    out = tmp_path / "dg"
    rc, so, se = nnue("datagen", "--engine", STOCKFISH, "--nodes", "300", "--games", "3", "-o", out,
                      "--threads", "2", "--games-per-file", "2", "--no-progress")
    assert rc == 0, se
    s = json.loads(so)
    assert s["games"] == 3 and s["crashed_games"] == 0 and s["files_written"] == 2
    res = pack([out], tmp_path / "ds", progress=False)
    assert res["read"] == res["packed"] == s["positions"] > 0 and sum(res["rejected"].values()) == 0
    # the shared self-play's conventions: 8 random plies, stm POV results that flip every ply,
    # UCI cp, mates as ±(32000 − plies) and the mate-in-one move really mates
    prev = None
    for rec in _records(out / "datagen-00000.plain"):
        ply, res_, score = int(rec["ply"]), int(rec["result"]), int(rec["score"])
        b = chess.Board(rec["fen"])
        assert b.ply() == ply and chess.Move.from_uci(rec["move"]) in b.legal_moves
        if prev is None or ply != prev[0] + 1:
            assert ply == 8
        else:
            assert res_ == -prev[1]
        if score == 31999:
            b.push_uci(rec["move"])
            assert b.is_checkmate()
        assert abs(score) <= 32000
        prev = (ply, res_)


@needs_sf
def test_engine_match_and_crash_mid_game(tmp_path):
    crashy = tmp_path / "crashy.py"
    # a real Stockfish that is killed at its 13th 'go': in the middle of its first game
    crashy.write_text(f"""#!{sys.executable}
import os, subprocess, sys
p = subprocess.Popen([{STOCKFISH!r}], stdin=subprocess.PIPE, text=True)
gos = 0
for line in sys.stdin:
    if line.startswith("go"):
        gos += 1
        if gos > 12:
            p.kill()
            os._exit(1)
    p.stdin.write(line)
    p.stdin.flush()
    if line.strip() == "quit":
        break
p.wait()
""")
    crashy.chmod(0o755)
    rc, so, se = nnue("match", "--engine", str(crashy), "--engine", STOCKFISH, "--nodes", "100", "--games", "2",
                      "-o", tmp_path / "m", "--adjudicate", "maxply=60", "--json")
    assert rc == 0, se
    r = json.loads(so)
    assert r["games"] == 2 and r["crashes"] >= 1
    assert r["wdl"][2] >= r["crashes"]  # A (crashy) lost every game it crashed in
    pgn = Path(r["pgn"]).read_text()
    assert pgn.count("[Round ") == 2 and "crashed" in pgn
    # the forfeited game keeps the moves played before the crash (8 book plies, then 12 of A's
    # and 11 or 12 of B's)
    import io

    import chess.pgn

    f = io.StringIO(pgn)
    games = [g for g in iter(lambda: chess.pgn.read_game(f), None)]
    lost = [g for g in games if "crashed" in g.headers.get("Termination", "")]
    assert lost and all(len(list(g.mainline_moves())) >= 8 + 12 + 11 for g in lost[:1])
    # datagen with the same engine: crashed games are dropped and counted; the run completes
    rc, so, se = nnue("datagen", "--engine", str(crashy), "--nodes", "100", "--games", "1", "-o", tmp_path / "d",
                      "--no-progress")
    assert rc == 0, se
    s = json.loads(so)
    assert s["games"] == 1 and s["crashed_games"] == 1 and (tmp_path / "d" / "datagen-00000.plain").exists()


def test_bad_engines_one_line(tmp_path):
    cases = [(["datagen", "--engine", tmp_path / "nope", "--nodes", "10", "--games", "1", "-o", tmp_path / "a"],
              "no such file"),
             (["match", "--engine", "/bin/true", "--engine", "/bin/true", "--nodes", "10", "-o", tmp_path / "b"],
              "does not speak UCI"),
             (["datagen", "--engine", "/bin/true", "--nodes", "10", "--games", "1", "-o", tmp_path / "c"],
              "does not speak UCI"),
             (["datagen", "--engine", "/bin/true", "--nodes", "10", "--games", "1", "-o", tmp_path / "c",
               "--move-timeout", "-1"], "--move-timeout -1.0: seconds > 0"),
             (["match", "--engine", "/bin/true", "--engine", "/bin/true", "--nodes", "10", "-o", tmp_path / "b",
               "--move-timeout", "-2"], "--move-timeout -2.0: seconds > 0")]
    for args, needle in cases:
        rc, _, se = nnue(*args)
        assert rc == 2 and se.count("\n") == 1 and needle in se, (args, se)
    assert not (tmp_path / "c").exists()


MISBEHAVE = Path(__file__).with_name("uci_misbehave.py")


def misbehave(*args) -> str:
    """The command line of a real misbehaving UCI engine process (tests/selfplay/uci_misbehave.py)."""
    import shlex

    return shlex.join([sys.executable, str(MISBEHAVE), *map(str, args)])


def test_datagen_survives_a_hung_and_a_crashing_engine(tmp_path):
    """A random-move UCI process that hangs at its 5th 'go' (first process only): that game is
    dropped and counted as timed out, the engine killed and restarted, the other games written;
    the same with one that exits at its 7th 'go' (crashed)."""
    for kind, flag, key in (("hang", "--hang-at", "timed_out_games"), ("exit", "--exit-at", "crashed_games")):
        out = tmp_path / kind
        eng = misbehave(flag, 5 if kind == "hang" else 7, "--once", tmp_path / f"{kind}.armed")
        rc, so, se = nnue("datagen", "--engine", eng, "--nodes", "1", "--games", "3", "-o", out,
                          "--adjudicate", "maxply=30", "--move-timeout", "1", "--no-progress")
        assert rc == 0, se
        s = json.loads(so)
        other = "crashed_games" if key == "timed_out_games" else "timed_out_games"
        assert s["games"] == 3 and s[key] == 1 and s[other] == 0, s
        text = (out / "datagen-00000.plain").read_text()
        # two whole games survive: 30 - 8 random plies = 22 records each, the first game dropped
        assert text.count("\ne\n") == s["positions"] == 2 * 22
        res = pack([out], tmp_path / f"ds-{kind}", progress=False)
        assert res["packed"] == s["positions"] and sum(res["rejected"].values()) == 0


@needs_sf
def test_match_hung_engine_loses_on_time_and_the_match_goes_on(tmp_path):
    """A real Stockfish behind a proxy that stops answering at its 5th 'go' (only the first
    process): the hung side loses that game on time, is killed and restarted, and the match's
    other games are played by the restarted engine."""
    eng = misbehave("--engine", STOCKFISH, "--hang-at", 5, "--once", tmp_path / "armed")
    rc, so, se = nnue("match", "--engine", eng, "--engine", STOCKFISH, "--nodes", "200", "--games", "4",
                      "-o", tmp_path / "m", "--adjudicate", "maxply=40", "--move-timeout", "2", "--json")
    assert rc == 0, se
    r = json.loads(so)
    assert r["games"] == 4 and r["timeouts"] == 1 and r["crashes"] == 0
    assert r["settings"]["move_timeout"] == 2.0
    with open(r["pgn"]) as f:
        import chess.pgn

        games = [g for g in iter(lambda: chess.pgn.read_game(f), None)]
    hung = [g for g in games if "timed out" in g.headers.get("Termination", "")]
    assert len(hung) == 1 and hung[0].headers["Round"] == "1.1"  # A is white in 1.1, its 5th move
    assert hung[0].headers["Result"] == "0-1"  # the hung side (A, white) lost on time
    assert all(len(list(g.mainline_moves())) > 0 for g in games if g is not hung[0])  # real games after it


@needs_sf
def test_datagen_stockfish_hung_mid_run_still_packs_clean(tmp_path):
    eng = misbehave("--engine", STOCKFISH, "--hang-at", 9, "--once", tmp_path / "armed")
    rc, so, se = nnue("datagen", "--engine", eng, "--nodes", "200", "--games", "3", "-o", tmp_path / "d",
                      "--adjudicate", "maxply=40", "--move-timeout", "2", "--no-progress")
    assert rc == 0, se
    s = json.loads(so)
    assert s["games"] == 3 and s["timed_out_games"] == 1 and s["crashed_games"] == 0 and s["positions"] > 0
    res = pack([tmp_path / "d"], tmp_path / "ds", progress=False)
    assert res["read"] == res["packed"] == s["positions"] and sum(res["rejected"].values()) == 0


# ------------------------------------------------------------------------- engine options
def _sf_net(tmp_path: Path) -> Path:
    """Stockfish 15.1's built-in net, written by the engine itself (not under its own name:
    Stockfish ignores an EvalFile named nn-ad9b42354671.nnue and uses the built-in one)."""
    import subprocess

    net = tmp_path / "sf-builtin.nnue"
    subprocess.run([STOCKFISH], input=f"uci\nexport_net {net}\nquit\n", text=True, capture_output=True, check=True,
                   timeout=60)
    assert net.stat().st_size == 47_001_499
    return net


@needs_sf
def test_stockfish_classical_against_its_net_per_side_options(tmp_path):
    """``--engine-option`` belongs to the --engine before it: A plays with ``Use NNUE=false``,
    B with an EvalFile; what each engine said about its evaluation is in match.json."""
    net = _sf_net(tmp_path)
    rc, so, se = nnue("match", "--engine", STOCKFISH, "--engine-option", "Use NNUE=false",
                      "--engine", STOCKFISH, "--engine-option", f"EvalFile={net}", "--nodes", "200", "--games", "4",
                      "--adjudicate", "maxply=60", "-o", tmp_path / "m", "--json", "--quiet")
    assert rc == 0, se
    r = json.loads(so)
    assert r["games"] == 4 and r["crashes"] == 0 and r["timeouts"] == 0
    a, b = r["players"]["A"], r["players"]["B"]
    assert a["options"] == {"Threads": 1, "Hash": 16, "Use NNUE": False}
    assert a["info"] == ["classical evaluation enabled"]
    assert b["options"]["EvalFile"] == str(net) and b["info"] == [f"NNUE evaluation using {net} enabled"]
    assert a["id"].startswith("Stockfish 15.1")
    assert r["settings"]["engine_options"] == {"A": a["options"], "B": b["options"]}


@needs_sf
def test_engine_option_mistakes_are_one_line(tmp_path):
    cases = [(["--engine", STOCKFISH, "--engine-option", "NoSuchThing=1", "--engine", STOCKFISH],
              "has no option 'NoSuchThing' (it has: "),
             (["--engine", STOCKFISH, "--engine-option", "Use NNUE=maybe", "--engine", STOCKFISH],
              "option 'Use NNUE' is a check: true or false, not 'maybe'"),
             (["--engine", STOCKFISH, "--engine-option", "Hash=0", "--engine", STOCKFISH],
              "option 'Hash' is 0, outside its range 1..33554432"),
             (["--engine-option", "Hash=16", "--engine", STOCKFISH, "--engine", STOCKFISH],
              "give it after the --engine it is for"),
             (["--engine", STOCKFISH, "--engine-option", "Hash", "--engine", STOCKFISH], "NAME=VALUE"),
             (["--engine", "/bin/echo hello", "--engine", STOCKFISH], "does not speak UCI")]
    for args, needle in cases:
        rc, _, se = nnue("match", *args, "--nodes", "10", "-o", tmp_path / "m")
        assert rc == 2 and se.count("\n") == 1 and needle in se, (args, se)
    assert not (tmp_path / "m").exists()
