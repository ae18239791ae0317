"""Small lies and silences found on an engine author's journeys: each output says what is true.

- ``nnue eval --fens`` of a Stockfish-kind net printed a number for a position in check, where
  the engine prints none;
- ``nnue pack`` of ``.bin``/``.binpack`` took their scores as centipawns without a word;
- ``nnue pack --watch`` on an empty folder waited without a word;
- (``registry show`` of a cycle warm-started by ``init_weights=``: tests/service/test_registry_cli.py;
  ``export-net`` into a missing folder: tests/robust/test_cli_errors.py; the retrain cycle with
  nothing new: tests/service/test_retrain.py).
"""
from __future__ import annotations

import subprocess
import sys

NNUE = [sys.executable, "-m", "nnue.cli"]
IN_CHECK = "rnbqkbnr/ppppp1pp/8/5p1Q/4P3/8/PPPP1PPP/RNB1KBNR b KQkq - 1 2"
QUIET = "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"


def test_eval_prints_none_in_check_for_a_stockfish_kind_net(tmp_path):
    from nnue.inference.kinds.sfnnv5.codec import nnue_bytes
    from nnue.inference.kinds.sfnnv16.codec import nnue_bytes as nnue_bytes19
    from tests.inference.test_sfnnue19 import random_tensors
    from tests.engines.test_sfnnv5 import random_int_net
    from tests.netfiles import make_int_net

    sf = tmp_path / "sf.nnue"
    sf.write_bytes(nnue_bytes(random_int_net(64)))
    ours = tmp_path / "net.safetensors"
    make_int_net("chess768", hidden=16).save(ours)
    fens = tmp_path / "p.fens"
    fens.write_text(f"{QUIET}\n{IN_CHECK}\n")
    r = subprocess.run([*NNUE, "eval", str(sf), "--fens", str(fens)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.split()
    assert first.lstrip("-").isdigit() and second == "none"  # Stockfish: "Final evaluation: none (in check)"
    r = subprocess.run([*NNUE, "eval", str(sf), "--fen", IN_CHECK], capture_output=True, text=True)
    assert r.stdout.strip() == "none", r.stderr
    sf19 = tmp_path / "sf19.nnue"  # Stockfish 19 prints none in check too
    sf19.write_bytes(nnue_bytes19(random_tensors(64)))
    r = subprocess.run([*NNUE, "eval", str(sf19), "--fens", str(fens)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    first, second = r.stdout.split()
    assert first.lstrip("-").isdigit() and second == "none"
    # our own kinds give every position a number (they have no engine that refuses)
    r = subprocess.run([*NNUE, "eval", str(ours), "--fens", str(fens)], capture_output=True, text=True)
    assert r.returncode == 0 and all(x.lstrip("-").isdigit() for x in r.stdout.split()), r.stdout


def test_pack_uses_and_prints_each_formats_score_unit(tmp_path):
    """``.binpack`` scores are Stockfish internal units (FORMATS.md; nnue-pytorch divides by 208):
    they were packed as centipawns without a word. ``--score-unit auto`` (the default) takes each
    format's documented unit and says which; inputs of two units, or one unlike the dataset's,
    are refused in one line; ``--score-unit`` still decides."""
    import json

    from nnue.pipeline import manifest as mf
    from tests.samples import SAMPLE, public

    bp = public("ep1.binpack")
    r = subprocess.run([*NNUE, "pack", str(bp), "-o", str(tmp_path / "a"), "--no-progress"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert "scores in Stockfish internal units" in r.stdout and "the format's unit (binpack)" in r.stdout
    assert mf.load(tmp_path / "a")["score_unit"] == "sf-internal"
    r = subprocess.run([*NNUE, "pack", str(SAMPLE), "-o", str(tmp_path / "b"), "--no-progress", "--json"],
                       capture_output=True, text=True)
    out = json.loads(r.stdout)
    assert out["score_unit"] == "cp" and out["score_unit_from"] == "the format's unit (plain)"
    for args in ([str(SAMPLE), str(bp), "-o", str(tmp_path / "c")], [str(SAMPLE), "-o", str(tmp_path / "a")]):
        r = subprocess.run([*NNUE, "pack", *args, "--no-progress"], capture_output=True, text=True)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--score-unit" in r.stderr, r.stderr
    assert not (tmp_path / "c").exists()
    r = subprocess.run([*NNUE, "pack", str(bp), "-o", str(tmp_path / "d"), "--score-unit", "cp", "--no-progress"],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "scores in UCI centipawns: --score-unit" in r.stdout, r.stdout


def test_watch_on_an_empty_folder_says_what_it_waits_for(tmp_path):
    """``pack --watch`` on an empty folder said "watching" and then nothing: it now says that it
    waits, for which files and when a file counts as complete; a dump being written is said too."""
    import signal

    from tests.service.service_testlib import env

    folder = tmp_path / "w"
    folder.mkdir()
    p = subprocess.Popen([*NNUE, "pack", "--watch", str(folder), "-o", str(tmp_path / "ds"), "--interval", "0.2",
                          "--settle", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        assert " watching " in p.stdout.readline()
        line = p.stdout.readline()
        assert "waiting for new dumps in" in line and ".plain" in line and ".binpack" in line, line
        assert "NAME.done" in line and "unchanged for 60 s" in line
        (folder / "growing.plain").write_text("fen 8/8/8/8/8/8/8/K6k w - - 0 1\n")  # settles in 60 s: still written
        line = p.stdout.readline()
        assert "1 dump(s) still being written" in line, line
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
