"""What a match leaves on disk while it runs: every finished game in match.pgn as it ends,
match.json rewritten atomically after it; a real Ctrl-C or SIGTERM leaves both consistent and a
rerun with the same settings resumes (issue 20, item 7)."""
from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import chess.pgn

from tests.selfplay.test_selfplay_cmd import NNUE, nnue, nets  # noqa: F401  (nets: the module fixture)
from tests.selfplay.test_uci_engines import STOCKFISH, needs_sf

NET_ARGS = ["--games", "12", "--nodes", "4", "--adjudicate", "maxply=30", "--in-flight", "2", "--quiet"]


def _games(pgn: Path) -> list[chess.pgn.Game]:
    text = pgn.read_text()
    f = io.StringIO(text)
    return [g for g in iter(lambda: chess.pgn.read_game(f), None)]


def _check_consistent(out: Path) -> dict:
    """match.json and match.pgn agree: the JSON's game log is the PGN's games, in order."""
    r = json.loads((out / "match.json").read_text())
    pgn = out / "match.pgn"
    assert pgn.stat().st_size == r["pgn_bytes"]
    games = _games(pgn)
    assert [g.headers["Round"] for g in games] == [f"{p + 1}.{c + 1}" for p, c, *_ in r["game_log"]]
    assert all(g.headers["Result"] in ("1-0", "0-1", "1/2-1/2") and not g.errors for g in games)
    assert r["games"] == len(games) == sum(r["wdl"])
    return r


def _interrupt(cmd: list[str], out: Path, sig: int, min_games: int = 2) -> subprocess.CompletedProcess:
    """Run ``cmd`` in a subprocess and send it ``sig`` once match.json logs ``min_games`` games."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and p.poll() is None:
        try:
            if len(json.loads((out / "match.json").read_text())["game_log"]) >= min_games:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    assert p.poll() is None, "the match ended before the signal: " + p.stderr.read()
    p.send_signal(sig)
    so, se = p.communicate(timeout=120)
    return subprocess.CompletedProcess(cmd, p.returncode, so, se)


def test_sigterm_mid_match_leaves_both_files_and_the_rerun_resumes(nets, tmp_path):  # noqa: F811
    a, b = nets[0], nets[1]
    ref, out = tmp_path / "ref", tmp_path / "cut"
    rc, _, se = nnue("match", "--net", a, "--net", b, "-o", ref, *NET_ARGS)
    assert rc == 0, se
    full = _check_consistent(ref)
    assert full["status"] == "finished" and full["games"] == 12
    # a match's own defaults: the shipped book, the search's match settings, the match adjudication
    st = full["settings"]
    assert st["book"] == "shipped:balanced.txt" and st["random_plies"] == 0 and st["openings"] is None
    assert st["search"]["fpu"] == 0.0 and st["search"]["contempt"] == 0.1
    assert st["adjudication"] == {"win_cp": 1000, "win_plies": 6, "draw_cp": 10, "draw_plies": 8,
                                  "draw_min_ply": 40, "max_ply": 30}
    assert full["lines"][-2].startswith("ENDS: draws ") and full["lines"][-1].startswith("PLAYERS: A ")
    cmd = [*NNUE, "match", "--net", str(a), "--net", str(b), "-o", str(out), *NET_ARGS]
    res = _interrupt(cmd, out, signal.SIGTERM)
    assert res.returncode == 130, res.stderr
    assert res.stderr.count("\n") == 1 and "rerun the same command to resume" in res.stderr, res.stderr
    cut = _check_consistent(out)
    assert cut["status"] == "interrupted" and 2 <= cut["games"] < 12
    # other settings into the same folder are refused in one line, nothing changes
    rc, _, se = nnue("match", "--net", a, "--net", b, "-o", out, *NET_ARGS[:2], "--nodes", "5", *NET_ARGS[4:])
    assert rc == 2 and se.count("\n") == 1 and "other settings (nodes: 4 there, 5 now)" in se, se
    # the rerun plays only the missing games; our search is deterministic per game, so the
    # result is the uninterrupted match's, game for game
    rc, _, se = nnue("match", "--net", a, "--net", b, "-o", out, *NET_ARGS)
    assert rc == 0, se
    done = _check_consistent(out)
    assert done["status"] == "finished" and done["games"] == 12
    assert done["penta"] == full["penta"] and done["wdl"] == full["wdl"]
    by_round = {g.headers["Round"]: str(g) for g in _games(out / "match.pgn")}
    assert by_round == {g.headers["Round"]: str(g) for g in _games(ref / "match.pgn")}
    assert sorted(by_round) == sorted(f"{p}.{c}" for p in range(1, 7) for c in (1, 2))
    # a finished match run again plays nothing and reports the same
    before = (out / "match.pgn").read_bytes()
    rc, so, se = nnue("match", "--net", a, "--net", b, "-o", out, *NET_ARGS, "--json")
    assert rc == 0 and json.loads(so)["penta"] == full["penta"]
    assert (out / "match.pgn").read_bytes() == before and _check_consistent(out)["games"] == 12


def test_a_kill_after_the_pgn_append_is_cut_back_on_resume(nets, tmp_path):  # noqa: F811
    """What SIGKILL can leave: a game appended to the PGN (even half of one) that match.json does
    not record yet. The rerun cuts the PGN back to match.json's length and plays that game again."""
    out = tmp_path / "m"
    args = ["match", "--net", nets[0], "--net", nets[1], "-o", out, "--games", "4", "--nodes", "4",
            "--adjudicate", "maxply=20", "--in-flight", "1", "--quiet"]
    assert nnue(*args)[0] == 0
    r = json.loads((out / "match.json").read_text())
    # rebuild the state after game 2: the log and the PGN's length at that point
    pgn = (out / "match.pgn").read_bytes()
    cut = [i for i in range(len(pgn)) if pgn.startswith(b'[Event', i)][2]
    r.update(status="running", game_log=r["game_log"][:2], pgn_bytes=cut)
    (out / "match.json").write_text(json.dumps(r))
    (out / "match.pgn").write_bytes(pgn[:cut] + b'[Event "?"]\n[Round "2.1"]\n\n1. e4 e5 2. N')  # torn append
    rc, _, se = nnue(*args)
    assert rc == 0, se
    done = _check_consistent(out)
    assert done["games"] == 4 and (out / "match.pgn").read_bytes() == pgn


@needs_sf
def test_ctrl_c_in_an_engine_match_and_resume(tmp_path):
    out = tmp_path / "m"
    args = ["match", "--engine", STOCKFISH, "--engine", STOCKFISH, "--nodes", "64", "--games", "8",
            "--adjudicate", "maxply=40", "--quiet", "-o", str(out)]
    res = _interrupt([*NNUE, *args], out, signal.SIGINT)
    assert res.returncode == 130 and "rerun the same command to resume" in res.stderr, res.stderr
    cut = _check_consistent(out)
    assert cut["status"] == "interrupted" and 2 <= cut["games"] < 8 and cut["crashes"] == 0
    rc, _, se = nnue(*args)
    assert rc == 0, se
    done = _check_consistent(out)
    assert done["status"] == "finished" and done["games"] == 8 and done["crashes"] == 0
    rounds = [g.headers["Round"] for g in _games(out / "match.pgn")]
    assert sorted(rounds) == sorted(f"{p}.{c}" for p in range(1, 5) for c in (1, 2))


def test_what_a_resume_plays(tmp_path):
    """Every game not in the log; once the SPRT had stopped the match, only the other halves of
    the pairs it had begun."""
    from nnue.selfplay.match import Recorder, Tally, _Live

    rec = Recorder(tmp_path, {}, {}, Tally(0, 5, 0.05, 0.05), _Live(False))
    rec.log = [[0, 0, 1.0, None, "checkmate"], [0, 1, 0.5, None, "ply limit"], [2, 1, 0.0, "crash", "engine crash"]]
    assert rec.todo(4) == [(1, 0), (1, 1), (2, 0), (3, 0), (3, 1)]
    rec.tally.stopped_at = {"verdict": "H1", "llr": 3.0, "games": 2}
    assert rec.todo(4) == [(2, 0)]


def test_a_rerun_refuses_a_net_file_changed_under_the_same_path(tmp_path):
    """An engine match with ``--engine-option EvalFile=PATH``, then the net re-exported to the
    same PATH (a new fine-tune) and the same command run again: it once took the folder for the
    same match (same path, same settings) and printed the old net's finished result (or, for an
    interrupted match, would have mixed the games of two nets in one SPRT). Now it refuses in one
    line naming the file; with the file's bytes as they were, it resumes as before."""
    from tests.selfplay.test_uci_engines import misbehave

    net, out = tmp_path / "net.nnue", tmp_path / "m"
    net.write_bytes(b"the first net")
    eng = misbehave("--option", "EvalFile")
    args = ["match", "--engine", eng, "--engine", eng, "--engine-option", f"EvalFile={net}", "--nodes", "1",
            "--games", "2", "--adjudicate", "maxply=16", "--quiet", "-o", str(out)]
    rc, _, se = nnue(*args)
    assert rc == 0, se
    first = (out / "match.json").read_bytes()
    assert _check_consistent(out)["games"] == 2
    net.write_bytes(b"the second net")
    rc, _, se = nnue(*args)
    assert rc == 2 and se.count("\n") == 1 and "B's EvalFile" in se and "sha256" in se, se
    assert (out / "match.json").read_bytes() == first  # refused before writing anything
    net.write_bytes(b"the first net")
    rc, _, se = nnue(*args)
    assert rc == 0, se
    assert _check_consistent(out)["games"] == 2
