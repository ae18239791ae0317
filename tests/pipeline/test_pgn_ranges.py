"""PGN in byte ranges: the compiled walk that finds where ``chess.pgn.read_game`` starts each game
(:func:`nnue.pipeline.compiled.ranges.pgn_game_starts`) against python-chess itself, and PGN files
packed in ranges against the same files packed whole (rows, game ids, rejects and their
"line L game G" locations; 1 and 2 workers byte for byte)."""
from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from nnue.pipeline import manifest as mf
from nnue.pipeline.compiled.ranges import _blank
from nnue.pipeline.formats import ReaderOptions
from nnue.pipeline.pack import pack
from nnue.pipeline.ranges import plan

from tests.pipeline import test_ranges as tr  # check_identity, mb_for, rows
from tests.samples import CUT, REPO, public, selfplay


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


fz = _load("fuzz_compiled_pgn", REPO / "scripts" / "fuzz_compiled_pgn.py")  # the PGN fuzzer's mutations
fw = _load("fuzz_pgn_walk", REPO / "scripts" / "fuzz_pgn_walk.py")  # the walk's oracle and generators
read_game_starts, walk, agree = fw.read_game_starts, fw.walk, lambda data: fw.agree(data)[0]


def test_blank_is_python_str_isspace():
    """Every BMP code point and the astral ones around the space separators, as UTF-8, with and
    without a line end, and bytes that do not decode (U+FFFD, not space)."""
    def blank(raw: bytes) -> bool:
        return _blank(np.frombuffer(raw, np.uint8), 0, len(raw)) >= 0

    cps = [c for c in range(0x10000) if not 0xD800 <= c < 0xE000] + list(range(0x10000, 0x10100)) + [0x10FFFF]
    for c in cps:
        if c in (10, 13):
            continue  # line ends, never inside a line
        raw = chr(c).encode() * 2
        assert blank(raw + b"\n") == blank(raw + b"\r") == blank(raw) == chr(c).isspace(), hex(c)
    from nnue.pipeline.formats import LATIN1_ERRORS

    for raw in (b"\xc2", b"\xe2\x80", b"\xed\xa0\x80", b"\xc0\xa0", b"\xe0\x80\xa0", b"\xe2\x80\x20", b" \xff", b"\xe2",
                b"\xa0", b" \x85\t", b"\xa0\xa0", b"\xc2\xa0\xa0", b"\xe2\x80\xa0", b"\xe2\xa0", b"\xf0\xa0", b"\xe9"):
        # a PGN's bytes that are not UTF-8 are Latin-1 (issue 20): 0x85 and 0xA0 alone are space
        assert blank(raw + b"\n") == blank(raw) == raw.decode("utf-8", LATIN1_ERRORS).isspace(), raw
    assert blank(b"\n") and blank(b"\r\n") and blank(b" \t\x0c\n") and not blank(b" x\n")
    t = _blank(np.frombuffer(b" \xc2\xa0[x\n", np.uint8), 0, 7)
    assert t == -1 - 3  # not blank: its first byte that is not space


def test_walk_is_read_game_on_the_third_party_sample():
    data = public("sample_with_annotations.pgn").read_bytes()
    starts, raised = read_game_starts(data)
    assert raised is None and len(starts) > 1
    assert walk(data)[0] == starts


def test_walk_is_read_game_on_the_samples():
    for p in [selfplay("sf15-960-xfen-s2.pgn"), selfplay(f"{CUT}.pgn")]:
        data = p.read_bytes()
        starts, raised = read_game_starts(data)
        assert raised is None and len(starts) > 1
        assert walk(data)[0] == starts


@pytest.mark.parametrize("cases", [4000, pytest.param(40000, marks=pytest.mark.slow)])
def test_walk_is_read_game_on_structural_noise(cases):
    """Lines of PGN's structure (scripts/fuzz_pgn_walk.py: noise)."""
    rng = random.Random(cases)
    raised = 0
    for _ in range(cases):
        data = fw.noise(rng)
        ok, r = fw.agree(data)
        assert ok, data
        raised += r
    assert raised > cases // 20  # the raising case is exercised


@pytest.mark.parametrize("files", [150, pytest.param(3000, marks=pytest.mark.slow)])
def test_walk_is_read_game_on_mutated_games(files):
    """The PGN fuzzer's edits on self-play games, several games a file (fuzz_pgn_walk.mutated)."""
    games = fz._games(selfplay("sf15-960-xfen-s2.pgn"))
    rng = random.Random(files)
    for _ in range(files):
        data = fw.mutated(rng, games, fz, rng.randint(1, 8))
        assert agree(data), data[:2000]


# ------------------------------------------------------------------------ packs in ranges
@pytest.mark.parametrize("fast", [True, False])
def test_pgn_samples_in_ranges(tmp_path, fast):
    ins = [selfplay("sf15-960-xfen-s2.pgn"), selfplay(f"{CUT}.pgn")]
    rs = plan(ins[1], "pgn", ins[1].stat().st_size // 7)
    assert len(rs) == 7 and rs[0].game == 0 and all(a.game < b.game for a, b in zip(rs, rs[1:]))
    tr.check_identity(tmp_path, ins, tr.mb_for(ins[0], 6), min_ranges=6, options=ReaderOptions(fast=fast))


def _junk_pgn(dst: Path, seed: int, games: int = 400, extra: bytes = b"") -> None:
    """Self-play games, one in three with the fuzzer's edits, after an intact first game."""
    src = fz._games(selfplay(f"{CUT}.pgn"))
    rng = random.Random(seed)
    out = [src[0][0].encode()]
    for i in range(games):
        g = rng.choice(src)[0]
        if rng.random() < 0.05:
            g = fz._rewrite(g, rng)
        b = bytearray(g.encode())
        if rng.random() < 0.33:
            fz._mutate(b, rng, rng.randint(1, 6), 100_000)
        out.append(bytes(b))
    dst.write_bytes(b"".join(out) + extra)


@pytest.mark.parametrize("seed,fast", [(1, True), pytest.param(2, False, marks=pytest.mark.slow),
                                       pytest.param(3, True, marks=pytest.mark.slow)])
def test_mutated_pgn_in_ranges(tmp_path, seed, fast):
    """Rejects of every kind (bad evals, PGN errors, bad FENs, games handed to python-chess) fall on
    both sides of the boundaries: the ranged pack is the whole one, locations included."""
    p = tmp_path / "junk.pgn"
    _junk_pgn(p, seed)
    data = p.read_bytes()
    starts, raised = read_game_starts(data)
    if raised is not None:  # a game that makes read_game raise: keep the file splittable
        p.write_bytes(data[:raised])
    m = tr.check_identity(tmp_path / "ds", [p], tr.mb_for(p, 12), min_ranges=10, options=ReaderOptions(fast=fast))
    e = next(iter(m["files"].values()))
    # 400 games drawn from the cut's 112: an intact repeat has its original's content-derived game id
    assert sum(e["rejected"].values()) > 20 and len(set(tr.rows(tmp_path / "ds" / "one").column("game_id").to_pylist())) > 100


@pytest.mark.parametrize("movetext", [b"1. e4 Qxh8 ) e5 2. Nf3 *", b"1. e4 $" + b"1" * 5000 + b" e5 *",
                                      b"e4(e4(1.d4)e5(1.d4)())((1."])
def test_a_game_that_makes_read_game_raise(tmp_path, movetext):
    """Before the last range's start: python-chess goes on mid-game and numbers the games after it
    differently from the walk, so the file is one range. In the last range only: it is split.
    (IndexError: ")" after a move that does not parse; ValueError: a NAG too long for int();
    AssertionError: variations around a move that does not parse, found by scripts/fuzz_pgn_walk.py,
    which made ``nnue pack`` stop with "internal error" before it was a reject.)"""
    base = selfplay(f"{CUT}.pgn").read_bytes()
    bad = b'[Event "bad"]\n\n' + movetext + b'\n\n'
    early, late = tmp_path / "early.pgn", tmp_path / "late.pgn"
    cut = base.index(b"\n\n[Event ", len(base) // 10) + 2
    early.write_bytes(base[:cut] + bad + base[cut:])
    late.write_bytes(base + bad)
    rb = len(base) // 6
    assert read_game_starts(early.read_bytes())[1] == cut
    assert len(plan(early, "pgn", rb)) == 1
    rs = plan(late, "pgn", rb)
    assert len(rs) >= 6 and rs[-1].start <= len(base)  # the raising game is in the last range
    whole = tmp_path / "w"
    pack([early], whole, progress=False)
    ranged = tmp_path / "r"
    pack([early], ranged, progress=False, range_mb=rb / (1 << 20), workers=2)
    assert tr.rows(whole).equals(tr.rows(ranged)) and tr.rejects(whole) == tr.rejects(ranged)
    assert any(r["reason"] == "unreadable PGN game" for r in tr.rejects(whole))
    (entry,) = mf.load(ranged)["files"].values()
    assert f"on the game at byte {cut}" in entry["one_range_because"] and "read_game raises" in entry["one_range_because"]
    tr.check_identity(tmp_path / "late", [late], rb / (1 << 20), min_ranges=6)
    assert all("one_range_because" not in e for e in mf.load(tmp_path / "late" / "one")["files"].values())


def test_a_file_kept_whole_says_why(tmp_path, monkeypatch):
    """One warning line names the file and the reason (also in --json and the manifest), and a
    file with more suspect games than are checked is one range too."""
    import subprocess

    from nnue.pipeline.formats import pgn as pgn_format  # its range finder (SPEC.find_ranges)

    base = selfplay("sf15-960-xfen-s2.pgn").read_bytes()
    var = b'[Event "v"]\n[Result "1-0"]\n\n1. e4 (1. d4 d5) e5 2. Nf3 1-0\n\n'
    p = tmp_path / "v.pgn"
    p.write_bytes(var * 5 + base)
    rb = len(base) // 4
    assert len(plan(p, "pgn", rb)) >= 4  # five games with a variation, all read fine: split
    monkeypatch.setattr(pgn_format, "PGN_CHECK_GAMES", 4)
    (one,) = plan(p, "pgn", rb)
    assert "5 games with a ')'" in one.note and one.count >= 4
    bad = tmp_path / "bad.pgn"
    cut = base.index(b"\n\n[Event ", 1000) + 2  # a game start early in the file
    bad.write_bytes(base[:cut] + b'[Event "x"]\n\n1. e4 Qxh8 ) e5 *\n\n' + base[cut:])
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "pack", str(bad), "-o", str(tmp_path / "ds"), "--json",
                        "--no-progress", "--range-mb", str(rb / (1 << 20)), "--workers", "2", "--pgn-pov", "white"],
                       capture_output=True, text=True)  # our self-play PGNs are white POV (no POV warning)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nnue pack: warning: {bad} is packed as one byte range")
    assert "raises IndexError" in lines[0]
    (f,) = json.loads(r.stdout)["files"]
    assert f["parts"] == 1 and "raises IndexError" in f["one_range_because"]


def test_a_later_range_never_fails_as_not_pgn(tmp_path):
    """Only the file's first game is checked for "not PGN at all": a game of junk with no tags at
    the start of a later range is a reject there, as in the whole file."""
    base = selfplay("sf15-960-xfen-s2.pgn").read_bytes()
    cut = base.index(b"\n\n[Event ", len(base) // 2) + 2
    p = tmp_path / "j.pgn"
    p.write_bytes(base[:cut] + b"not a game: Qxh8 e4\n\n" + base[cut:])
    rb = cut - 10
    rs = plan(p, "pgn", rb)
    assert [r.start for r in rs] == [0, cut]
    m = tr.check_identity(tmp_path / "ds", [p], rb / (1 << 20), min_ranges=2)
    assert "PGN error, rest of game dropped" in next(iter(m["files"].values()))["rejected"]


def test_pgn_ranges_on_the_command_line(tmp_path):
    """``nnue pack --workers 2 --range-mb`` on one PGN file: several parts, the whole file's rows."""
    import subprocess

    from nnue.pipeline.ranges import range_bytes

    p = selfplay(f"{CUT}.pgn")
    out = tmp_path / "ds"
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "pack", str(p), "-o", str(out), "--workers", "2",
                        "--range-mb", "0.1", "--json", "--no-progress"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    e = next(iter(mf.load(out)["files"].values()))
    assert len(e["parts"]) == -(-p.stat().st_size // range_bytes(0.1)) >= 3
    whole = tmp_path / "w"
    pack([p], whole, progress=False)
    assert tr.rows(whole).equals(tr.rows(out))
