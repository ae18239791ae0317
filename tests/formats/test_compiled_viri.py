"""The compiled viriformat decoder (pipeline/compiled/viri.py) against the python-chess reader.

As in test_compiled_fixed.py: each test packs the same bytes with ``ReaderOptions(fast=True)``
(compiled) and ``fast=False`` (python-chess plays every game) and requires identical Parquet
tables, rejects files and summaries, or the same FormatError."""
from __future__ import annotations

import random
import struct

import chess
import numpy as np
import pytest


from nnue.pipeline.board import pack_board
from tests.formats.formats_testlib import plain_records, public, viri_games
from tests.formats.test_compiled_fixed import both as _both


@pytest.fixture(scope="session", autouse=True)
def warm():
    from nnue.pipeline.compiled import viri

    b = viri.buffers(4)
    z = np.zeros(36, np.uint8)
    viri.decode_games(z, 0, 36, True, -1, np.zeros(16, np.uint64), np.full(64, -1, np.int8), np.zeros(4, np.int64),
                      *(b[k] for k in viri.OUT))
    return viri


def both(tmp_path, data: bytes, name: str = "x"):
    from tests.formats.test_compiled_fixed import EXT

    EXT.setdefault("viriformat", "vf")
    return _both(tmp_path, data, "viriformat", name)


def encode_move(board: chess.Board, move: chess.Move) -> int:
    """viriformat move (FORMATS.md): from 0–5, to 6–11, promotion N/B/R/Q 12–13, flag 14–15
    (1 en passant, 2 castling as king takes rook, 3 promotion)."""
    frm, to, flag, promo = move.from_square, move.to_square, 0, 0
    if move.promotion:
        flag, promo = 3, move.promotion - chess.KNIGHT
    elif board.is_castling(move):
        flag = 2
        if not board.chess960:
            to = chess.square(7 if chess.square_file(to) > chess.square_file(frm) else 0, chess.square_rank(frm))
    elif board.is_en_passant(move):
        flag = 1
    return frm | to << 6 | promo << 12 | flag << 14


def encode_games(records: list[dict]) -> bytes:
    """viriformat games from consecutive .plain records (a game ends where the next record is not
    the position its move leads to); evals white POV, header wdl the game's white result."""
    out = bytearray()
    i = 0
    while i < len(records):
        board = chess.Board(records[i]["fen"])
        white_result = records[i]["result"] * (1 if board.turn == chess.WHITE else -1)
        out += pack_board(board, eval_white=0, wdl=white_result + 1)
        while True:
            r = records[i]
            move = board.parse_uci(r["move"])
            ev = r["score"] * (1 if board.turn == chess.WHITE else -1)
            out += struct.pack("<Hh", encode_move(board, move), max(-32767, min(32767, ev)) or 1)
            board.push(move)
            i += 1
            if i == len(records) or chess.Board(records[i]["fen"]).board_fen() != board.board_fen():
                break
        out += b"\0\0\0\0"
    return bytes(out)


@pytest.fixture(scope="module")
def standard():
    return encode_games(plain_records())


def test_public_chess960_games(tmp_path, warm):
    data = public("test-vf.bin").read_bytes()
    assert both(tmp_path, data)["packed"] == 1093
    b = warm.buffers(1 << 12)
    rows, pos, game, status, *_ = warm.decode_games(np.frombuffer(data, np.uint8), 0, len(data), True, -1,
                                                    np.zeros(16, np.uint64), np.full(64, -1, np.int8),
                                                    np.zeros(4, np.int64), *(b[k] for k in warm.OUT))
    assert (rows, pos, game, status) == (1093, len(data), 8, warm.END)  # all settled by the compiled core


def test_standard_games(tmp_path, standard):
    s = both(tmp_path, standard)
    assert s["read"] == 4015 and s["rejected"] == {}


def test_small_chunks(tmp_path, standard, monkeypatch):
    """Games across read-chunk boundaries (the compiled reader carries the unfinished game over)."""
    from nnue.pipeline.formats import viriformat

    monkeypatch.setattr(viriformat, "CHUNK", 1000)
    both(tmp_path, standard[:60_000])


def _games(data):
    return viri_games(data)


@pytest.mark.parametrize("seed", range(8))
def test_mutated_games(tmp_path, standard, seed):
    """Random bytes and bit flips in headers and pairs: bad headers, illegal moves (the rest of a
    game is unusable), castling codes, ep bytes, evals at the int16 edges."""
    rng = random.Random(seed)
    data = public("test-vf.bin").read_bytes() if seed % 2 else standard
    games = _games(data)
    lo = rng.randrange(1, len(games) - 4)
    first = data[:games[0][1]]
    chunk = bytearray(data[games[lo][0]:games[lo + 3][1]])
    for _ in range(rng.randint(1, 6)):
        i = rng.randrange(len(chunk))
        k = rng.randrange(3)
        if k == 0:
            chunk[i] = rng.randrange(256)
        elif k == 1:
            chunk[i] ^= 1 << rng.randrange(8)
        else:
            j = rng.randrange(0, len(chunk) - 4, 4) + 2 if len(chunk) > 8 else 0
            chunk[j:j + 2] = struct.pack("<h", rng.choice([-32768, 32767, 32002, -32002, 31800]))
    both(tmp_path, first + bytes(chunk), f"m{seed}")


def test_truncations(tmp_path):
    data = public("test-vf.bin").read_bytes()
    games = _games(data)
    cuts = sorted({games[0][1] + d for d in (1, 2, 3, 4, 5, 31, 32, 33, 35, 36, 37)} | {len(data) - 1, len(data) - 4})
    for cut in cuts:
        both(tmp_path, data[:cut], f"cut{cut}")


def test_random_bytes(tmp_path, standard):
    rng = random.Random(3)
    first = standard[:_games(standard)[0][1]]
    for n in (4, 36, 100, 4000):
        both(tmp_path, first + rng.randbytes(n), f"r{n}")
    # a game that never ends: pairs without the terminator, many of them
    both(tmp_path, first + standard[:32] + b"\x01\x02\x03\x04" * 5000, "endless")


def test_illegal_and_odd_moves(tmp_path, standard):
    """A king's two-square castling spelling (python-chess's packer takes it, the reader stops the
    game), a move of the wrong side, a promotion flag on a non-promotion, a null move pair."""
    games = _games(standard)
    s, e = games[0]
    g = bytearray(standard[s:e])
    out = bytes(g)
    for pair, bits in ((0, 6 | 4 << 6), (1, 52 | 36 << 6), (2, 12 | 28 << 6 | 3 << 14), (3, 0)):
        h = bytearray(g)
        h[32 + 4 * pair:32 + 4 * pair + 2] = struct.pack("<H", bits)
        out += bytes(h)
    castle = chess.Board("r3k2r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R w KQkq - 0 1")
    hdr = pack_board(castle, wdl=1)
    for to in (chess.G1, chess.H1, chess.C1, chess.A1):
        out += hdr + struct.pack("<Hh", chess.E1 | to << 6 | 2 << 14, 5) + b"\0\0\0\0"
    both(tmp_path, out)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100))
def test_mutated_games_many(tmp_path, standard, seed):
    test_mutated_games(tmp_path, standard, 100 + seed)


def test_counters_beyond_the_packed_range(tmp_path, standard):
    """A header with fullmove 65535 and halfmove 255: later plies pass ply 65535 (rejected as
    'ply out of range' with the true ply) and halfmove 255; the handed-back rows keep the
    unclamped counters, as python-chess's board does."""
    s, e = _games(standard)[0]
    g = bytearray(standard[s:e])
    g[25] = 255
    g[26:28] = struct.pack("<H", 65535)
    out = standard[:e] + bytes(g)
    summary = both(tmp_path, out)
    assert summary["rejected"].get("ply out of range", 0) > 0
