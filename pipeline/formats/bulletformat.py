"""bulletformat reader: 32-byte ``ChessBoard`` records (bullet's training format).

The board is stored from the side to move's view (flipped when black is to move), with nibble
bit 3 marking the opponent's pieces; score int16 and result (0 loss, 1 draw, 2 win) are side-to-
move POV; side to move, castling rights, en passant and the move counters are not stored
(FORMATS.md). So each record is read as the position *seen by the side to move*: the side to move
plays white, which is exact for colour-symmetric feature sets and for the score and result, but
the true colours are lost. Ply is unknown; each record counts as its own game (no game structure).
"""
from __future__ import annotations

import struct
from typing import Iterator

import numpy as np

from ..board import NO_EP, unpack, unpack_fen
from ..records import MATE_BOUND, VALUE_NONE, FormatSpec, PackedRows, ReaderOptions, Record, Reject
from ._binary import compiled_fixed, fixed_blocks, fixed_records
from ._boundaries import any_record_finder
from ._write import compiled_dump

SIZE = 32
_TAIL = struct.Struct("<hBBB3s")


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject | PackedRows]:
    """Records in file order. With ``options.fast`` (the default) the compiled core
    (:mod:`nnue.pipeline.compiled.fixed`) decodes and validates blocks of records and yields
    runs of them as PackedRows; the records it does not settle come from :func:`decode_record`,
    as on the reference path (``fast=False``: every record one by one, python-chess validates)."""
    if options.fast:
        yield from _read_compiled(stream)
        return
    for n, item in enumerate(fixed_records(stream, SIZE)):
        if isinstance(item, Reject):
            yield item
            continue
        offset, rec = item
        yield decode_record(offset, rec, n)


def _read_compiled(stream):
    fixed = compiled_fixed()
    for item in fixed_blocks(stream, SIZE):
        if isinstance(item, Reject):
            yield item
            continue
        offset, recs = item

        def one(i, game, offset=offset, recs=recs):
            return decode_record(offset + i * SIZE, recs[i].tobytes(), game)

        game = offset // SIZE + np.arange(len(recs), dtype=np.int64)  # each record is its own game
        yield from fixed.run_block(fixed.decode_bullet, recs, offset, SIZE, None, one, with_moves=False, game=game)


def decode_record(offset: int, rec: bytes, game: int) -> Record | Reject:
    """One 32-byte record at byte ``offset`` -> Record (game ordinal ``game``) or Reject."""
    loc = f"byte {offset}"
    score, result, ksq, opp_ksq, _ = _TAIL.unpack(rec[24:])
    if result > 2:
        return Reject(loc, "result out of range", f"result byte {result}", rec.hex())
    nibbles = [b >> s & 15 for b in rec[8:24] for s in (0, 4)][:bin(int.from_bytes(rec[:8], "little")).count("1")]
    if any(c & 7 > 5 for c in nibbles):
        return Reject(loc, "malformed record", "piece type above 5 (K)", rec.hex())
    # bytes 0..23 are a marlinformat board with white (the side to move) to move
    board = rec[:24] + bytes([NO_EP, 0, 1, 0, 0, 0, 1, 0])
    try:
        fen = unpack_fen(board).rsplit(" ", 2)[0] + " 0 1"
    except ValueError as e:
        return Reject(loc, "malformed record", str(e), rec.hex())
    kings = _king_squares(rec)
    if kings != (ksq, opp_ksq ^ 56):
        return Reject(loc, "king square mismatch", f"board kings {kings}, fields ({ksq}, {opp_ksq} ^ 56)",
                      rec.hex())
    none = abs(score) == VALUE_NONE
    return Record(fen=fen, score=None if none else score, result=result - 1, ply=None, move=None,
                  location=loc, game=game, score_is_mate=not none and abs(score) >= MATE_BOUND)


def _king_squares(rec: bytes) -> tuple[int | None, int | None]:
    """(own king square, opponent king square) from the board part of a record."""
    occ = int.from_bytes(rec[:8], "little")
    own = opp = None
    i = 0
    while occ:
        sq = (occ & -occ).bit_length() - 1
        occ &= occ - 1
        code = rec[8 + (i >> 1)] >> (4 * (i & 1)) & 15
        i += 1
        if code & 7 == 5:
            if code & 8:
                opp = sq
            else:
                own = sq
    return own, opp


def sniff(head: bytes) -> bool:
    return False  # no magic: chosen by extension (.bf) or --format


_WRITE_TAIL = struct.Struct("<hBBB3x")


def write(r: dict) -> bytes:
    """One dataset row as a 32-byte record seen from the side to move (flipped when black is to
    move, nibble bit 3 = opponent), score (VALUE_NONE when none) and result (0/1/2) stm POV, own
    king square, opponent king square ^ 56 (FORMATS.md)."""
    d = unpack(r["board"])
    black = d["black_to_move"]
    pieces = {}
    kings = {}
    for sq, code in d["pieces"].items():
        own = (code >> 3) == (1 if black else 0)
        rel = sq ^ 56 if black else sq
        pieces[rel] = (code & 7) | (0 if own else 8)
        if code & 7 == 5:
            kings[own] = rel
    occ = 0
    nib = bytearray(16)
    for i, sq in enumerate(sorted(pieces)):
        occ |= 1 << sq
        nib[i >> 1] |= pieces[sq] << (4 * (i & 1))
    score = VALUE_NONE if r["score_none"] else r["score"]
    return occ.to_bytes(8, "little") + bytes(nib) + _WRITE_TAIL.pack(score, r["result"] + 1, kings[True],
                                                                      kings[False] ^ 56)


def write_block(c):
    """A row group (:class:`nnue.pipeline.convert.Columns`) through the compiled writer
    (:func:`nnue.pipeline.compiled.dump.write_bulletformat`): (out, None, None), every row settled."""
    out = np.zeros((c.n, SIZE), np.uint8)
    compiled_dump().write_bulletformat(c.boards, c.score, c.result, c.none, out)
    return out, None, None


SPEC = FormatSpec("bulletformat", read, sniff, score_pov="side to move (board seen from it)",
                  result_pov="side to move (0/1/2)", doc="bulletformat ChessBoard, 32-byte records",
                  binary=True, record_size=SIZE, extensions=(".bf",), find_ranges=any_record_finder(SIZE),
                  compiled=compiled_fixed, write=write, write_block=write_block)
