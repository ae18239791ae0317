"""bullet text reader: ``<FEN> | <score> | <result>`` per line.

Score: integer centipawns, **white** POV. Result: 1.0/0.5/0.0 (also 1, 1/2, 0, [1.0]), white
POV (FORMATS.md). Both are turned to side-to-move POV here. Ply comes from the FEN's fullmove
counter (``2·(fullmove−1) + (black to move)``) and is unknown when the FEN has no counters.
A new game starts when ply does not follow the previous line's or the result changes.

With ``options.fast`` (the default) runs of lines are packed and validated in bulk
(:mod:`._bulk_text`); the rest go through python-chess, with identical results (tested).
"""
from __future__ import annotations

import math
from typing import Iterator

from . import (MATE_BOUND, VALUE_NONE, FormatError, FormatSpec, PackedRows, ReaderOptions, Record, Reject,
               parse_result_token)
from ._bulk_text import bulk


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject | PackedRows]:
    """One Record or Reject per non-empty line (fast: runs of them as PackedRows). Raises
    FormatError when the first non-empty line is not bullet text (wrong format)."""
    records = _read(stream)
    return bulk(records) if options.fast else records


def _read(stream) -> Iterator[Record | Reject]:
    game = -1
    prev_ply = prev_white_result = None
    seen_any = False
    for lineno, line in enumerate(stream, 1):
        line = line.strip()
        if not line:
            continue
        loc = f"line {lineno}"
        parts = [p.strip() for p in line.split("|")]
        if not seen_any and (len(parts) != 3 or "/" not in parts[0]):
            raise FormatError(f"line {lineno}: expected bullet text 'FEN | score | result', "
                              f"found {line[:40]!r}")
        seen_any = True
        if len(parts) != 3:
            yield Reject(loc, "malformed record", f"expected 'FEN | score | result', found {len(parts)} field(s)", line)
            continue
        fen, score_s, result_s = parts
        fen_fields = fen.split()
        if len(fen_fields) < 4:
            yield Reject(loc, "bad FEN", "FEN has fewer than 4 fields", line)
            continue
        black = fen_fields[1] == "b"
        try:
            score_f = float(score_s)
        except ValueError:
            yield Reject(loc, "score not a finite integer", f"score {score_s!r} is not a number", line)
            continue
        if not math.isfinite(score_f) or score_f != int(score_f):
            yield Reject(loc, "score not a finite integer", f"score {score_s!r}", line)
            continue
        white_result = parse_result_token(result_s)
        if white_result is None:
            yield Reject(loc, "result out of range", f"result {result_s!r} is not 1.0/0.5/0.0", line)
            continue
        score_w = int(score_f)
        ply = None
        if len(fen_fields) >= 6:
            try:
                ply = 2 * (int(fen_fields[5]) - 1) + black
            except ValueError:
                yield Reject(loc, "bad FEN", "fullmove counter is not an integer", line)
                continue
        if not (ply is not None and prev_ply is not None and ply == prev_ply + 1
                and white_result == prev_white_result):
            game += 1
        prev_ply, prev_white_result = ply, white_result
        sign = -1 if black else 1
        result = int(round(2 * white_result - 1)) * sign
        none = abs(score_w) == VALUE_NONE
        yield Record(
            fen=fen, score=None if none else score_w * sign, result=result, ply=ply,
            move=None, location=loc, game=game,
            score_is_mate=not none and abs(score_w) >= MATE_BOUND,
        )


def sniff(head: str) -> bool:
    first = head.lstrip().split("\n", 1)[0]
    return first.count("|") == 2 and "/" in first.split("|")[0]


SPEC = FormatSpec("bullet-text", read, sniff, score_pov="white", result_pov="white",
                  doc="bullet text: FEN | score | result")
