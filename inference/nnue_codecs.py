"""Which Stockfish ``.nnue`` file versions we read: one codec per version, asked by the file's
first four bytes (the little-endian u32 version every Stockfish net starts with).

:func:`check_nnue_file` decodes a file with the codec of its version (every check that codec
makes: hashes, sizes, the end of the file) and says what it is, or raises
:class:`~nnue.inference.net.NetFormatError` naming the file and the reason: no such file, too
short to hold a version, or the codec's own reason. A version no codec reads is not an error
here (another engine may load it): the answer says so, naming the versions we read
(:func:`versions_read`), so that a caller can add it to what the engine said.

A new ``.nnue`` version is one entry of :data:`CODECS` (its ``decode`` raises NetFormatError on a
bad file) plus its tests; :func:`register` adds one for the duration of a ``with`` block.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from nnue.spec.registry import registered

from . import sfnnue
from .net import NetFormatError


@dataclass(frozen=True)
class NnueCodec:
    """A ``.nnue`` version we read. ``decode(path, data)`` checks the whole file and returns a
    dict (at least ``description``); it raises NetFormatError naming the byte offset and field."""

    version: int
    engine: str  # whose nets these are, e.g. "Stockfish 15.1"
    decode: Callable[[Path, bytes], dict]

    @property
    def name(self) -> int:  # the registry key (nnue.spec.registry)
        return self.version


#: version -> codec. Stockfish 15.1's SFNNv5 nets (:mod:`nnue.inference.sfnnue`).
CODECS: dict[int, NnueCodec] = {sfnnue.VERSION: NnueCodec(sfnnue.VERSION, "Stockfish 15.1", sfnnue.parse_nnue)}


def register(codec: NnueCodec):
    """Add ``codec`` to :data:`CODECS` for a ``with`` block (tests). ValueError if its version is taken."""
    return registered(CODECS, codec, ".nnue version")


def versions_read() -> str:
    """The versions we read, for messages: ``0x7AF32F20 (Stockfish 15.1)``, comma-separated."""
    return ", ".join(f"0x{v:08X} ({c.engine})" for v, c in sorted(CODECS.items()))


def check_nnue_file(path: str | Path) -> dict:
    """Check a ``.nnue`` file with the codec of its version.

    Returns ``{"version": int, "codec": NnueCodec | None, "description": str | None}``; codec
    None: a version none of :data:`CODECS` reads (the file is not decoded). Raises
    NetFormatError naming the file: it does not exist, is a folder, cannot be read, is shorter
    than the 4-byte version, or its codec refuses it (truncated, another architecture, ...)."""
    p = Path(path)
    if not p.exists():
        raise NetFormatError(f"{p}: no such file")
    if p.is_dir():
        raise NetFormatError(f"{p}: a folder, not a .nnue file")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise NetFormatError(f"{p}: cannot read: {e.strerror or e}") from None
    if len(data) < 4:
        raise NetFormatError(f"{p}: {len(data)} byte(s), too short for a .nnue file (a 4-byte version first; "
                             f"we read {versions_read()})")
    version = struct.unpack("<I", data[:4])[0]
    codec = CODECS.get(version)
    if codec is None:
        return {"version": version, "codec": None, "description": None}
    out = codec.decode(p, data)
    return {"version": version, "codec": codec, "description": out.get("description")}
