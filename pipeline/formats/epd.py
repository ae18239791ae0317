"""Labelled EPD reader: zurichess ``<FEN> c9 "1-0";`` and Ethereal ``<FEN> [1.0] <eval>``.

Results are white POV (1-0 / 0-1 / 1/2-1/2, or [1.0]/[0.5]/[0.0]); an Ethereal eval is side-to-
move POV centipawns (FORMATS.md). ``hmvc N;`` and ``fmvn N;`` opcodes give the move counters;
without them the counters default to ``0 1`` and the ply is unknown. There is no score in the
zurichess form. Each line counts as its own game (EPD sets are usually shuffled positions).

With ``options.fast`` (the default) the bytes are tokenized, parsed and validated by the compiled
text core (:mod:`nnue.pipeline.compiled.text`); lines it cannot settle exactly go through this
module's line function and python-chess, with identical results (tested).
"""
from __future__ import annotations

import re
from typing import Iterator

from ..records import FormatError, FormatSpec, PackedRows, ReaderOptions, Record, Reject, parse_result_token
from ._boundaries import text_finder

_OP = re.compile(r'(\w+)\s+("[^"]*"|[^;]*);')


def _compiled():
    """The numba fast path (:mod:`nnue.pipeline.compiled.text`), imported when first used: importing
    it loads numba (0.3 CPU s), which the CLI's parser, importing this registry, must not."""
    from ..compiled import text

    return text


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject | PackedRows]:
    """One Record or Reject per EPD line (fast: runs of them as PackedRows). Raises FormatError
    when the first line is not EPD."""
    if options.fast and hasattr(stream, "buffer"):
        return _compiled().read_text(stream, "epd", Machine())
    return _read(stream)


class Machine:
    """The reader's state, fed one line at a time (shared by the one-by-one path and the
    compiled path's hand-backs)."""

    idle = True

    def __init__(self):
        self.seen = False

    def feed(self, lineno: int, line: str) -> list:
        item = self._line(lineno, line)
        return [] if item is None else [item]

    def finish(self) -> list:
        return []

    def state(self) -> list:
        return [int(self.seen)]

    def set_state(self, st) -> None:
        self.seen = bool(st[0])

    def _line(self, lineno: int, line: str):
        line = line.strip()
        if not line or line.startswith("#"):
            return None
        loc = f"line {lineno}"
        fields = line.split()
        if len(fields) < 4 or fields[0].count("/") != 7:
            if not self.seen:
                raise FormatError(f"line {lineno}: expected an EPD line '<FEN> ...', found {line[:40]!r}")
            return Reject(loc, "bad FEN", "fewer than 4 FEN fields", line)
        self.seen = True
        placement, turn, castling, ep = fields[:4]
        rest = " ".join(fields[4:])
        half, full, score, white_result = "0", "1", None, None
        if rest.startswith("["):  # Ethereal / lichess-big3: [1.0] [eval]; also 6-field FENs
            pass
        elif len(fields) >= 6 and fields[4].isdigit() and fields[5].isdigit():
            half, full = fields[4], fields[5]
            rest = " ".join(fields[6:])
        m = re.match(r"\[([^\]]*)\]\s*(-?\d+)?\s*$", rest)
        if m:
            white_result = parse_result_token(m.group(1))
            if m.group(2) is not None:
                score = int(m.group(2))
        else:
            ops = {k: v.strip().strip('"') for k, v in _OP.findall(rest)}
            if "c9" in ops:
                white_result = parse_result_token(ops["c9"])
            half = ops.get("hmvc", half)
            full = ops.get("fmvn", full)
        if white_result is None:
            return Reject(loc, "result out of range", "no result ([1.0] or c9 \"1-0\";) on the line", line)
        if not (half.isascii() and half.isdigit() and full.isascii() and full.isdigit()
                and len(half) <= 9 and len(full) <= 9):
            return Reject(loc, "bad FEN", f"move counters {half!r} {full!r}", line)
        counters_known = (half, full) != ("0", "1") or "fmvn" in rest
        black = turn == "b"
        result = int(round(2 * white_result - 1)) * (-1 if black else 1)
        ply = 2 * (max(int(full), 1) - 1) + black if counters_known else None  # fullmove 0 is 1 (python-chess)
        return Record(fen=f"{placement} {turn} {castling} {ep} {half} {full}", score=score, result=result,
                      ply=ply, move=None, location=loc, game=lineno)


def _read(stream) -> Iterator[Record | Reject]:
    m = Machine()
    for lineno, line in enumerate(stream, 1):
        yield from m.feed(lineno, line)


def sniff(head: str) -> bool:
    first = head.lstrip().split("\n", 1)[0]
    return first.count("/") >= 7 and ("c9" in first or "[" in first) and "|" not in first


SPEC = FormatSpec("epd", read, sniff, score_pov="side to move (Ethereal eval)", result_pov="white",
                  doc="labelled EPD (zurichess c9, Ethereal [1.0] eval)", extensions=(".epd",),
                  find_ranges=text_finder(read, after_e=False), compiled=_compiled)
