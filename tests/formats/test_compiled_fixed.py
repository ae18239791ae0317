"""The compiled decoders of the fixed-size binary formats (pipeline/compiled/fixed.py: Stockfish
.bin, bulletformat, marlinformat) against the python-chess reference readers.

Every test packs the same bytes twice — ``ReaderOptions(fast=True)`` (compiled) and
``fast=False`` (one record at a time, python-chess validates) — and requires identical Parquet
tables (every column, every row, in order), identical rejects (location, reason, detail, raw)
and identical summaries, or the same FormatError from both."""
from __future__ import annotations

import random

import chess
import numpy as np
import pytest

from nnue.pipeline.formats import FormatError, ReaderOptions
from nnue.pipeline.pack import pack
from nnue.pipeline.parts import read_part
from tests.formats.formats_testlib import encode_psv, plain_records, public
from tests.samples import SAMPLE, selfplay

EXT = {"bin": "bin", "bulletformat": "bf", "marlinformat": "marlin"}
SIZE = {"bin": 40, "bulletformat": 32, "marlinformat": 32}


@pytest.fixture(scope="session", autouse=True)
def warm():
    """Compile (or load from numba's cache) the three kernels once per session."""
    from nnue.pipeline.compiled import fixed

    for kernel, size in ((fixed.decode_sfbin, 40), (fixed.decode_marlin, 32)):
        b = fixed.buffers(1)
        kernel(np.zeros((1, size), np.uint8), np.array([-1, 0, 0, 0], np.int64), *(b[k] for k in fixed.OUT),
               b["game"])
    b = fixed.buffers(1)
    fixed.decode_bullet(np.zeros((1, 32), np.uint8), *(b[k] for k in fixed.OUT))
    return fixed


def both(tmp_path, data: bytes, fmt: str, name: str = "x"):
    """Pack ``data`` with the compiled and the reference path; assert identical outputs.
    Returns the summary (None when both refuse the file alike)."""
    path = tmp_path / f"{name}.{EXT[fmt]}"
    path.write_bytes(data)
    out, errors = [], []
    for fast in (True, False):
        ds = tmp_path / f"{name}-{fast}"
        try:
            s = pack([path], ds, fmt=fmt, options=ReaderOptions(fast=fast), progress=False)
        except FormatError as e:
            errors.append(str(e))
            continue
        (part,) = ds.glob("part-*.parquet")
        (rej,) = ds.glob("rejects-*.jsonl")
        out.append((s["read"], s["packed"], s["rejected"], read_part(part), rej.read_text()))
    if errors:
        assert len(errors) == 2 and errors[0] == errors[1], errors
        return None
    (ra, pa_, ja, ta, xa), (rb, pb, jb, tb, xb) = out
    assert (ra, pa_, ja) == (rb, pb, jb)
    assert ta.equals(tb), _first_difference(ta, tb)
    assert xa == xb
    return {"read": ra, "packed": pa_, "rejected": ja}


def _first_difference(ta, tb) -> str:
    for name in ta.column_names:
        a, b = ta.column(name).to_pylist(), tb.column(name).to_pylist()
        if a != b:
            i = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            return f"column {name} row {i}: {a[i:i + 1]} vs {b[i:i + 1]} (rows {len(a)} / {len(b)})"
    return "no column differs"


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """Real records in each format: the bundled sample as .bin (test-side encoder), and the sample
    plus the Chess960 self-play converted to marlinformat and bulletformat."""
    from nnue.pipeline.convert import convert

    d = tmp_path_factory.mktemp("fixed")
    recs = plain_records()
    boards = [chess.Board(r["fen"]) for r in recs]
    moves = [b.parse_uci(r["move"]) for b, r in zip(boards, recs)]
    out = {"bin": b"".join(encode_psv(b, m, r["score"], r["ply"], r["result"])
                           for b, m, r in zip(boards, moves, recs))}
    pack([SAMPLE, selfplay("sf15-960-xfen-s2.plain")], d / "ds", progress=False)
    for fmt in ("marlinformat", "bulletformat"):
        convert(d / "ds", fmt, d / f"real.{EXT[fmt]}")
        out[fmt] = (d / f"real.{EXT[fmt]}").read_bytes()
    return out


@pytest.mark.parametrize("fmt", ["bin", "marlinformat", "bulletformat"])
def test_real_records(tmp_path, sources, fmt):
    s = both(tmp_path, sources[fmt], fmt)
    assert s["packed"] == (4015 if fmt == "bin" else 4015 + 4586) and s["rejected"] == {}


def test_public_bulletformat(tmp_path):
    s = both(tmp_path, public("batch.bf").read_bytes(), "bulletformat")
    assert s["read"] == 16_273


def test_real_records_are_settled_by_the_compiled_core(sources, warm):
    """Most real records never reach python-chess (the speed of the compiled path)."""
    for fmt, kernel in (("bin", warm.decode_sfbin), ("marlinformat", warm.decode_marlin)):
        recs = np.frombuffer(sources[fmt], np.uint8).reshape(-1, SIZE[fmt]).copy()
        b = warm.buffers(len(recs))
        kernel(recs, np.array([-1, 0, 0, 0], np.int64), *(b[k] for k in warm.OUT), b["game"])
        assert b["kind"].mean() < 0.01, (fmt, int(b["kind"].sum()))


def _mutate(data: bytes, size: int, seed: int, per: int = 8) -> bytes:
    """About one in ``per`` records changed: a random byte, a flipped bit, or a field set to an
    edge value (ep byte, score, result, side to move)."""
    rng = random.Random(seed)
    d = bytearray(data)
    n = len(d) // size
    for r in rng.sample(range(n), max(1, n // per)):
        base = r * size
        k = rng.randrange(4)
        if k == 0:
            d[base + rng.randrange(size)] = rng.randrange(256)
        elif k == 1:
            i = base + rng.randrange(size)
            d[i] ^= 1 << rng.randrange(8)
        elif k == 2:  # the tail fields (score, move, result, ep/stm bytes)
            i = base + rng.randrange(24, size)
            d[i] = rng.choice([0, 1, 2, 3, 0x40, 0x7F, 0x80, 0xC0, 0xFF])
        else:  # a board bit in the first 24 bytes
            i = base + rng.randrange(24)
            d[i] ^= 1 << rng.randrange(8)
    return bytes(d)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("fmt", ["bin", "marlinformat", "bulletformat"])
def test_mutated_records(tmp_path, sources, fmt, seed):
    size = SIZE[fmt]
    rng = random.Random(seed)
    k = rng.randrange(0, len(sources[fmt]) // size - 600)
    # an intact first record, so that the file reads as the format and is not refused whole
    data = sources[fmt][:size] + _mutate(sources[fmt][k * size:(k + 600) * size], size, seed, per=3)
    s = both(tmp_path, data, fmt, f"m{seed}")
    assert s is not None and s["rejected"], "mutations must produce rejects"


@pytest.mark.parametrize("fmt", ["bin", "marlinformat", "bulletformat"])
def test_random_bytes_and_truncations(tmp_path, sources, fmt):
    size = SIZE[fmt]
    rng = random.Random(7)
    both(tmp_path, rng.randbytes(size * 200), fmt, "random")
    both(tmp_path, sources[fmt][:size] + rng.randbytes(size * 200), fmt, "random-after-one")
    for cut in (1, size - 1, size + 1, 5 * size - 3):
        both(tmp_path, sources[fmt][:5 * size][:cut] if cut < 5 * size else sources[fmt][:cut], fmt, f"cut{cut}")


def test_sfbin_edge_cases(tmp_path):
    """Castling rights written for rooks that are not there, en-passant squares with and without a
    capture (and with no pawn behind them), VALUE_NONE, mate and int16-edge scores, results out of
    range, illegal and castling moves in both spellings, in-check and double-check positions."""
    import struct

    def rec(fen, move=None, score=10, ply=20, result=0, ep=None):
        b = chess.Board(fen)
        m = b.parse_uci(move) if move else None
        return encode_psv(b, m, score, ply, result, ep=ep), b

    cases = [
        rec("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", "e1g1"),
        rec("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", "e1c1"),
        rec("r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1", "e8c8", ply=21),
        rec("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", "a1a8", score=32002),
        rec("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2", "e5d6", ply=2),
        rec("4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2", "e1e2", ply=2, ep=True),
        rec("4k3/8/8/3pP3/8/8/8/4K3 w - - 0 2", "e1e2", ply=2, ep=False),
        rec("4k3/8/8/8/8/8/8/4K3 w - - 0 1", None, score=-32768),
        rec("4k3/8/8/8/8/8/8/4K3 w - - 0 1", None, score=31990),
        rec("4k3/8/8/8/8/8/8/4K3 w - - 0 1", None, result=2),
        rec("4k3/8/8/8/8/8/8/3qK3 w - - 0 1", "e1d1"),
        rec("4k3/8/8/8/8/5n2/8/4K2r w - - 0 1", "e1e2"),  # double check
        rec("4k3/3P4/8/8/8/8/8/4K3 w - - 0 1", "d7d8q"),
        rec("4k3/3P4/8/8/8/8/8/4K3 w - - 0 1", "d7d8n"),
        rec("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1", "e2e4", ply=0),
    ]
    data = b"".join(c[0] for c in cases)
    # castling flags python-chess reads otherwise: no rook there, king off e1, rooks not in corners
    for fen, rights in (("4k3/8/8/8/8/8/8/4K3 w - - 0 1", chess.BB_CORNERS),
                        ("4k3/8/8/8/8/8/8/R2K3R w - - 0 1", chess.BB_A1 | chess.BB_H1),
                        ("r3k2r/8/8/8/8/8/8/R3K2R w - - 0 1", chess.BB_H1 | chess.BB_H8),
                        ("4k3/8/8/8/8/8/8/1R2K1R1 w - - 0 1", chess.BB_A1 | chess.BB_H1)):
        b = chess.Board(fen)
        b.castling_rights = rights
        data += encode_psv(b, None, 0, 0, 0)
    illegal = bytearray(cases[0][0])
    illegal[34:36] = struct.pack("<H", 0 | 0 << 6 | 1 << 14)  # a1a1 with a promotion flag
    data += bytes(illegal)
    king_two = bytearray(cases[0][0])
    king_two[34:36] = struct.pack("<H", 6 | 4 << 6)  # e1g1 spelled as the king's two-square step
    data += bytes(king_two)
    s = both(tmp_path, data, "bin")
    assert s["packed"] >= 10 and s["rejected"]


def test_sfbin_en_passant_without_a_pawn_behind(tmp_path):
    """A written en-passant square with a capturer but no enemy pawn behind it is python-chess's
    to settle (its en-passant rules differ there); either way the outputs agree."""
    b = chess.Board("4k3/8/8/4P3/8/8/8/4K3 w - - 0 2")
    b.ep_square = chess.D6
    data = encode_psv(chess.Board("4k3/8/8/8/8/8/8/4K3 w - - 0 1"), None, 0, 0, 0) + encode_psv(b, None, 0, 2, 0,
                                                                                                 ep=True)
    both(tmp_path, data, "bin")


@pytest.mark.parametrize("fen", [
    "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1",
    "r3k2r/8/8/8/8/8/8/R3K2R b Kq - 5 9",
    "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2",
    "4k3/8/8/8/3Pp3/8/8/4K3 b - d3 0 2",
    "r3k1r1/8/8/8/8/8/8/R3K1R1 w Gg - 0 1",   # rights of rooks off the corners
    "4k3/8/8/8/8/8/8/R1R1K3 w C - 0 1",       # a right whose rook is not outermost
    "4k3/8/8/8/8/8/8/RR2K3 w AB - 0 1",       # two rights on one side: not rights python-chess keeps
    "rk5r/8/8/8/8/8/8/RK5R w HAha - 0 1",     # Chess960 rights
    "4k3/8/8/8/8/8/8/3qK3 w - - 0 1",
    "4k3/8/8/8/8/5n2/8/4K2r w - - 0 1",       # a possible double check
    "4k3/8/3N1N2/8/8/8/8/4K3 b - - 0 1",      # two knights: no last move gives it
    "4k3/3P4/5N2/8/8/8/8/4K3 b - - 0 1",      # a pawn and a knight: impossible too
    "8/8/8/3pP3/8/8/8/4k3 w - d6 0 2",        # no white king, an en-passant capture to test
    "4K3/8/8/8/3Pp3/8/8/8 b - d3 0 2",        # no black king, likewise
])
def test_marlinformat_edge_cases(tmp_path, fen):
    from nnue.pipeline.board import pack_fen

    data = b"".join(pack_fen(fen, eval_white=e, wdl=w) for e, w in ((10, 1), (32002, 2), (-32768, 0), (31800, 1)))
    both(tmp_path, pack_fen("4k3/8/8/8/8/8/8/4K3 w - - 0 1") + data, "marlinformat")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("fmt", ["bin", "marlinformat", "bulletformat"])
def test_mutated_records_many(tmp_path, sources, fmt, seed):
    test_mutated_records(tmp_path, sources, fmt, 100 + seed)


def test_double_check_rule_equals_retro(warm):
    """The compiled retrograde double-check rule (fixed.double_check_possible) gives
    pipeline/retro.py's answer on random positions with two checkers (either side to move, kings
    on back ranks included, possible and impossible ones)."""
    from nnue.pipeline.board import pack_board
    from nnue.pipeline.retro import double_check_possible

    rng = random.Random(11)
    bb, pc = np.zeros(16, np.uint64), np.full(64, -1, np.int8)
    seen = {True: 0, False: 0}
    tried = 0
    while min(seen.values()) < 150 and tried < 400_000:
        tried += 1
        b = chess.Board(None)
        for color in (chess.WHITE, chess.BLACK):
            while True:
                sq = rng.randrange(64) if rng.random() < 0.7 else rng.choice([0, 2, 4, 6, 56, 58, 60, 62])
                if b.piece_at(sq) is None:
                    b.set_piece_at(sq, chess.Piece(chess.KING, color))
                    break
        for _ in range(rng.randint(2, 7)):
            sq = rng.randrange(64)
            pt = rng.choice([chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN])
            if b.piece_at(sq) is None and not (pt == chess.PAWN and chess.square_rank(sq) in (0, 7)):
                b.set_piece_at(sq, chess.Piece(pt, rng.random() < 0.5))
        b.turn = rng.random() < 0.5
        if b.status() != chess.STATUS_VALID or chess.popcount(b.checkers_mask()) != 2:
            continue
        rec = np.frombuffer(pack_board(b), np.uint8).reshape(1, 32).copy()
        assert warm._marlin(rec, 0, bb, pc)
        want = double_check_possible(b)
        assert warm.double_check_possible(bb, pc, 0 if b.turn == chess.WHITE else 1) == want, b.fen()
        seen[want] += 1
    assert min(seen.values()) >= 150, seen


@pytest.mark.slow
def test_kernels_bounds_checked(tmp_path):
    """The fuzz script in a fresh process with numba's bounds checking on (every array index
    checked; recompiles everything, minutes): mutated records of every format, no IndexError."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    public("test-vf.bin")  # the fuzzer's viriformat records come from this third-party sample
    script = Path(__file__).resolve().parents[2] / "scripts" / "fuzz_compiled_fixed.py"
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    r = subprocess.run([sys.executable, str(script), "--records", "30000", "--exact", "2000", "--out-dir",
                        str(tmp_path)], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    for fmt in ("bin", "bulletformat", "marlinformat", "viriformat"):
        report = json.loads((tmp_path / f"fuzz_{fmt}.json").read_text())
        assert report["numba_boundscheck"] and report["records"] >= 30000, report
