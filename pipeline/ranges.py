"""Byte ranges of one input file, so that one large file is packed by several processes.

The split plan is a pure function of the file's bytes and the range size, never of the number of
workers or shards, so that a pack with one worker, with N workers, or as N shards merged writes the
same part files. For a file of ``size`` bytes and a range size ``R``:

- there are ``n = ceil(size / R)`` *nominal* ranges ``[i·R, (i+1)·R)`` (one for a compressed file, a
  format that is not split, or ``size <= R``); nominal ranges are what shards are dealt (a function of
  path and size alone);
- the boundary of range ``i > 0`` is the first offset in ``[i·R, (i+1)·R)`` where the format's reader
  would start a new game anyway, found by a small look-ahead parse (the format's ``SPEC.find_ranges``,
  :mod:`nnue.pipeline.formats._boundaries`); range ``i`` runs from its boundary to the next boundary
  found. A nominal range whose search finds no boundary (one game longer than ``R``, a run of
  unreadable records) is empty and its bytes belong to the range before it.

Where a range may start, by format (the reader at the start of a range must be in the state in which
the one-file reader reaches that byte, and a game must not be cut, since its id hashes its first
positions, ``pack.GameIds``):

- ``.plain``: the first line of a record that follows a well-formed record (the line after its ``e``)
  and that the reader starts a new game at (ply not following on or result not flipping);
- bullet text: a line (well-formed, as is the line before it) where the reader starts a new game;
- EPD, bulletformat: any line / record (each is its own game);
- ``.bin`` (PackedSfenValue), marlinformat: a record boundary where the previous and this record both
  decode and :func:`~nnue.pipeline.formats._binary.game_boundary` says a new game starts;
- binpack: a ``BINP`` block header (chains never cross blocks; every chain is a game), found by a walk
  over the block headers from the start of the file;
- viriformat: a game's header, found by a compiled walk over the games (header, pairs up to the
  4 zero bytes) from the start of the file;
- PGN: a game's start as ``chess.pgn.read_game`` reaches it from the start of the file (the line
  after the blank line that ends a game's movetext), found by a compiled walk over the lines of the
  whole file (:func:`~nnue.pipeline.compiled.ranges.pgn_game_starts`: where a game starts depends on
  everything before it, comments over several lines, games with no movetext). The range carries the
  number of games before it (``Range.game``), which the reader starts its game ordinals at, so that
  the "game N" of every location is the file's. A game whose movetext has a ``)`` or a NAG of
  hundreds of digits (where python-chess may raise) is read with python-chess first
  (:data:`nnue.pipeline.formats.pgn.PGN_CHECK_GAMES` of them at most): if one makes ``read_game``
  raise, python-chess goes on mid-game and the walk no longer follows it, so the file is one range (its
  later nominal ranges are empty), as it is with more such games;
- compressed inputs (``.gz``, ``.zst``, ``.xz``, ``.bz2``) are one range: they cannot be entered mid-way.

Readers see a range as a stream of its own (:func:`open_range`): offsets and line numbers relative to
its start, which :class:`Rebase` turns back into the file's (``pack`` applies it to every location).
"""
from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from pathlib import Path

from .formats import get_format
from .formats._boundaries import read_at

COMPRESSED = (".gz", ".zst", ".xz", ".bz2")
DEFAULT_RANGE_MB = 64


@dataclass(frozen=True)
class Range:
    """One byte range of an input: nominal ``index`` (0-based, of ``count``), bytes [start, end),
    ``line`` = lines before ``start`` (text formats; 0 for binary ones), ``game`` = games before
    ``start`` (PGN, whose locations number the games; 0 for other formats), ``note``: why a file
    that would be split is one range (PGN, see the module docstring; "" otherwise)."""

    index: int
    count: int
    start: int
    end: int
    line: int = 0
    game: int = 0
    note: str = ""


def range_bytes(range_mb: float) -> int:
    """``--range-mb`` (MiB, fractions allowed) -> bytes (at least 1). ValueError when not positive."""
    if not range_mb > 0 or not math.isfinite(range_mb):
        raise ValueError(f"--range-mb {range_mb}: give a positive number of MiB")
    return max(1, int(range_mb * (1 << 20)))


def splittable(path: Path, fmt: str) -> bool:
    """Can ``path`` (format ``fmt``) be split into byte ranges: uncompressed, and its format has a
    boundary finder (``SPEC.find_ranges``)? Raises FormatError for an unknown format."""
    return Path(path).suffix.lower() not in COMPRESSED and get_format(fmt).find_ranges is not None


def nominal_count(path: Path, fmt: str, size: int, rbytes: int) -> int:
    """Number of nominal ranges of a file (a function of its name, format and size only)."""
    if not splittable(path, fmt) or size <= rbytes:
        return 1
    return -(-size // rbytes)


def plan(path: Path, fmt: str, rbytes: int) -> list[Range]:
    """The non-empty ranges of ``path`` (format ``fmt``), in file order (module docstring)."""
    path = Path(path)
    size = path.stat().st_size
    n = nominal_count(path, fmt, size, rbytes)
    if n == 1:
        return [Range(0, 1, 0, size, 0)]
    find = _finder(fmt, path, size)
    bounds = [(0, 0)]
    for i in range(1, n):
        b = find(i * rbytes, min((i + 1) * rbytes, size))
        if b is not None:
            bounds.append((i, b))
    why = getattr(find, "why_whole", lambda: None)() if len(bounds) > 1 else None
    if why:
        return [Range(0, n, 0, size, 0, 0, why)]  # as if no later nominal range had a boundary
    starts = [b for _, b in bounds] + [size]
    lines = _lines_before(path, starts[:-1]) if _is_text(fmt) else [0] * len(bounds)
    games = [getattr(find, "games", lambda off: 0)(s) for s in starts[:-1]]
    return [Range(i, n, s, starts[k + 1], lines[k], games[k]) for k, ((i, s)) in enumerate(bounds)]


# ---------------------------------------------------------------------------- streams of a range
class _Slice(io.RawIOBase):
    """The bytes [start, end) of a file as a raw stream."""

    def __init__(self, path, start: int, end: int):
        self._f = open(path, "rb")
        self._f.seek(start)
        self._left = end - start

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = min(len(b), self._left)
        if n <= 0:
            return 0
        got = self._f.readinto(memoryview(b)[:n])
        self._left -= got
        return got

    def close(self):
        self._f.close()
        super().close()


def open_range(path, rng: Range, binary: bool, errors: str = "replace"):
    """A stream over one range of an uncompressed file: bytes (binary formats) or text, decoded as
    ``formats.open_text`` decodes the whole file (UTF-8, errors replaced, universal newlines; a
    byte-order mark is dropped only at the start of the file)."""
    raw = io.BufferedReader(_Slice(path, rng.start, rng.end), 1 << 20)
    if binary:
        return raw
    return io.TextIOWrapper(raw, encoding="utf-8-sig" if rng.start == 0 else "utf-8", errors=errors,
                            newline=None)


def _lines_before(path: Path, offsets: list[int], chunk: int = 1 << 24) -> list[int]:
    """Line breaks before each offset (sorted; each just after a ``\\n``), counted as universal
    newlines count them: ``\\n``, ``\\r\\n`` and a lone ``\\r`` are one line break each."""
    out = []
    total = pos = 0
    prev_cr = False
    with open(path, "rb") as f:
        for off in offsets:
            while pos < off:
                data = f.read(min(chunk, off - pos))
                if not data:
                    break
                if b"\r" in data:  # (memchr) universal newlines: \r\n and a lone \r are one break each
                    total += data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
                else:
                    total += data.count(b"\n")
                if prev_cr and data[:1] == b"\n":
                    total -= 1
                prev_cr = data[-1:] == b"\r"
                pos += len(data)
            out.append(total)
    return out


# ---------------------------------------------------------------------------- locations
_LOC = re.compile(r"^(line|byte) (\d+)")


class Rebase:
    """Turn a range reader's locations ("line N ...", "byte N ...") into the file's."""

    def __init__(self, fmt: str, rng: Range):
        self.line, self.byte = rng.line, rng.start
        # offsets inside reject details that are the file's (SPEC.detail_offsets; others, such as
        # binpack's "movetext overrun at byte N", are relative to a block and stay as they are)
        pattern = get_format(fmt).detail_offsets
        self.detail = re.compile(pattern) if pattern is not None else None

    def _sub(self, m: re.Match) -> str:
        return f"{m.group(1)} {int(m.group(2)) + (self.line if m.group(1) == 'line' else self.byte)}"

    def loc(self, text: str) -> str:
        return _LOC.sub(self._sub, text, count=1)

    def details(self, text: str) -> str:
        return self.detail.sub(self._sub, text) if self.detail is not None and text else text


class RebasedLocations:
    """A lazy view of a PackedRows run's locations, rebased."""

    def __init__(self, locations, rebase: Rebase):
        self.locations, self.rebase = locations, rebase

    def __len__(self):
        return len(self.locations)

    def __getitem__(self, i):
        return self.rebase.loc(self.locations[i])


# ---------------------------------------------------------------------------- boundary finders
def _finder(fmt: str, path: Path, size: int):
    """The boundary finder of ``fmt`` over ``path`` (its ``SPEC.find_ranges``; the rules above)."""
    return get_format(fmt).find_ranges(path, size)


def _is_text(fmt: str) -> bool:
    """Text formats count lines before a range (locations are "line N")."""
    return not get_format(fmt).binary


def append_range(path: Path, fmt: str, start: int) -> tuple[Range, bool]:
    """The range of the bytes a file gained after its first ``start`` bytes were packed
    (``nnue pack`` of a grown input, issue 20 item 3), and whether ``start`` is where the format's
    reader would start a new game anyway (``SPEC.find_ranges``: then the appended rows are exactly those
    of a read of the whole file; else the first appended records continue a game of the earlier
    bytes and are packed as a game of their own). Lines and games before ``start`` are counted, so
    locations are the file's. Index 1 of 2: a range of its own, never the whole file."""
    path = Path(path)
    size = path.stat().st_size
    find = _finder(fmt, path, size)
    # the first boundary at or after start; the finders look at lines that start after ``lo`` and
    # (.plain, bullet text) need the record before a boundary, so the search starts a little before
    b, lo = None, max(1, start - 4096)
    while start < size and lo < size:
        b = find(lo, size)
        if b is None or b >= start:
            break
        lo = b + 1
    # a boundary at start, or after nothing but blank space (which every reader skips)
    boundary = b is not None and (b == start or not read_at(path, start, b - start).strip())
    if boundary and getattr(find, "why_whole", None) is not None and find.why_whole():
        boundary = False  # PGN: the walk may not follow python-chess up to here
    line = _lines_before(path, [start])[0] if _is_text(fmt) else 0
    game = getattr(find, "games", lambda off: 0)(start)
    return Range(1, 2, start, size, line, game), boundary
