"""Engines that misbehave before the first game (nnue match / nnue datagen --engine):

- an option python-chess manages itself (MultiPV, Ponder, UCI_Chess960) passed the pre-match check
  and was refused when the first game started, after match.json and match.pgn were written, as an
  internal error with status 1; so was ``--chess960`` with an engine that has no UCI_Chess960
  (every game then crashed);
- the pre-match check waited 20 s for the engine and the games' start 10 s, neither settable:
  a slow engine passed the check and then failed as an internal error;
- an ``EvalFile`` naming a missing, truncated or unknown-version ``.nnue`` gave a 700-character
  line of Stockfish's own errors that never said "no such file".

Now every option is checked as the games apply it, one start-up limit (``--start-timeout``)
serves the check and every game's start, and a ``.nnue`` EvalFile is read with our own reader
first (the engine reader of the net kind that reads the file's version,
:func:`nnue.inference.kinds.engine_reader_of`); each refusal is one line, status 2, nothing written.
"""
from __future__ import annotations

import json
import struct
import sys

import pytest

from nnue.inference import kinds
from nnue.inference.net import NetFormatError
from tests.selfplay.test_selfplay_cmd import nnue
from tests.selfplay.test_uci_engines import STOCKFISH, _sf_net, misbehave, needs_sf


def _one_line(rc, se, needle):
    assert rc == 2 and se.count("\n") == 1 and needle in se, se
    assert "internal error" not in se


def test_managed_options_are_refused_before_anything_is_written(tmp_path):
    eng = misbehave()
    for opt, why in (("MultiPV=2", "one principal variation"), ("Ponder=true", "no pondering")):
        out = tmp_path / opt.split("=")[0]
        rc, _, se = nnue("match", "--engine", eng, "--engine-option", opt, "--engine", eng, "--nodes", "1",
                         "--games", "2", "-o", out)
        name = opt.split("=")[0]
        _one_line(rc, se, f"option {name!r} cannot be set: python-chess, which plays the games, manages it")
        assert why in se and not out.exists()


def test_chess960_needs_an_engine_that_declares_it(tmp_path):
    eng = misbehave()  # declares no UCI_Chess960
    for cmd in (["match", "--engine", eng, "--engine", eng, "--nodes", "1", "--games", "2", "--chess960"],
                ["datagen", "--engine", eng, "--nodes", "1", "--games", "1", "--chess960", "--no-progress"]):
        out = tmp_path / cmd[0]
        rc, _, se = nnue(*cmd, "-o", out)
        _one_line(rc, se, "has no option UCI_Chess960: it does not play Chess960 (--chess960)")
        assert not out.exists()


def test_one_settable_start_limit_for_the_check_and_every_game(tmp_path):
    """A slow engine (1.5 s before each uciok and readyok): refused in one line naming the engine
    and the limit under --start-timeout 1, before anything is written; under --start-timeout 10
    the pre-match check and the games' starts all wait for it and the match is played."""
    slow = misbehave("--uciok-delay", 1.5)
    for cmd in (["match", "--engine", slow, "--engine", misbehave(), "--games", "2"],
                ["datagen", "--engine", slow, "--games", "1", "--no-progress"]):
        out = tmp_path / f"{cmd[0]}-refused"
        rc, _, se = nnue(*cmd, "--nodes", "1", "--start-timeout", "1", "-o", out)
        _one_line(rc, se, f"engine {slow!r} sent no uciok within 1 s (the start-up limit, --start-timeout)")
        assert not out.exists()
    slow_ready = misbehave("--readyok-delay", 1.5)
    rc, _, se = nnue("match", "--engine", slow_ready, "--engine", misbehave(), "--games", "2", "--nodes", "1",
                     "--start-timeout", "1", "-o", tmp_path / "r")
    _one_line(rc, se, "sent no readyok after its options within 1 s (the start-up limit, --start-timeout)")
    rc, so, se = nnue("match", "--engine", slow, "--engine", slow_ready, "--games", "2", "--nodes", "1",
                      "--adjudicate", "maxply=20", "--start-timeout", "10", "--json", "--quiet", "-o", tmp_path / "ok")
    assert rc == 0, se
    r = json.loads(so)
    assert r["games"] == 2 and r["crashes"] == 0 and r["settings"]["start_timeout"] == 10.0
    rc, _, se = nnue("match", "--engine", slow, "--engine", slow, "--nodes", "1", "--start-timeout", "-1",
                     "-o", tmp_path / "neg")
    _one_line(rc, se, "--start-timeout -1.0: seconds > 0")


@pytest.mark.slow
def test_an_engine_slower_than_the_old_game_start_limit_plays_by_default(tmp_path):
    """12 s before uciok: inside the old pre-match check's 20 s, beyond the old game start's 10 s
    (an internal error, status 1, after the match files were written); the default limit
    (120 s) serves both now."""
    slow = misbehave("--uciok-delay", 12)
    rc, so, se = nnue("match", "--engine", slow, "--engine", misbehave(), "--games", "2", "--nodes", "1",
                      "--adjudicate", "maxply=12", "--json", "--quiet", "-o", tmp_path / "m")
    assert rc == 0, se
    assert json.loads(so)["games"] == 2


def test_a_restart_that_fails_mid_match_is_one_line(tmp_path):
    """An engine whose first game process exits at its 3rd 'go' and whose restart is not UCI at
    all: the match stops with one line (status 2, it was an internal error), naming the engine, the
    games played kept in the folder for a resume."""
    count = tmp_path / "starts"
    wrapper = tmp_path / "eng.sh"  # start 1: the check; 2: the games (exits at its 3rd go); 3: broken
    wrapper.write_text(f"#!/bin/sh\necho x >> {count}\n[ $(wc -l < {count}) -ge 3 ] && exit 7\n"
                       f"exec {misbehave('--exit-at', 3)}\n")
    wrapper.chmod(0o755)
    out = tmp_path / "m"
    rc, _, se = nnue("match", "--engine", str(wrapper), "--engine", misbehave(), "--games", "4", "--nodes", "1",
                     "--adjudicate", "maxply=40", "--quiet", "-o", out)
    _one_line(rc, se, "engine match stopped after 0 game(s): engine")
    assert "does not speak UCI" in se and "rerun into it to resume" in se
    assert (out / "match.json").exists()


# ------------------------------------------------------------------------- EvalFile nets
FUTURE = 0x1234ABCD  # a .nnue version no kind reads (a later Stockfish's, say)


def _unknown_version(tmp_path):
    p = tmp_path / "later.nnue"
    p.write_bytes(struct.pack("<I", FUTURE) + bytes(4096))
    return p


def test_the_kinds_say_which_nnue_versions_they_read(tmp_path):
    """The EvalFile check asks the net kinds' engine readers (no table of its own): each
    ``.nnue`` version one kind reads, another version none."""
    from nnue.inference.kinds.sfnnv5.codec import nnue_bytes
    from nnue.inference.kinds.sfnnv16.codec import nnue_bytes as nnue_bytes19
    from tests.engines.test_sfnnv5 import random_int_net
    from tests.inference.test_sfnnue19 import random_tensors

    assert kinds.engine_versions(".nnue") == ("0x7AF32F20 (Stockfish 15.1 .nnue, kind sfnnv5), "
                                              "0x6A448AFA (Stockfish 19 .nnue, kind sfnnv16)")
    v15, v19 = nnue_bytes(random_int_net(64)), nnue_bytes19(random_tensors(32))
    assert kinds.engine_reader_of(tmp_path / "a.nnue", v15) is kinds.get("sfnnv5").engine_reader
    assert kinds.engine_reader_of(tmp_path / "a.nnue", v19) is kinds.get("sfnnv16").engine_reader
    assert kinds.engine_reader_of(tmp_path / "a.nnue", struct.pack("<I", FUTURE)) is None
    assert kinds.engine_reader_of(tmp_path / "a.bin", v15) is None  # another suffix


def test_evalfile_too_short_truncated_or_unknown_before_the_engine_starts(tmp_path):
    """Our reader's verdicts, with an engine that loads no net at all (so nothing but our check
    can refuse): too short and truncated nets are refused in one line naming the reason; a
    version no kind reads is passed on to the engine (it may read it)."""
    from nnue.inference.kinds.sfnnv16.codec import nnue_bytes as nnue_bytes19
    from tests.inference.test_sfnnue19 import random_tensors

    eng = misbehave()
    tiny = tmp_path / "tiny.nnue"
    tiny.write_bytes(b"\x20\x2f")
    trunc = tmp_path / "sf19-truncated.nnue"
    trunc.write_bytes(nnue_bytes19(random_tensors(32))[:5000])
    for net, needle in ((tiny, "2 byte(s), too short for a .nnue file (a 4-byte version first; we read 0x7AF32F20"),
                        (trunc, "truncated at byte 5,000 while reading")):
        rc, _, se = nnue("match", "--engine", eng, "--engine", eng, "--engine-option", f"EvalFile={net}",
                         "--nodes", "1", "-o", tmp_path / "m")
        _one_line(rc, se, f"option EvalFile={net}: not a net we can read: {net}: ")
        assert needle in se and not (tmp_path / "m").exists(), se
    rc, so, se = nnue("match", "--engine", eng, "--engine", eng, "--engine-option",
                      f"EvalFile={_unknown_version(tmp_path)}", "--nodes", "1", "--games", "2", "--adjudicate",
                      "maxply=10", "--quiet", "--json", "-o", tmp_path / "ok")
    assert rc == 0 and json.loads(so)["games"] == 2, se


def test_evalfile_missing_or_truncated_is_refused_by_our_reader(tmp_path):
    """No engine start needed: the file is read before the engine runs (any UCI engine)."""
    eng = misbehave()
    missing = tmp_path / "nope.nnue"
    rc, _, se = nnue("match", "--engine", eng, "--engine", eng, "--engine-option", f"EvalFile={missing}",
                     "--nodes", "1", "-o", tmp_path / "m")
    _one_line(rc, se, f"option EvalFile={missing}: no such file")
    rc, _, se = nnue("match", "--engine", eng, "--engine", eng, "--engine-option", "EvalFile=rel/nope.nnue",
                     "--nodes", "1", "-o", tmp_path / "m")
    _one_line(rc, se, "option EvalFile=rel/nope.nnue: no such file (looked in")
    assert not (tmp_path / "m").exists()


@needs_sf
def test_evalfile_nets_stockfish_rejects_are_one_short_line(tmp_path):
    net = _sf_net(tmp_path)
    bad = tmp_path / "truncated.nnue"
    bad.write_bytes(net.read_bytes()[:1_000_000])
    out = tmp_path / "m"
    rc, _, se = nnue("match", "--engine", STOCKFISH, "--engine", STOCKFISH, "--engine-option", f"EvalFile={bad}",
                     "--nodes", "100", "-o", out)
    _one_line(rc, se, f"option EvalFile={bad}: not a net we can read: {bad}: truncated at byte 1,000,000 while "
                      "reading the feature transformer weights")
    # a version we do not read reaches the engine; its refusal is cut to the reason, with what we know
    later = _unknown_version(tmp_path)
    rc, _, se = nnue("match", "--engine", STOCKFISH, "--engine", STOCKFISH, "--engine-option", f"EvalFile={later}",
                     "--nodes", "100", "-o", out)
    _one_line(rc, se, f"the network file {later} was not loaded successfully")
    assert f"{later} is a .nnue of version 0x{FUTURE:08X}, none we read (we read 0x7AF32F20 (Stockfish 15.1 .nnue" in se
    assert "downloaded from" not in se and "terminated" not in se
    assert len(se.replace(str(later), "F")) < 400, se  # 768 characters before, besides the paths
    assert not out.exists()
    # a net of the other Stockfish: our reader reads it whole, and says what it is
    from nnue.inference.kinds.sfnnv16.codec import nnue_bytes as nnue_bytes19
    from tests.inference.test_sfnnue19 import random_tensors

    sf19 = tmp_path / "sf19.nnue"
    sf19.write_bytes(nnue_bytes19(random_tensors(64)))
    rc, _, se = nnue("match", "--engine", STOCKFISH, "--engine", STOCKFISH, "--engine-option", f"EvalFile={sf19}",
                     "--nodes", "100", "-o", out)
    _one_line(rc, se, f"{sf19} is a Stockfish 19 .nnue (our reader reads it whole)")
    assert not out.exists()
