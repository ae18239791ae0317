"""Boundary finders of the format modules: where a byte range of a dump may start.

Each format's ``SPEC.find_ranges`` is ``(path, size) -> find(lo, hi)``: ``find`` returns the first
offset in ``[lo, hi)`` (searched at most :data:`SEARCH_BYTES` past ``lo``) where the format's
reader would start a new game anyway, or None. The rules per format, and how the plan of ranges
is made from them, are in :mod:`nnue.pipeline.ranges`; the finders shared by several formats are
here, the others in their format's module (binpack, viriformat, PGN).
"""
from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np

from ..records import UTF8_BOM, FormatError, ReaderOptions, Record
from ._binary import game_boundary

SEARCH_BYTES = 1 << 20   # how far past a nominal offset a boundary is looked for (then the range is empty)
TEXT_WINDOW = 1 << 18    # most bytes of text parsed at a time while looking for a boundary
TEXT_WINDOW_FIRST = 1 << 14  # the first window (a game of self-play is a few KB); x4 after each miss


def read_at(path: Path, start: int, n: int) -> bytes:
    """Up to ``n`` bytes of ``path`` from byte ``start`` (fewer at the end of the file)."""
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(n)


def fixed_game_finder(decode, size_rec: int):
    """Fixed-record formats (.bin, marlinformat): a record boundary where the reader starts a new
    game (:func:`~nnue.pipeline.formats._binary.game_boundary` of the records either side, both
    decoded by ``decode(offset, bytes, game) -> Record | Reject``, the reader's own)."""

    def make(path: Path, size: int):
        whole = size - size % size_rec  # a trailing partial record is never a range's start

        def find(lo: int, hi: int):
            j = -(-lo // size_rec)
            limit = min(hi, lo + SEARCH_BYTES, whole)
            while j * size_rec < limit:
                count = min(4096, -(-(limit - j * size_rec) // size_rec))  # records starting before limit
                data = read_at(path, (j - 1) * size_rec, (count + 1) * size_rec)
                recs = [decode((j - 1 + k) * size_rec, data[k * size_rec:(k + 1) * size_rec], None)
                        for k in range(count + 1)]
                for k in range(1, count + 1):
                    a, b = recs[k - 1], recs[k]
                    if isinstance(a, Record) and isinstance(b, Record) and \
                            game_boundary((a.ply, a.result), b.ply, b.result):
                        return (j + k - 1) * size_rec
                j += count
            return None

        return find

    return make


def any_record_finder(size_rec: int):
    """Fixed-record formats whose every record is a game of its own (bulletformat): any record boundary."""
    def make(path: Path, size: int):
        whole = size - size % size_rec

        def find(lo: int, hi: int):
            b = -(-lo // size_rec) * size_rec
            return b if b < min(hi, whole) else None

        return find

    return make


def starts_finder(starts: np.ndarray):
    """A finder over known boundaries (sorted int64 offsets): the first one in ``[lo, hi)``."""

    def find(lo: int, hi: int):
        k = int(np.searchsorted(starts, lo))
        return int(starts[k]) if k < len(starts) and starts[k] < hi else None

    return find


def text_finder(read, after_e: bool):
    """Text formats: parse windows of lines with the reader ``read``'s reference path (no fast path) from a
    line where its state is the one-file reader's (any line; in .plain, the line after an ``e``),
    and cut before the first record B that follows a record A (both well-formed) in a new game."""

    def make(path: Path, size: int):
        def find(lo: int, hi: int):
            pos = lo  # look at lines starting at or after pos
            limit = min(hi, lo + SEARCH_BYTES)
            window_bytes = TEXT_WINDOW_FIRST
            while pos < limit:
                base = pos - 1
                data = read_at(path, base, min(window_bytes, size - base))
                window_bytes = min(4 * window_bytes, TEXT_WINDOW)
                end = data.rfind(b"\n") + 1  # the window ends at a line's end
                p = data.find(b"\n") + 1     # the first line starting at or after pos
                if p == 0 or end <= p:
                    return None  # no whole line left before the end of the file
                if after_e:  # .plain: the reader's state is the one-file reader's after an "e" line
                    m = re.search(rb"(?m)^[ \t]*e[ \t]*\r?\n", data[p:end])
                    if m is None:
                        pos = base + end
                        continue
                    p += m.end()
                window = data[p:end]
                if base + p >= limit:
                    return None
                if b"\r" in window.replace(b"\r\n", b""):
                    return None  # lone carriage returns: line numbers this scan does not follow
                try:
                    items = list(read(io.TextIOWrapper(io.BytesIO(window), encoding="utf-8",
                                                            errors="replace", newline=None),
                                           ReaderOptions(fast=False)))
                except FormatError:
                    items = []
                line_starts = np.concatenate([[0], np.flatnonzero(np.frombuffer(window, np.uint8) == 10) + 1])

                def at(item) -> int:
                    return base + p + int(line_starts[int(item.location.split()[1]) - 1])

                # B is never the window's last item (it may be cut by the window's end)
                for a, b in zip(items, items[1:-1]):
                    if isinstance(a, Record) and isinstance(b, Record) and a.game != b.game:
                        cut = at(b)
                        if cut >= limit:
                            return None
                        if read_at(path, cut, 3) != UTF8_BOM:
                            return cut
                # go on from the third-last item (.plain: the "e" before the last pair's A)
                nxt = at(items[-3]) if len(items) >= 3 else base + end
                pos = nxt if nxt > pos else base + end
            return None

        return find

    return make
