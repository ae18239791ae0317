"""Byte ranges of one input file, so that one large file is packed by several processes.

The split plan is a pure function of the file's bytes and the range size, never of the number of
workers or shards, so that a pack with one worker, with N workers, or as N shards merged writes the
same part files. For a file of ``size`` bytes and a range size ``R``:

- there are ``n = ceil(size / R)`` *nominal* ranges ``[i·R, (i+1)·R)`` (one for a compressed file, a
  format that is not split, or ``size <= R``); nominal ranges are what shards are dealt (a function of
  path and size alone);
- the boundary of range ``i > 0`` is the first offset in ``[i·R, (i+1)·R)`` where the format's reader
  would start a new game anyway, found by a small look-ahead parse (:data:`FINDERS`); range ``i`` runs
  from its boundary to the next boundary found. A nominal range whose search finds no boundary (one
  game longer than ``R``, a run of unreadable records) is empty and its bytes belong to the range
  before it.

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
  (:data:`PGN_CHECK_GAMES` of them at most): if one makes ``read_game`` raise,
  python-chess goes on mid-game and the walk no longer follows it, so the file is one range (its
  later nominal ranges are empty), as it is with more such games;
- compressed inputs (``.gz``, ``.zst``, ``.xz``, ``.bz2``) are one range: they cannot be entered mid-way.

Readers see a range as a stream of its own (:func:`open_range`): offsets and line numbers relative to
its start, which :class:`Rebase` turns back into the file's (``pack`` applies it to every location).
"""
from __future__ import annotations

import io
import logging
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

COMPRESSED = (".gz", ".zst", ".xz", ".bz2")
DEFAULT_RANGE_MB = 64
SEARCH_BYTES = 1 << 20   # how far past a nominal offset a boundary is looked for (then the range is empty)
TEXT_WINDOW = 1 << 18    # most bytes of text parsed at a time while looking for a boundary
TEXT_WINDOW_FIRST = 1 << 14  # the first window (a game of self-play is a few KB); x4 after each miss


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
    return Path(path).suffix.lower() not in COMPRESSED and fmt in FINDERS


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
    find = FINDERS[fmt](path, size)
    bounds = [(0, 0)]
    for i in range(1, n):
        b = find(i * rbytes, min((i + 1) * rbytes, size))
        if b is not None:
            bounds.append((i, b))
    why = getattr(find, "why_whole", lambda: None)() if len(bounds) > 1 else None
    if why:
        return [Range(0, n, 0, size, 0, 0, why)]  # as if no later nominal range had a boundary
    starts = [b for _, b in bounds] + [size]
    lines = _lines_before(path, starts[:-1]) if fmt in TEXT_FORMATS else [0] * len(bounds)
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
# offsets inside reject details that are the file's (others, such as binpack's "movetext overrun at
# byte N", are relative to a block and stay as they are)
_DETAIL = {"plain": re.compile(r"^(line) (\d+)"), "viriformat": re.compile(r"(?<=at )(byte) (\d+)")}


class Rebase:
    """Turn a range reader's locations ("line N ...", "byte N ...") into the file's."""

    def __init__(self, fmt: str, rng: Range):
        self.line, self.byte = rng.line, rng.start
        self.detail = _DETAIL.get(fmt)

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
def _read_at(path: Path, start: int, n: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(n)


def _fixed_games(module_name: str, size_rec: int):
    """.bin / marlinformat: a record boundary where the reader starts a new game."""

    def make(path: Path, size: int):
        import importlib

        from .formats import Record
        from .formats._binary import game_boundary

        decode = importlib.import_module(f"nnue.pipeline.formats.{module_name}").decode_record
        whole = size - size % size_rec  # a trailing partial record is never a range's start

        def find(lo: int, hi: int):
            j = -(-lo // size_rec)
            limit = min(hi, lo + SEARCH_BYTES, whole)
            while j * size_rec < limit:
                count = min(4096, -(-(limit - j * size_rec) // size_rec))  # records starting before limit
                data = _read_at(path, (j - 1) * size_rec, (count + 1) * size_rec)
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


def _any_record(size_rec: int):
    def make(path: Path, size: int):
        whole = size - size % size_rec

        def find(lo: int, hi: int):
            b = -(-lo // size_rec) * size_rec
            return b if b < min(hi, whole) else None

        return find

    return make


def _binpack(path: Path, size: int):
    from .formats.binpack import MAX_BLOCK

    blocks = []
    with open(path, "rb") as f:
        pos = 0
        while pos + 8 <= size:
            f.seek(pos)
            h = f.read(8)
            n = int.from_bytes(h[4:], "little")
            if h[:4] != b"BINP" or n > MAX_BLOCK or pos + 8 + n > size:
                break
            blocks.append(pos)
            pos += 8 + n
    starts = np.array(blocks, np.int64)

    def find(lo: int, hi: int):
        k = int(np.searchsorted(starts, lo))
        return int(starts[k]) if k < len(starts) and starts[k] < hi else None

    return find


def _viri_starts(path: Path, size: int) -> np.ndarray:
    from .compiled.ranges import viri_game_starts

    if size < 4:
        return np.zeros(0, np.int64)
    words = np.memmap(path, dtype="<u4", mode="r", shape=(size // 4,))
    return viri_game_starts(words, size)


def _viriformat(path: Path, size: int):
    starts = _viri_starts(path, size)

    def find(lo: int, hi: int):
        k = int(np.searchsorted(starts, lo))
        return int(starts[k]) if k < len(starts) and starts[k] < hi else None

    return find


def _text(fmt: str, after_e: bool):
    """Text formats: parse windows of lines with the reader's reference path (no fast path) from a
    line where its state is the one-file reader's (any line; in .plain, the line after an ``e``),
    and cut before the first record B that follows a record A (both well-formed) in a new game."""

    def make(path: Path, size: int):
        from .formats import FormatError, ReaderOptions, Record, UTF8_BOM, get_format

        spec = get_format(fmt)

        def find(lo: int, hi: int):
            pos = lo  # look at lines starting at or after pos
            limit = min(hi, lo + SEARCH_BYTES)
            window_bytes = TEXT_WINDOW_FIRST
            while pos < limit:
                base = pos - 1
                data = _read_at(path, base, min(window_bytes, size - base))
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
                    items = list(spec.read(io.TextIOWrapper(io.BytesIO(window), encoding="utf-8",
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
                        if _read_at(path, cut, 3) != UTF8_BOM:
                            return cut
                # go on from the third-last item (.plain: the "e" before the last pair's A)
                nxt = at(items[-3]) if len(items) >= 3 else base + end
                pos = nxt if nxt > pos else base + end
            return None

        return find

    return make


PGN_CHECK_GAMES = 1000  # most suspect games (a ")", a long NAG) read by python-chess before a PGN file is split


def _pgn(path: Path, size: int):
    """PGN: a game start of the walk (module docstring); ``find.games(offset)`` the games before
    it, ``find.why_whole()`` None when the walk is python-chess's splitting up to the last range,
    else why the file must be one range."""
    import chess.pgn

    from .compiled.ranges import NAG_DIGITS, pgn_game_starts
    from .formats.pgn import _Source

    data = np.memmap(path, dtype=np.uint8, mode="r", shape=(size,)) if size else np.zeros(0, np.uint8)
    starts, suspect = pgn_game_starts(data)
    used = [0]  # the last start a range was given

    def find(lo: int, hi: int):
        k = int(np.searchsorted(starts, lo))
        if k < len(starts) and starts[k] < hi:
            used[0] = max(used[0], k)
            return int(starts[k])
        return None

    def games(offset: int) -> int:
        return int(np.searchsorted(starts, offset))

    def why_whole() -> str | None:
        """None when no game before the last range's start makes read_game raise (each suspect
        game is read by python-chess from its start to the next game's, as in the whole file),
        else why the file must be one range."""
        flagged = np.flatnonzero(suspect[:used[0]])
        if len(flagged) > PGN_CHECK_GAMES:
            return (f"{len(flagged)} games with a ')' or a NAG of {NAG_DIGITS}+ digits, more than the "
                    f"{PGN_CHECK_GAMES} that are read with python-chess before a file is split")
        logging.getLogger("chess.pgn").setLevel(logging.CRITICAL)
        for k in flagged:
            src = _Source(None, bytes(data[starts[k]:starts[k + 1]]))
            try:
                chess.pgn.read_game(src)
            except Exception as e:  # noqa: BLE001 - as formats.pgn._one_game catches it
                return (f"python-chess's read_game raises {type(e).__name__} on the game at byte {int(starts[k])} "
                        f"and then reads on mid-game, so where the later games start is known only by reading "
                        f"the file in order")
        return None

    find.games, find.why_whole = games, why_whole
    return find


TEXT_FORMATS = ("plain", "bullet-text", "epd", "pgn")
FINDERS = {
    "plain": _text("plain", after_e=True),
    "bullet-text": _text("bullet-text", after_e=False),
    "epd": _text("epd", after_e=False),
    "bin": _fixed_games("sfbin", 40),
    "marlinformat": _fixed_games("marlinformat", 32),
    "bulletformat": _any_record(32),
    "binpack": _binpack,
    "viriformat": _viriformat,
    "pgn": _pgn,
}


def append_range(path: Path, fmt: str, start: int) -> tuple[Range, bool]:
    """The range of the bytes a file gained after its first ``start`` bytes were packed
    (``nnue pack`` of a grown input, issue 20 item 3), and whether ``start`` is where the format's
    reader would start a new game anyway (:data:`FINDERS`: then the appended rows are exactly those
    of a read of the whole file; else the first appended records continue a game of the earlier
    bytes and are packed as a game of their own). Lines and games before ``start`` are counted, so
    locations are the file's. Index 1 of 2: a range of its own, never the whole file."""
    path = Path(path)
    size = path.stat().st_size
    find = FINDERS[fmt](path, size)
    # the first boundary at or after start; the finders look at lines that start after ``lo`` and
    # (.plain, bullet text) need the record before a boundary, so the search starts a little before
    b, lo = None, max(1, start - 4096)
    while start < size and lo < size:
        b = find(lo, size)
        if b is None or b >= start:
            break
        lo = b + 1
    # a boundary at start, or after nothing but blank space (which every reader skips)
    boundary = b is not None and (b == start or not _read_at(path, start, b - start).strip())
    if boundary and getattr(find, "why_whole", None) is not None and find.why_whole():
        boundary = False  # PGN: the walk may not follow python-chess up to here
    line = _lines_before(path, [start])[0] if fmt in TEXT_FORMATS else 0
    game = getattr(find, "games", lambda off: 0)(start)
    return Range(1, 2, start, size, line, game), boundary
