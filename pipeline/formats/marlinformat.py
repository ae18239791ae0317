"""marlinformat reader: 32-byte ``PackedBoard`` records (the dataset's own board layout).

eval: int16, **white** POV; wdl: 0 black win, 1 draw, 2 white win (FORMATS.md). Both are turned
to side-to-move POV. Ply comes from the fullmove counter and the side to move. A new game starts
when ply does not follow on or the result changes.
"""
from __future__ import annotations

from typing import Iterator

from ..board import unpack, unpack_fen
from . import MATE_BOUND, VALUE_NONE, FormatSpec, ReaderOptions, Record, Reject
from ._binary import fixed_records, game_boundary

SIZE = 32


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject]:
    game, prev = -1, None
    for item in fixed_records(stream, SIZE):
        if isinstance(item, Reject):
            yield item
            continue
        offset, rec = item
        loc = f"byte {offset}"
        try:
            d = unpack(rec)
            fen = unpack_fen(rec)
        except ValueError as e:
            yield Reject(loc, "malformed record", str(e), rec.hex())
            continue
        if d["wdl"] > 2:
            yield Reject(loc, "result out of range", f"wdl byte {d['wdl']}", rec.hex())
            continue
        black = d["black_to_move"]
        sign = -1 if black else 1
        result = (d["wdl"] - 1) * sign
        ply = 2 * (d["fullmove"] - 1) + black if d["fullmove"] >= 1 else None
        if game_boundary(prev, ply, result):
            game += 1
        prev = (ply, result)
        ev = d["eval_white"]
        none = abs(ev) == VALUE_NONE
        yield Record(fen=fen, score=None if none else ev * sign, result=result, ply=ply, move=None,
                     location=loc, game=game, score_is_mate=not none and abs(ev) >= MATE_BOUND)


def sniff(head: bytes) -> bool:
    return False  # no magic: chosen by extension (.marlin) or --format


SPEC = FormatSpec("marlinformat", read, sniff, score_pov="white", result_pov="white (wdl 0/1/2)",
                  doc="marlinformat PackedBoard, 32-byte records", binary=True, record_size=SIZE)
