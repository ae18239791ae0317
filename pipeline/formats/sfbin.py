"""Stockfish ``.bin`` reader: 40-byte ``PackedSfenValue`` records.

Bytes 0–31 are a bit stream read least significant bit first (FORMATS.md): side to move (1 bit);
white king, black king squares (6 bits each); every other square from rank 8 down to rank 1,
files a to h, kings skipped: 0 for empty, else a Huffman code (P 0001, N 0011, B 0101, R 0111,
Q 1001, read LSB first) and a colour bit (1 = black); castling K Q k q (4 bits); en-passant flag
and 6-bit square; rule50 low 6 bits; fullmove low byte, high byte; rule50 bit 6. Then score i16,
move u16, game ply u16, result i8 (all side-to-move POV), one padding byte. The move packs to
(0–5), from (6–11), promotion N/B/R/Q (12–13) and a flag (14–15: 1 promotion, 2 en passant,
3 castling as king takes rook). No Chess960.
"""
from __future__ import annotations

import struct
from typing import Iterator

from ..board import placement_fen
from ..records import MATE_BOUND, VALUE_NONE, FormatSpec, PackedRows, ReaderOptions, Record, Reject
from ._binary import BitReaderLSB, compiled_fixed, read_game_blocks_compiled, read_game_records
from ._boundaries import fixed_game_finder

SIZE = 40
_TAIL = struct.Struct("<hHHbB")
# (code value read LSB first, length) -> FEN letter (upper case; colour bit decides the case)
_HUFFMAN = {(0b0001, 4): "P", (0b0011, 4): "N", (0b0101, 4): "B", (0b0111, 4): "R", (0b1001, 4): "Q"}
_FILES = "abcdefgh"


def _square(sq: int) -> str:
    return _FILES[sq & 7] + str((sq >> 3) + 1)


def decode_position(data: bytes) -> tuple[str, int]:
    """32 packed bytes -> (FEN, number of bits used). Raises ValueError on a malformed stream."""
    r = BitReaderLSB(data)
    black = r.read(1)
    board: dict[int, str] = {r.read(6): "K"}
    bk = r.read(6)
    if bk in board:
        raise ValueError("both kings on one square")
    board[bk] = "k"
    for rank in range(7, -1, -1):
        for file in range(8):
            sq = 8 * rank + file
            if sq in board:
                continue
            code = length = 0
            while True:
                code |= r.read(1) << length
                length += 1
                if code == 0 and length == 1:
                    break  # empty square
                letter = _HUFFMAN.get((code, length))
                if letter is not None:
                    board[sq] = letter.lower() if r.read(1) else letter
                    break
                if length >= 4:
                    raise ValueError(f"bad piece code {code:04b} at {_square(sq)}")
            if len(board) > 32:
                raise ValueError("more than 32 pieces")
    castling = "".join(ch for ch, bit in zip("KQkq", [r.read(1) for _ in range(4)]) if bit) or "-"
    ep = _square(r.read(6)) if r.read(1) else "-"
    rule50 = r.read(6)
    fullmove = r.read(8) | r.read(8) << 8
    rule50 |= r.read(1) << 6
    return (f"{placement_fen(board)} {'b' if black else 'w'} {castling} {ep} {rule50} {max(fullmove, 1)}",
            r.pos)


def decode_move(m: int) -> str | None:
    """PackedSfenValue move -> UCI (castling as king to rook, which python-chess accepts)."""
    if m == 0:
        return None
    to, frm, promo, flag = m & 63, (m >> 6) & 63, (m >> 12) & 3, m >> 14
    return _square(frm) + _square(to) + ("nbrq"[promo] if flag == 1 else "")


def decode_record(offset: int, rec: bytes, game: int | None) -> Record | Reject:
    """One 40-byte record at byte ``offset`` -> Record (with game ordinal ``game``) or Reject."""
    loc = f"byte {offset}"
    try:
        fen, _ = decode_position(rec[:32])
    except ValueError as e:
        return Reject(loc, "malformed record", str(e), rec.hex())
    score, move, ply, result, _pad = _TAIL.unpack(rec[32:])
    if result not in (-1, 0, 1):
        return Reject(loc, "result out of range", f"result {result}", rec.hex())
    none = score == VALUE_NONE
    return Record(fen=fen, score=None if none else score, result=result, ply=ply,
                  move=decode_move(move), location=loc, game=game,
                  score_is_mate=not none and abs(score) >= MATE_BOUND)


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject | PackedRows]:
    """Records in file order. With ``options.fast`` (the default) the compiled core
    (:mod:`nnue.pipeline.compiled.fixed`) decodes and validates blocks of records and yields
    runs of them as PackedRows; the records it does not settle come from :func:`decode_record`,
    as on the reference path (``fast=False``: every record one by one, python-chess validates)."""
    if options.fast:
        return read_game_blocks_compiled(stream, SIZE, decode_record, "decode_sfbin", with_moves=True)
    return read_game_records(stream, SIZE, decode_record)


def sniff(head: bytes) -> bool:
    """Does the first record decode as a position with a sane tail?"""
    if len(head) < SIZE:
        return False
    try:
        _, bits = decode_position(head[:32])
    except ValueError:
        return False
    _score, _move, _ply, result, pad = _TAIL.unpack(head[32:40])
    return bits <= 256 and result in (-1, 0, 1)


SPEC = FormatSpec("bin", read, sniff, score_pov="side to move", result_pov="side to move",
                  doc="Stockfish .bin PackedSfenValue, 40-byte records", binary=True, record_size=SIZE,
                  extensions=(".bin",), find_ranges=fixed_game_finder(decode_record, SIZE),
                  compiled=compiled_fixed,
                  score_unit="sf-internal")
