"""The record types of the dump readers, and how a dump is opened: the leaf of the data path.

:class:`Record`, :class:`Reject` and :class:`PackedRows` are what a reader yields;
:class:`ReaderOptions` what it is given; :class:`FormatSpec` what a format module exports (the
registry is :mod:`nnue.pipeline.formats`); :func:`open_text` and :func:`open_binary` open a dump,
compressed or not. This module imports neither the format modules nor the compiled package, so
that ``formats -> compiled -> records`` is one-way (issue 22). Facts about each format:
``../shared/FORMATS.md``.
"""
from __future__ import annotations

import bz2
import codecs
import gzip
import io
import lzma
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Callable, Iterator

from .constants import MATE, MATE_BOUND, VALUE_NONE  # noqa: F401  (one copy: nnue.pipeline.constants; re-exported)

UTF8_BOM = b"\xef\xbb\xbf"  # one leading byte-order mark is stripped from every text input

# PGN's own standard (section 4.1) allows ISO 8859-1 text: a PGN input is read as UTF-8, and the
# bytes that are not UTF-8 (a Latin-1 "é" in a player's name or a comment) are decoded as Latin-1
# by this codecs error handler, which counts them (LATIN1_BYTES[0], per process)
LATIN1_ERRORS = "nnue-latin1"
LATIN1_BYTES = [0]


def _latin1_fallback(e: UnicodeError):
    if not isinstance(e, UnicodeDecodeError):
        raise e
    bad = bytes(e.object[e.start:e.end])
    LATIN1_BYTES[0] += len(bad)
    return bad.decode("latin-1"), e.end


codecs.register_error(LATIN1_ERRORS, _latin1_fallback)


class FormatError(ValueError):
    """A file is not in the format it was read as. The message names file, location, format."""


@dataclass(slots=True)
class Record:
    """One position as read from a dump, before validation.

    fen: FEN or X-FEN/Shredder-FEN, 4 to 6 fields. score: int, side-to-move POV, in the
    source's score unit; None when the source has no score (VALUE_NONE). score_is_mate: the
    score is a mate score. result: -1/0/+1 side-to-move POV, None when unknown. ply: game ply
    (0 = white's first move of the game), None when unknown. move: best/played move, UCI,
    None when absent. location: "line N" or "byte N". game: game ordinal within the file.
    board: an already-built chess.Board (readers that replay moves), or None.
    """

    fen: str
    score: int | None
    result: int | None
    ply: int | None
    move: str | None
    location: str
    game: int
    score_is_mate: bool = False
    board: object | None = field(default=None, repr=False)


@dataclass(slots=True)
class Reject:
    """A record that could not be read.

    location: "line N"/"byte N"; reason: a short fixed category, the key rejects are counted
    by; detail: what exactly was wrong; raw: the record's text, for the rejects file.
    """

    location: str
    reason: str
    detail: str = ""
    raw: str = ""


@dataclass
class PackedRows:
    """A run of consecutive records that a reader validated in bulk (fixed-record formats),
    already in dataset form. board: (n, 32) uint8 marlinformat, eval field = score white POV
    (0 when none); score: (n,) int16 stm POV (0 when none); result: (n,) int8 stm POV; ply:
    (n,) uint16; piece_count: (n,) uint8; in_check: (n,) bool; game: (n,) int64 game ordinals;
    flags: (n,) uint8 (schema FLAG_*); first: location of the first record ("byte N");
    locations: each record's location (text formats, whose records are not evenly spaced), or
    None (fixed-size records: ``first`` plus 32 bytes a record). best_move, best_move_is_capture,
    has_move: the schema's move columns where ``has_move`` (text formats with moves), or None
    (null columns)."""

    board: object
    score: object
    result: object
    ply: object
    piece_count: object
    in_check: object
    game: object
    flags: object
    first: str = ""
    locations: list | None = None
    best_move: object = None             # (n,) uint16 where has_move, else None (no moves)
    best_move_is_capture: object = None  # (n,) bool
    has_move: object = None              # (n,) bool: the record had a move
    # (king's two-square step e1g1, king takes rook e1h1): the run's castling moves by how the
    # input spelled them (.plain; the manifest's "castling"), or None (none)
    castling: tuple | None = None

    def __len__(self) -> int:
        return len(self.score)


@dataclass(frozen=True)
class ReaderOptions:
    """Per-run reader options. pgn_pov: POV of PGN eval comments, "mover" (cutechess,
    fastchess) or "white" (python-chess, lichess). first_game: the ordinal of the stream's first
    PGN game (a byte range of a file starts at its ``Range.game``: the games before it), so that
    locations number the file's games; only game 0 is checked for "not PGN at all"."""

    pgn_pov: str = "mover"
    fast: bool = True  # compiled/bulk paths (PackedRows: binary formats, .plain, bullet text, EPD); False: one by one
    first_game: int = 0


@dataclass(frozen=True)
class FormatSpec:
    """One dump format, complete: everything the pipeline needs from it (issue 22 item 1).

    name: the ``--format`` name. read: ``(stream, options) -> Iterator[Record | Reject |
    PackedRows]`` over a text stream, or a binary one when ``binary``. sniff: does this head (str,
    the first 4 KiB decoded, for text formats; bytes for binary ones) look like the format?
    score_pov, result_pov, doc: facts for the manifest and the docs (FORMATS.md). extensions: the
    file suffixes that name it (``".plain"``; a suffix several formats claim is settled by
    :func:`nnue.pipeline.formats.detect_format`). record_size: bytes per record of fixed-record
    formats (None otherwise). errors: how a text input's bytes that are not UTF-8 are decoded
    (``"replace"``: U+FFFD, which the head check refuses; PGN: :data:`LATIN1_ERRORS`).
    find_ranges: ``(path, size) -> find(lo, hi) -> offset | None``, the boundary finder that lets
    one file be packed in byte ranges (:mod:`nnue.pipeline.ranges`), None when the format is never
    split; a finder may carry ``games(offset)`` and ``why_whole()`` (PGN). detail_offsets: a
    regex whose ``(line|byte) (digits)`` groups are file offsets inside reject details, rebased for a
    range (None: details hold none). compiled: ``() -> module``, the numba fast path the reader
    uses with ``options.fast`` (None when there is none); a loader, not the module, because
    importing it loads numba (0.3 CPU s), which the CLI's parser must not. write: ``row ->
    bytes``, one dataset row in this format, or None when ``nnue convert`` cannot write it; a row
    is a dict of ``board`` (32 bytes), ``score`` (int, stm POV), ``score_none`` (bool), ``result``
    (-1/0/+1 stm POV), ``ply`` (int), ``best_move`` (packed u16 or None), ``castling`` (the
    manifest's record of the input's spelling, or None). write_block: optional bulk writer of a
    row group, ``(cols) -> (data, ends, fallback)`` (:mod:`nnue.pipeline.convert`), exact against
    ``write``. write_stream: for formats that chain a game's positions (binpack, viriformat),
    instead of ``write``: a factory of a writer with ``rows(cols) -> bytes`` per row group and
    ``finish() -> bytes`` (:class:`nnue.pipeline.formats._write.ChainWriter`).
    score_unit: the unit the format's scores are in unless ``--score-unit`` says
    otherwise (``cp``: UCI centipawns; ``sf-internal``: Stockfish's internal units, which its own
    generator writes into ``.bin`` and ``.binpack``).
    """

    name: str
    read: Callable[..., Iterator[Record | Reject | PackedRows]]
    sniff: Callable
    score_pov: str
    result_pov: str
    doc: str
    binary: bool = False
    record_size: int | None = None
    extensions: tuple[str, ...] = ()
    errors: str = "replace"
    find_ranges: Callable | None = None
    detail_offsets: str | None = None
    compiled: Callable[[], ModuleType] | None = None
    write: Callable[[dict], bytes] | None = None
    write_block: Callable | None = None
    write_stream: Callable | None = None
    score_unit: str = "cp"


class _ZstdReader(io.RawIOBase):
    """Decompress a ``.zst`` file frame by frame, raising ``zstandard.ZstdError`` when the file
    ends inside a frame (zstandard's ``stream_reader`` returns a cut file's bytes as if it were
    whole: an interrupted download would pack silently short)."""

    def __init__(self, path):
        import zstandard

        self._zstd = zstandard
        self._f = open(path, "rb")
        self._obj = zstandard.ZstdDecompressor().decompressobj()
        self._buf = b""
        self._in_frame = False

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self._buf:
            chunk = self._f.read(1 << 17)
            if not chunk:
                if self._in_frame:
                    raise self._zstd.ZstdError("file ends inside a zstd frame (truncated)")
                return 0
            while chunk:
                self._in_frame = True
                self._buf += self._obj.decompress(chunk)
                if self._obj.eof:  # frame complete; what follows is the next frame
                    chunk = self._obj.unused_data
                    self._obj = self._zstd.ZstdDecompressor().decompressobj()
                    self._in_frame = False
                else:
                    chunk = b""
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n

    def close(self):
        self._f.close()
        super().close()


def open_binary(path: str | Path) -> io.BufferedIOBase:
    """Open a dump as bytes, decompressing ``.gz``, ``.zst``, ``.xz`` and ``.bz2`` transparently."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".gz":
        return gzip.open(path, "rb")
    if suffix == ".xz":
        return lzma.open(path, "rb")
    if suffix == ".bz2":
        return bz2.open(path, "rb")
    if suffix == ".zst":
        return io.BufferedReader(_ZstdReader(path))
    return open(path, "rb")


def read_exact(stream, n: int) -> bytes:
    """Read up to n bytes, looping over short reads of decompressing streams."""
    out = bytearray()
    while len(out) < n:
        chunk = stream.read(n - len(out))
        if not chunk:
            break
        out += chunk
    return bytes(out)


def open_text(path: str | Path, errors: str = "replace") -> io.TextIOBase:
    """Open a dump as text, decompressing ``.gz``, ``.zst``, ``.xz`` and ``.bz2`` transparently.
    errors: how bytes that are not UTF-8 are decoded (``text_errors``)."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".gz":
        raw = gzip.open(path, "rb")
    elif suffix == ".xz":
        raw = lzma.open(path, "rb")
    elif suffix == ".bz2":
        raw = bz2.open(path, "rb")
    elif suffix == ".zst":
        raw = _ZstdReader(path)
    else:
        raw = open(path, "rb")
    # utf-8-sig: one leading UTF-8 byte-order mark (Windows editors, some GUIs) is dropped
    return io.TextIOWrapper(io.BufferedReader(raw) if suffix == ".zst" else raw,
                            encoding="utf-8-sig", errors=errors, newline=None)


def inner_name(path: str | Path) -> str:
    """File name without a compression suffix: ``a.plain.zst`` -> ``a.plain``."""
    p = Path(path)
    return p.stem if p.suffix.lower() in (".gz", ".zst", ".xz", ".bz2") else p.name


def parse_result_token(token: str) -> float | None:
    """Parse a white-POV game result: 1.0/0.5/0.0, 1, 1/2, 0, [1.0], 1-0, 0-1, 1/2-1/2, "1-0".

    Returns 1.0, 0.5 or 0.0, or None when the token is not a result.
    """
    t = token.strip().strip('";').strip("[]").strip()
    table = {"1": 1.0, "1.0": 1.0, "1-0": 1.0, "0.5": 0.5, "1/2": 0.5, "1/2-1/2": 0.5,
             "0": 0.0, "0.0": 0.0, "0-1": 0.0, ".5": 0.5}
    return table.get(t)
