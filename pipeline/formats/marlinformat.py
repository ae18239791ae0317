"""marlinformat reader: 32-byte ``PackedBoard`` records (the dataset's own board layout).

eval: int16, **white** POV; wdl: 0 black win, 1 draw, 2 white win (FORMATS.md). Both are turned
to side-to-move POV. Ply comes from the fullmove counter and the side to move. A new game starts
when ply does not follow on or the result changes.
"""
from __future__ import annotations

import struct
from typing import Iterator

from ..board import unpack, unpack_fen
from ..records import MATE_BOUND, VALUE_NONE, FormatSpec, PackedRows, ReaderOptions, Record, Reject
from ._binary import compiled_fixed, read_game_blocks_compiled, read_game_records
from ._boundaries import fixed_game_finder

SIZE = 32


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject | PackedRows]:
    """Records in file order. With ``options.fast`` (the default) the compiled core
    (:mod:`nnue.pipeline.compiled.fixed`) decodes and validates blocks of records and yields
    runs of them as PackedRows; the records it does not settle come from :func:`decode_record`,
    as on the reference path (``fast=False``: every record one by one, python-chess validates)."""
    if options.fast:
        return read_game_blocks_compiled(stream, SIZE, decode_record, "decode_marlin", with_moves=False)
    return read_game_records(stream, SIZE, decode_record)


def decode_record(offset: int, rec: bytes, game: int | None) -> Record | Reject:
    """One 32-byte record at byte ``offset`` -> Record (with game ordinal ``game``) or Reject."""
    loc = f"byte {offset}"
    try:
        d = unpack(rec)
        fen = unpack_fen(rec)
    except ValueError as e:
        return Reject(loc, "malformed record", str(e), rec.hex())
    if d["wdl"] > 2:
        return Reject(loc, "result out of range", f"wdl byte {d['wdl']}", rec.hex())
    black = d["black_to_move"]
    sign = -1 if black else 1
    result = (d["wdl"] - 1) * sign
    ply = 2 * (d["fullmove"] - 1) + black if d["fullmove"] >= 1 else None
    ev = d["eval_white"]
    none = abs(ev) == VALUE_NONE
    return Record(fen=fen, score=None if none else ev * sign, result=result, ply=ply, move=None,
                  location=loc, game=game, score_is_mate=not none and abs(ev) >= MATE_BOUND)


def sniff(head: bytes) -> bool:
    return False  # no magic: chosen by extension (.marlin) or --format


def write(r: dict) -> bytes:
    """One dataset row as a marlinformat record: the board column as it is (eval white POV),
    with eval VALUE_NONE (32002) when the row has no score."""
    b = bytearray(r["board"])
    if r["score_none"]:
        b[28:30] = struct.pack("<h", VALUE_NONE)
    return bytes(b)


def write_block(c):
    """A row group (:class:`nnue.pipeline.convert.Columns`) in numpy: (out, None, None)."""
    out = c.boards.copy()
    out[c.none, 28] = VALUE_NONE & 255
    out[c.none, 29] = VALUE_NONE >> 8
    return out, None, None


SPEC = FormatSpec("marlinformat", read, sniff, score_pov="white", result_pov="white (wdl 0/1/2)",
                  doc="marlinformat PackedBoard, 32-byte records", binary=True, record_size=SIZE,
                  extensions=(".marlin",), find_ranges=fixed_game_finder(decode_record, SIZE),
                  compiled=compiled_fixed, write=write, write_block=write_block)
