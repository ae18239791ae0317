"""The bulk (NumPy) path of the fixed-record readers writes exactly what the one-by-one
python-chess path writes: same rows, same rejects with the same reasons and locations."""
from __future__ import annotations

import json

import numpy as np
import pytest

from nnue.pipeline import manifest as mf
from nnue.pipeline.convert import convert
from nnue.pipeline.formats import ReaderOptions
from nnue.pipeline.pack import pack
from nnue.pipeline.parts import read_part
from tests.samples import CUT, SAMPLE, public, selfplay


def _both(path, fmt, tmp_path):
    out = {}
    for fast in (True, False):
        ds = tmp_path / f"{fmt}-{fast}"
        s = pack([path], ds, fmt=fmt, options=ReaderOptions(fast=fast), progress=False)
        entry = next(iter(mf.load(ds)["files"].values()))
        rejects = [json.loads(x) for x in (ds / entry["rejects"]).read_text().splitlines()]
        table = read_part(ds / entry["part"]) if entry["packed"] else None
        out[fast] = (s, table, [(r["location"], r["reason"]) for r in rejects])
    return out


def _assert_same(out):
    (sf, tf, rf), (ss, ts, rs) = out[True], out[False]
    assert (sf["read"], sf["packed"], sf["rejected"]) == (ss["read"], ss["packed"], ss["rejected"])
    assert rf == rs
    if tf is not None:
        for c in tf.column_names:
            assert tf[c].equals(ts[c]), c


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """marlinformat and bulletformat files converted from real self-play, Chess960 included."""
    d = tmp_path_factory.mktemp("fast")
    pack([SAMPLE, selfplay("sf15-960-xfen-s2.plain")], d / "ds", progress=False)
    convert(d / "ds", "marlinformat", d / "real.marlin")
    convert(d / "ds", "bulletformat", d / "real.bf")
    return d


@pytest.mark.parametrize("name,fmt", [("real.marlin", "marlinformat"), ("real.bf", "bulletformat")])
def test_bulk_path_equals_python_chess_on_real_data(sources, name, fmt, tmp_path):
    out = _both(sources / name, fmt, tmp_path)
    assert out[True][0]["packed"] == 4015 + 4586
    _assert_same(out)


def test_bulk_path_equals_python_chess_on_public_bulletformat(tmp_path):
    _assert_same(_both(public("batch.bf"), "bulletformat", tmp_path))


def _mutations(base: np.ndarray, seed: int) -> np.ndarray:
    """Boards broken in the ways validation must catch: kings removed or doubled, pawns moved to
    the back rank, pieces added next to kings (checks, both sides), castling codes, ep bytes,
    scores at the limits, wdl/result bytes out of range, random nibbles."""
    rng = np.random.default_rng(seed)
    out = base[rng.integers(0, len(base), 3000)].copy()
    for row in out:
        k = rng.integers(0, 9)
        if k == 0:
            row[8 + rng.integers(0, 16)] = rng.integers(0, 256)  # random nibbles
        elif k == 1:
            row[24] = (row[24] & 0x80) | rng.choice([16, 20, 40, 43, 64, 65, 100])  # ep bytes
        elif k == 2:
            row[28:30] = np.array([rng.choice([-32768, -32767, 32002, -32002, 31990, 32767])], "<i2").view(np.uint8)
        elif k == 3:
            row[30] = rng.integers(0, 6)  # wdl / result byte
        elif k == 4:
            row[24] ^= 0x80  # flip the side to move: many opposite checks
        elif k == 5:
            occ = int.from_bytes(row[:8].tobytes(), "little")
            free = [s for s in range(64) if not occ >> s & 1]
            s = int(rng.choice(free))  # add a piece on an empty square: rewrite via unpack/pack
            from nnue.pipeline.board import pack_position, unpack

            try:
                d = unpack(row.tobytes())
            except ValueError:
                continue
            d["pieces"][s] = int(rng.choice([0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13]))
            if len(d["pieces"]) <= 32:
                try:
                    row[:] = np.frombuffer(pack_position(d["pieces"], d["black_to_move"], d["castling_rooks"],
                                                         d["ep_square"], d["halfmove"], d["fullmove"],
                                                         d["eval_white"], min(d["wdl"], 2)), np.uint8)
                except ValueError:
                    continue
        elif k == 6:
            row[8 + rng.integers(0, 16)] |= 0x66  # castling-rook codes in odd places
        elif k == 7:
            row[26:28] = np.array([rng.choice([0, 1, 40000, 65535])], "<u2").view(np.uint8)  # fullmove
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bulk_path_equals_python_chess_on_broken_marlinformat(sources, seed, tmp_path):
    base = np.fromfile(sources / "real.marlin", dtype=np.uint8).reshape(-1, 32)
    path = tmp_path / "broken.marlin"
    broken = _mutations(base, seed)
    broken[0] = base[0]  # a file whose first record does not decode is a FormatError (issue 15 item 4)
    broken.tofile(path)
    out = _both(path, "marlinformat", tmp_path)
    assert out[True][0]["rejected"] and out[True][0]["packed"]
    _assert_same(out)


@pytest.mark.parametrize("seed", [4, 5])
def test_bulk_path_equals_python_chess_on_broken_bulletformat(sources, seed, tmp_path):
    base = np.fromfile(sources / "real.bf", dtype=np.uint8).reshape(-1, 32)
    broken = _mutations(base, seed)
    broken[:, 29:32] = 0
    broken[0] = base[0]
    broken[0, 29:32] = 0
    path = tmp_path / "broken.bf"
    broken.tofile(path)
    out = _both(path, "bulletformat", tmp_path)
    assert out[True][0]["rejected"] and out[True][0]["packed"]
    _assert_same(out)


# -- bullet text: the fast path (the compiled text core) against python-chess ----------------

def _bullet_text_sources(tmp_path):
    broken = tmp_path / "broken.txt"
    lines = open(selfplay(f"{CUT}.txt")).read().splitlines()[:3000]
    rng = np.random.default_rng(5)
    out = []
    for i, line in enumerate(lines):
        fen, score, result = [p.strip() for p in line.split("|")]
        k = rng.integers(0, 14)
        if k == 0:
            fen = fen.replace("K", "", 1)  # no white king
        elif k == 1:
            fen = "P7/" + fen.split("/", 1)[1]  # a pawn on the 8th rank (the rank's pieces gone)
        elif k == 2:
            score = str(rng.choice([32767, -32767, 32768, 40000, 32002, -31990, 32001]))
        elif k == 3:
            result = rng.choice(["2", "x", "0.7"])
        elif k == 4:
            f = fen.split()
            f[1] = "b" if f[1] == "w" else "w"  # side not to move in check, sometimes
            fen = " ".join(f)
        elif k == 5:
            f = fen.split()
            f[2] = rng.choice(["KQkq", "Kk", "Q", "HAha", "-"])
            fen = " ".join(f)
        elif k == 6:
            out.append("")  # blank lines
        elif k == 7:
            out.append("garbage | 1")
        out.append(f"{fen} | {score} | {result}")
    broken.write_text("\n".join(out) + "\n")
    return [selfplay(f"{CUT}.txt"), selfplay("sf15-960-xfen-s2.txt"), broken]


def test_bullet_text_bulk_path_equals_python_chess(tmp_path):
    for path in _bullet_text_sources(tmp_path):
        out = _both(path, "bullet-text", tmp_path / path.stem)
        _assert_same(out)
        s = out[True][0]
        assert s["read"] == s["packed"] + sum(s["rejected"].values())
        if path.stem == "broken":
            assert len(s["rejected"]) >= 4, s["rejected"]


def test_bullet_text_bulk_path_dedup_locations(tmp_path):
    """With --dedup, a duplicate inside a bulk run is rejected at its own line."""
    lines = open(selfplay(f"{CUT}.txt")).read().splitlines()[:50]
    path = tmp_path / "dup.txt"
    path.write_text("\n".join(lines + [""] + lines[:10]) + "\n")
    out = {}
    for fast in (True, False):
        ds = tmp_path / f"d-{fast}"
        pack([path], ds, fmt="bullet-text", options=ReaderOptions(fast=fast), progress=False, dedup=True)
        entry = next(iter(mf.load(ds)["files"].values()))
        out[fast] = [(r["location"], r["reason"]) for r in map(json.loads, (ds / entry["rejects"]).read_text().splitlines())]
    assert out[True] == out[False] and out[True][0] == ("line 52", "duplicate position")


@pytest.mark.parametrize("name", ["samplefen.epd", "samplefen1000.epd", "sample_ethereal_fen.epd"])
def test_epd_bulk_path_equals_python_chess(name, tmp_path):
    out = _both(public(name), "epd", tmp_path)
    _assert_same(out)
    assert out[True][0]["packed"] > 0


def test_epd_bulk_path_on_broken_lines(tmp_path):
    """EPD lines from the bullet-text mutations (missing kings, back-rank pawns, bad castling…)."""
    lines = open(public("samplefen1000.epd")).read().splitlines()
    rng = np.random.default_rng(9)
    out = []
    for line in lines:
        f = line.split(" ", 4)
        k = rng.integers(0, 8)
        if k == 0:
            f[0] = f[0].replace("K", "", 1)
        elif k == 1:
            f[0] = "P7/" + f[0].split("/", 1)[1]
        elif k == 2:
            f[2] = rng.choice(["KQkq", "Kk", "HAha"])
        elif k == 3:
            f[1] = "b" if f[1] == "w" else "w"
        out.append(" ".join(f))
    path = tmp_path / "broken.epd"
    path.write_text("\n".join(out) + "\n")
    res = _both(path, "epd", tmp_path / "b")
    _assert_same(res)
    assert len(res[True][0]["rejected"]) >= 2


def test_bulk_text_corner_cases_equal_python_chess(tmp_path):
    """Lines a fuzzer found where the bulk path once differed or crashed: whitespace other than one
    space in the FEN (the side to move decides the eval's sign), integers beyond int64, digits that
    str.isdigit takes and int refuses, two kings with castling rights."""
    k = "4k3/8/8/8/8/8/8/4K3"
    bullet = [
        "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR  b KQkq - 0 1 | 35 | 1.0",
        "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR\tb\tKQkq - 0 1 | 35 | 0.0",
        f"{k} w - - 0 1 | -9223372036854775808 | 1.0", f"{k} b - - 0 1 | 9223372036854775808 | 1.0",
        f"{k} w - - 0 1 | -9223372036854775809 | 1.0", f"{k} w - - 0 1 | 1e19 | 0.5",
        f"{k} w - - 99999999999999999999 1 | 0 | 0.5", f"{k} w - - ² 1 | 0 | 0.5",
        f"{k} w - - {'9' * 5000} 1 | 0 | 0.5", f"{k} w - - 0 99999999999999999999 | 0 | 0.5",
        "4k3/8/8/8/3p4/8/4P3/4K3 w - e3 0 99999999999999999999 | 0 | 0.5",
        "rnbqkb1r/p2p1p1p/2p3p1/1p1pP1Q1/3P4/2K5/PPP3PP/RNB1KBNR b KQkq - 1 8 | 10 | 0.5",
        f"{k} w - - 0 1 | 12 | 0.5",
    ]
    epd = [f"{k} w - - ² 1 [0.5]", f'{k} w - - hmvc 99999999999999999999; c9 "1/2-1/2";',
           f'{k} w - - fmvn 99999999999999999999; c9 "1/2-1/2";', f"{k} w - - [0.5] 99999999999999999999",
           f'{k} w - - fmvn ²; c9 "1-0";', f"{k} w - - 0 ² [1.0]", f"{k} w - - [1.0] -9223372036854775808",
           f"{k} w - - [1.0] 17"]
    for name, fmt, lines in (("corner.txt", "bullet-text", bullet), ("corner.epd", "epd", epd)):
        path = tmp_path / name
        path.write_text("\n".join(lines) + "\n")
        out = _both(path, fmt, tmp_path / fmt)
        _assert_same(out)
        assert out[True][0]["packed"] >= 1 and out[True][0]["rejected"]


# -- .plain: boards and moves on the fast path (the compiled text core) ----------------------

def _plain_mutations(src, tmp_path, seed: int):
    """.plain records with broken moves (illegal, other pieces', promotions, castling spellings,
    null), broken boards and counters."""
    text = open(src).read().split("\ne\n")
    rng = np.random.default_rng(seed)
    out = []
    for block in text[:4000]:
        lines = block.strip().splitlines()
        if len(lines) < 5:
            continue
        k = rng.integers(0, 12)
        if k == 0:
            lines[1] = "move " + rng.choice(["e2e4", "e7e5", "a1a8", "g1f3", "e1g1", "e8c8", "e1h1", "0000", "h7h8q",
                                             "b7b8n", "a2a1r", "zz", "e2e4q"])
        elif k == 1:
            lines[0] = lines[0].replace("K", "", 1)
        elif k == 2:
            f = lines[0].split()
            f[2] = rng.choice(["KQkq", "-", "Kq", "HAha"])
            lines[0] = " ".join(f)
        elif k == 3:
            lines[2] = "score " + str(rng.choice([32767, 32768, -40000, 32002]))
        out.append("\n".join(lines))
    path = tmp_path / f"mut{seed}.plain"
    path.write_text("\ne\n".join(out) + "\ne\n")
    return path


def test_plain_bulk_path_equals_python_chess(tmp_path):
    paths = [SAMPLE, selfplay("sf15-960-xfen-s2.plain"), _plain_mutations(SAMPLE, tmp_path, 3)]
    for path in paths:
        out = _both(path, "plain", tmp_path / path.stem)
        _assert_same(out)
        s = out[True][0]
        assert s["read"] == s["packed"] + sum(s["rejected"].values())
    assert len(out[True][0]["rejected"]) >= 3  # the mutated file
