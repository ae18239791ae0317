"""The dump-format registry: one module per format, each exporting one complete ``SPEC``.

A format module (``plain``, ``pgn``, ...) exports a :class:`~nnue.pipeline.records.FormatSpec`
with everything the pipeline needs from it: name, extensions, sniff, reader, range finder,
compiled fast path and writer. :data:`FORMATS` lists them, and every table that used to be kept
apart is derived from it: the extensions (:data:`EXTENSIONS`), ``nnue pack --format`` and
``nnue convert --to`` choices (:func:`names`, :func:`writer_names`), the byte-range finders
(:mod:`nnue.pipeline.ranges`) and the writers (:mod:`nnue.pipeline.convert`). A format added at
run time (a test's toy format) goes through :func:`register`.

A reader is a function ``read(stream, options) -> Iterator[Record | Reject | PackedRows]`` over
an opened text or binary stream (compressed inputs are opened transparently by :func:`open_text`
and :func:`open_binary`; a byte range of a large file by :func:`nnue.pipeline.ranges.open_range`).
With ``options.fast`` the compiled core (:mod:`nnue.pipeline.compiled`) decodes and validates runs
of records into :class:`PackedRows`; the records it cannot settle exactly, and every record with
``fast=False``, come as :class:`Record` and are validated once, by :mod:`nnue.pipeline.pack`, with
python-chess. The record types live in the leaf module :mod:`nnue.pipeline.records` (re-exported
here), so that ``formats -> compiled -> records`` is one-way. Facts about each format:
``../shared/FORMATS.md``.

Importing this package loads python-chess and numpy, never torch, Lightning, pyarrow or numba
(the compiled fast paths are loaded by ``spec.compiled()`` when a reader first needs them), so
the CLI's parser takes its choices from here.
"""
from __future__ import annotations

from pathlib import Path

from ..records import (LATIN1_BYTES, LATIN1_ERRORS, MATE, MATE_BOUND, UTF8_BOM, VALUE_NONE,  # noqa: F401
                       FormatError, FormatSpec, PackedRows, ReaderOptions, Record, Reject, inner_name,
                       open_binary, open_text, parse_result_token, read_exact)
from . import binpack, bullet_text, bulletformat, epd, marlinformat, pgn, plain, sfbin, viriformat

# the registry, in the order text sniffing tries them and an extension several formats claim is
# settled (.bin: Stockfish .bin before viriformat); a new format is one line here
BUILTIN = (plain.SPEC, bullet_text.SPEC, pgn.SPEC, epd.SPEC, binpack.SPEC, sfbin.SPEC,
           bulletformat.SPEC, marlinformat.SPEC, viriformat.SPEC)

FORMATS: dict[str, FormatSpec] = {}
# suffix -> the formats that claim it, in registry order (derived from FORMATS by register)
EXTENSIONS: dict[str, tuple[str, ...]] = {}


def register(spec: FormatSpec) -> None:
    """Add ``spec`` to the registry (or replace the format of the same name) and re-derive
    :data:`EXTENSIONS`. Raises ValueError for a name that is also ``auto`` or an extension
    without its leading dot."""
    if spec.name == "auto" or any(not e.startswith(".") for e in spec.extensions):
        raise ValueError(f"format {spec.name!r}: the name 'auto' is taken and extensions start with '.'")
    FORMATS[spec.name] = spec
    _derive_extensions()


def unregister(name: str) -> None:
    """Remove a format added by :func:`register` (tests). KeyError when there is none."""
    del FORMATS[name]
    _derive_extensions()


def _derive_extensions() -> None:
    EXTENSIONS.clear()
    for s in FORMATS.values():
        for ext in s.extensions:
            EXTENSIONS[ext.lower()] = EXTENSIONS.get(ext.lower(), ()) + (s.name,)


for _spec in BUILTIN:
    register(_spec)


def names() -> list[str]:
    """The registered formats' names, in registry order: ``nnue pack --format`` choices (with
    ``auto``). Cheap: the CLI's parser calls it (no torch, pyarrow or numba)."""
    return list(FORMATS)


def writer_names() -> list[str]:
    """The formats ``nnue convert --to`` can write (``spec.write`` or ``spec.write_stream`` set),
    in registry order."""
    return [s.name for s in FORMATS.values() if s.write is not None or s.write_stream is not None]


def get_format(name: str) -> FormatSpec:
    """The spec of format ``name``. Raises FormatError naming the known formats."""
    if name not in FORMATS:
        raise FormatError(f"unknown format {name!r}; known: {', '.join(sorted(FORMATS))}")
    return FORMATS[name]


def text_errors(fmt: str) -> str:
    """The decoding ``errors`` of a text format's inputs (``spec.errors``): PGN's undecodable
    bytes are Latin-1 (LATIN1_ERRORS); the other text formats replace them (U+FFFD), and their
    head check refuses them."""
    return get_format(fmt).errors


def formats_for_extension(path: str | Path) -> tuple[str, ...]:
    """The formats a file's extension names (compression suffix ignored), in registry order;
    empty when none does."""
    return EXTENSIONS.get(Path(inner_name(path)).suffix.lower(), ())


def format_from_extension(path: str | Path) -> str | None:
    """The first format a file's extension names (compression suffix ignored; ``.bin``: ``bin``,
    which :func:`detect_format` may turn into viriformat), or None."""
    cands = formats_for_extension(path)
    return cands[0] if cands else None


def detect_format(path: str | Path) -> str:
    """Guess a file's format: ``BINP`` magic marks a binpack; then the extension; a ``.bin`` is
    Stockfish ``.bin`` when its size is a multiple of 40 and its first record decodes, else
    viriformat; otherwise text formats are recognised by the shape of their first lines.

    Raises FormatError naming the file when nothing matches.
    """
    cands = formats_for_extension(path)
    try:
        with open_binary(path) as f:
            head = read_exact(f, 4096)
    except Exception as e:  # OSError, EOFError, a corrupt compressed stream (zstd, lzma, zlib errors)
        if len(cands) == 1:
            return cands[0]  # unreadable here; the extension still names the format (pack then says why)
        raise FormatError(f"{path}: cannot read: {type(e).__name__}: {e}") from None
    if head.startswith(b"BINP"):
        return "binpack"
    if len(cands) > 1:  # .bin: Stockfish .bin when its records fit and the first decodes, else viriformat
        try:
            size = len(head) if len(head) < 4096 else _decompressed_size(path)
        except Exception as e:  # a corrupt compressed stream past the head
            raise FormatError(f"{path}: cannot read: {type(e).__name__}: {e}") from None
        for name in cands[:-1]:
            spec = FORMATS[name]
            if (spec.record_size is None or size % spec.record_size == 0) and spec.sniff(head):
                return name
        return cands[-1]
    if cands:
        return cands[0]
    for spec in FORMATS.values():
        if spec.binary:
            continue
        if spec.sniff(head.removeprefix(UTF8_BOM).decode("utf-8", errors="replace")):
            return spec.name
    raise FormatError(f"{path}: format not recognised from its extension or first lines; "
                      f"pass --format ({', '.join(sorted(FORMATS))})")


def _decompressed_size(path) -> int:
    n = 0
    with open_binary(path) as f:
        while chunk := f.read(1 << 20):
            n += len(chunk)
    return n
