"""bullet text reader: ``<FEN> | <score> | <result>`` per line.

Score: integer centipawns, **white** POV. Result: 1.0/0.5/0.0 (also 1, 1/2, 0, [1.0]), white
POV (FORMATS.md). Both are turned to side-to-move POV here. Ply comes from the FEN's fullmove
counter (``2·(fullmove−1) + (black to move)``) and is unknown when the FEN has no counters.
A new game starts when ply does not follow the previous line's or the result changes.

With ``options.fast`` (the default) the bytes are tokenized, parsed and validated by the compiled
text core (:mod:`nnue.pipeline.compiled.text`); lines it cannot settle exactly go through this
module's line function and python-chess, with identical results (tested).
"""
from __future__ import annotations

import math
from typing import Iterator

from ..board import unpack
from ..records import (MATE_BOUND, VALUE_NONE, FormatError, FormatSpec, PackedRows, ReaderOptions, Record, Reject,
                       parse_result_token)
from ._boundaries import text_finder
from ._write import board_of, compiled_dump, text_block


def _compiled():
    """The numba fast path (:mod:`nnue.pipeline.compiled.text`), imported when first used: importing
    it loads numba (0.3 CPU s), which the CLI's parser, importing this registry, must not."""
    from ..compiled import text

    return text


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject | PackedRows]:
    """One Record or Reject per non-empty line (fast: runs of them as PackedRows). Raises
    FormatError when the first non-empty line is not bullet text (wrong format)."""
    if options.fast and hasattr(stream, "buffer"):
        return _compiled().read_text(stream, "bullet-text", Machine())
    return _read(stream)


class Machine:
    """The reader's state, fed one line at a time (shared by the one-by-one path and the
    compiled path's hand-backs)."""

    idle = True

    def __init__(self):
        self.game = -1
        self.prev_ply = self.prev_white_result = None
        self.seen_any = False

    def feed(self, lineno: int, line: str) -> list:
        item = self._line(lineno, line)
        return [] if item is None else [item]

    def finish(self) -> list:
        return []

    def _line(self, lineno: int, line: str):
        line = line.strip()
        if not line:
            return None
        loc = f"line {lineno}"
        parts = [p.strip() for p in line.split("|")]
        if not self.seen_any and (len(parts) != 3 or "/" not in parts[0]):
            raise FormatError(f"line {lineno}: expected bullet text 'FEN | score | result', "
                              f"found {line[:40]!r}")
        self.seen_any = True
        if len(parts) != 3:
            return Reject(loc, "malformed record",
                          f"expected 'FEN | score | result', found {len(parts)} field(s)", line)
        fen, score_s, result_s = parts
        fen_fields = fen.split()
        if len(fen_fields) < 4:
            return Reject(loc, "bad FEN", "FEN has fewer than 4 fields", line)
        black = fen_fields[1] == "b"
        try:
            score_f = float(score_s)
        except ValueError:
            return Reject(loc, "score not a finite integer", f"score {score_s!r} is not a number", line)
        if not math.isfinite(score_f) or score_f != int(score_f):
            return Reject(loc, "score not a finite integer", f"score {score_s!r}", line)
        white_result = parse_result_token(result_s)
        if white_result is None:
            return Reject(loc, "result out of range", f"result {result_s!r} is not 1.0/0.5/0.0", line)
        score_w = int(score_f)
        ply = None
        if len(fen_fields) >= 6:
            try:
                ply = 2 * (max(int(fen_fields[5]), 1) - 1) + black  # fullmove 0 reads as 1, as python-chess reads it
            except ValueError:
                return Reject(loc, "bad FEN", "fullmove counter is not an integer", line)
        if not (ply is not None and self.prev_ply is not None and ply == self.prev_ply + 1
                and white_result == self.prev_white_result):
            self.game += 1
        self.prev_ply, self.prev_white_result = ply, white_result
        sign = -1 if black else 1
        result = int(round(2 * white_result - 1)) * sign
        none = abs(score_w) == VALUE_NONE
        return Record(
            fen=fen, score=None if none else score_w * sign, result=result, ply=ply,
            move=None, location=loc, game=self.game,
            score_is_mate=not none and abs(score_w) >= MATE_BOUND,
        )

    # the compiled core's copy of the state: game, prev ply known, prev ply, prev white result x2 (-1 none), seen
    def state(self) -> list:
        known = self.prev_ply is not None
        return [self.game, int(known), self.prev_ply if known else 0,
                -1 if self.prev_white_result is None else int(2 * self.prev_white_result), int(self.seen_any)]

    def set_state(self, st) -> None:
        self.game = int(st[0])
        self.prev_ply = int(st[2]) if st[1] else None
        self.prev_white_result = None if st[3] < 0 else int(st[3]) / 2
        self.seen_any = bool(st[4])


def _read(stream) -> Iterator[Record | Reject]:
    m = Machine()
    for lineno, line in enumerate(stream, 1):
        yield from m.feed(lineno, line)


def sniff(head: str) -> bool:
    first = head.lstrip().split("\n", 1)[0]
    return first.count("|") == 2 and "/" in first.split("|")[0]


def write(r: dict) -> bytes:
    """One dataset row as a bullet text line: ``FEN | score | result``, white POV, result
    1.0/0.5/0.0; no score is VALUE_NONE (32002)."""
    sign = -1 if unpack(r["board"])["black_to_move"] else 1
    score = VALUE_NONE if r["score_none"] else r["score"] * sign
    result = {1: "1.0", 0: "0.5", -1: "0.0"}[r["result"] * sign]
    return f"{board_of(r['board']).fen()} | {score} | {result}\n".encode()


def write_block(c):
    """A row group (:class:`nnue.pipeline.convert.Columns`) through the compiled writer
    (:func:`nnue.pipeline.compiled.dump.write_bullet_text`): (out, ends, fallback)."""
    out, ends, fallback = text_block(c.n)
    compiled_dump().write_bullet_text(c.boards, c.score, c.result, c.none, out, ends, fallback)
    return out, ends, fallback


SPEC = FormatSpec("bullet-text", read, sniff, score_pov="white", result_pov="white",
                  doc="bullet text: FEN | score | result", extensions=(".txt",),
                  find_ranges=text_finder(read, after_e=False), compiled=_compiled, write=write,
                  write_block=write_block)
