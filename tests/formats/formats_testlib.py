"""Test-side helpers for tests/formats: an independent Stockfish ``.bin`` (PackedSfenValue)
encoder driven by python-chess, small-file builders cut from the public samples, and the checks
every pack run must pass (accounting, rejects with locations, no leftovers).

Written from ../shared/FORMATS.md only, never from the readers, so a shared misreading of the
spec cannot make encoder and decoder agree by accident. Imported as ``tests.formats.formats_testlib``."""
from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import chess

from nnue.pipeline import manifest as mf
from nnue.pipeline.parts import read_part

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample" / "sf15-n5000-s1-sample.plain"  # as tests.samples.SAMPLE


def public(name: str) -> Path:
    """tests.samples.public (imported on call: scripts/fuzz_compiled_fixed.py loads this module by its
    path, without the tests package)."""
    from tests.samples import public as _public

    return _public(name)


# ================================================================== Stockfish .bin encoder
# Huffman codes as FORMATS.md writes them; the value is emitted least significant bit first.
_HUFF = {chess.PAWN: 0b0001, chess.KNIGHT: 0b0011, chess.BISHOP: 0b0101, chess.ROOK: 0b0111,
         chess.QUEEN: 0b1001}


class _BitWriter:
    """Bits appended least significant bit first within each byte."""

    def __init__(self):
        self.value = 0
        self.pos = 0

    def write(self, v: int, n: int):
        assert 0 <= v < (1 << n), (v, n)
        self.value |= v << self.pos
        self.pos += n

    def to_bytes(self, size: int) -> bytes:
        assert self.pos <= 8 * size, self.pos
        return self.value.to_bytes(size, "little")


def encode_sfen(board: chess.Board, ep: bool | None = None) -> bytes:
    """The 32-byte packed position of a standard-chess board.

    ep: write the en-passant square; default: only when an en-passant capture is legal (what
    Stockfish stores)."""
    w = _BitWriter()
    w.write(1 if board.turn == chess.BLACK else 0, 1)
    w.write(board.king(chess.WHITE), 6)
    w.write(board.king(chess.BLACK), 6)
    for rank in range(7, -1, -1):
        for file in range(8):
            sq = chess.square(file, rank)
            piece = board.piece_at(sq)
            if piece is not None and piece.piece_type == chess.KING:
                continue
            if piece is None:
                w.write(0, 1)
                continue
            w.write(_HUFF[piece.piece_type], 4)
            w.write(0 if piece.color == chess.WHITE else 1, 1)
    for right in (chess.BB_H1, chess.BB_A1, chess.BB_H8, chess.BB_A8):
        w.write(1 if board.castling_rights & right else 0, 1)
    if ep is None:
        ep = board.has_legal_en_passant()
    if ep and board.ep_square is not None:
        w.write(1, 1)
        w.write(board.ep_square, 6)
    else:
        w.write(0, 1)
    w.write(board.halfmove_clock & 63, 6)
    w.write(board.fullmove_number & 0xFF, 8)
    w.write(board.fullmove_number >> 8 & 0xFF, 8)
    w.write(board.halfmove_clock >> 6 & 1, 1)
    return w.to_bytes(32)


def encode_sfen_move(board: chess.Board, move: chess.Move | None) -> int:
    """PackedSfenValue move: to 0–5, from 6–11, promotion N/B/R/Q 12–13, flag 14–15
    (1 promotion, 2 en passant, 3 castling stored as king takes rook)."""
    if move is None:
        return 0
    to, flag, promo = move.to_square, 0, 0
    if move.promotion:
        flag, promo = 1, move.promotion - chess.KNIGHT
    elif board.is_en_passant(move):
        flag = 2
    elif board.is_castling(move):
        flag = 3
        rank = chess.square_rank(move.from_square)
        to = chess.square(7 if chess.square_file(move.to_square) > chess.square_file(move.from_square) else 0,
                          rank)
    return to | move.from_square << 6 | promo << 12 | flag << 14


def encode_psv(board: chess.Board, move: chess.Move | None, score: int, ply: int, result: int,
               ep: bool | None = None) -> bytes:
    """One 40-byte PackedSfenValue: position, score i16, move u16, ply u16, result i8, pad."""
    return encode_sfen(board, ep) + struct.pack("<hHHbB", score, encode_sfen_move(board, move), ply, result, 0)


def king_takes_rook_uci(board: chess.Board, move: chess.Move) -> str:
    """The UCI text of a castling move as king takes rook (e1h1), other moves as usual."""
    if board.is_castling(move):
        rank = chess.square_rank(move.from_square)
        right = chess.square_file(move.to_square) > chess.square_file(move.from_square)
        return chess.square_name(move.from_square) + chess.square_name(chess.square(7 if right else 0, rank))
    return move.uci()


# ================================================================== .plain sample records
def plain_records(path: Path = SAMPLE) -> list[dict]:
    """The records of a .plain file: fen, move (UCI), score, ply, result (stm POV)."""
    out, cur = [], {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line == "e":
                out.append(dict(fen=cur["fen"], move=cur["move"], score=int(cur["score"]),
                                ply=int(cur["ply"]), result=int(cur["result"])))
                cur = {}
            elif line:
                key, _, value = line.partition(" ")
                cur[key] = value
    return out


# ================================================================== small valid files
def binpack_chain_ends(data: bytes, limit: int) -> list[int]:
    """Offsets, within the first block's payload, where each of the first ``limit`` chains of a
    binpack ends (walked with the library's chain decoder, only to find the boundaries)."""
    from nnue.pipeline.formats.binpack import read_chain

    block = data[8:8 + int.from_bytes(data[4:8], "little")]
    ends, pos = [], 0
    while pos < len(block) and len(ends) < limit:
        _, pos = read_chain(block, pos, 8, 0)
        ends.append(pos)
    return ends


def binpack_slice(data: bytes, n_chains: int) -> bytes:
    """A one-block binpack holding the first ``n_chains`` chains of ``data``'s first block."""
    body = data[8:8 + binpack_chain_ends(data, n_chains)[-1]]
    return b"BINP" + len(body).to_bytes(4, "little") + body


def viri_games(data: bytes) -> list[tuple[int, int]]:
    """(start, end) byte ranges of the games of a viriformat file (header, pairs, 4 zero bytes)."""
    out, pos = [], 0
    while pos < len(data):
        start, pos = pos, pos + 32
        while data[pos:pos + 4] != b"\0\0\0\0":
            pos += 4
            assert pos < len(data), "viriformat game without its terminator"
        pos += 4
        out.append((start, pos))
    return out


# ================================================================== checks on a pack run
LOCATION = re.compile(r"^(byte|line) \d+( ply \d+)?$")


def leftovers(dataset: Path) -> list[str]:
    """Part, rejects and temporary files in a dataset folder (missing folder: none)."""
    if not dataset.exists():
        return []
    return sorted(p.name for p in dataset.iterdir() if p.name != ".manifest.lock"  # the writer lock
                  and (p.name.startswith((".", "part-", "rejects-")) or p.name.endswith(".tmp")))


def check_finished(summary: dict, dataset: Path, path: Path) -> list[dict]:
    """A finished pack: every record read is packed or rejected, in the summary, the manifest,
    the part file and the rejects file; each reject names the input and a byte/line location;
    no temporary file is left. Returns the rejects."""
    assert summary["read"] == summary["packed"] + sum(summary["rejected"].values())
    m = mf.load(dataset)
    (entry,) = [e for e in m["files"].values() if e["path"] == str(path)]
    assert entry["read"] == entry["packed"] + sum(entry["rejected"].values())
    assert read_part(dataset / entry["part"]).num_rows == entry["packed"]
    rejects = [json.loads(line) for line in (dataset / entry["rejects"]).read_text().splitlines()]
    assert len(rejects) == sum(entry["rejected"].values())
    counts: dict[str, int] = {}
    for r in rejects:
        counts[r["reason"]] = counts.get(r["reason"], 0) + 1
        assert r["source"] == str(path)
        assert LOCATION.match(r["location"]), r
    assert counts == entry["rejected"]
    names = sorted(p.name for p in dataset.iterdir() if p.name != ".manifest.lock")
    assert not [n for n in names if n.endswith(".tmp") or n.startswith(".")], names
    return rejects
