"""Stockfish ``.nnue`` files by version: which codec reads a file, and which net kind turns it
into our integer net (the hook a kind fills in).

A ``.nnue`` file starts with a u32 version (little-endian); each version we read is one
:class:`NnueFormat` in :data:`FORMATS`. :func:`format_of` picks the entry from the first four
bytes (another version is refused naming the ones we read), :func:`read_nnue` parses and checks
the whole file with the entry's codec, then builds the integer net with the entry's ``reader``.

A net kind plugs in by naming, in its entry, ``reader`` (``"module:function"``, ``(path, data)
-> integer net``, whose ``raw_bytes()`` writes the same ``.nnue`` back) and ``checkpoint``
(``"module:function"``, ``net -> (float state dict, hparams)``: what ``nnue import-net`` writes as
``checkpoint.safetensors``; a trainer function, imported only by that command). Until then the
entry's ``reader`` is None: the file is still parsed and every check made, then refused with a
one-line "not yet".
"""
from __future__ import annotations

import importlib
import struct
from dataclasses import dataclass
from pathlib import Path

from .net import NetFormatError
from .sfnnue import read_bytes


def _load(ref: str):
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class NnueFormat:
    """One ``.nnue`` version: ``engine`` and ``architecture`` (how errors and reports name it),
    ``kind`` (our net kind that holds such a net), ``engine_l1`` (the L1 the engine is built for:
    other widths round-trip here but the engine refuses them), ``codec`` (a module with
    ``parse_nnue(path, data) -> dict`` making every check of the file), and the kind's hooks
    ``reader`` and ``checkpoint`` (module docstring), None until the kind exists."""

    version: int
    engine: str
    architecture: str
    kind: str
    engine_l1: int
    codec: str
    reader: str | None = None
    checkpoint: str | None = None

    @property
    def name(self) -> str:
        return f"{self.engine} ({self.architecture}, version 0x{self.version:08X})"

    def parse(self, path, data: bytes | None = None) -> dict:
        """The codec's :func:`parse_nnue`: the tensors and header fields, every check made."""
        return importlib.import_module(self.codec).parse_nnue(path, data)

    def read(self, path, data: bytes | None = None):
        """The integer net of the file (parsed and checked first). NetFormatError "not yet" when
        no kind reads this version."""
        if self.reader is None:
            p = self.parse(path, data)  # bad input is named as such, before "not yet"
            raise NetFormatError(f"{path}: a {self.name} net (L1 {p['l1']}; version, hashes, sizes and every block "
                                 f"checked): nnue-forge cannot evaluate or import it yet (net kind {self.kind!r} "
                                 "not in this version)")
        return _load(self.reader)(path, data)

    def float_checkpoint(self, net) -> tuple[dict, dict]:
        """``(float state dict, hparams)`` of an integer net of this format (the kind's
        ``checkpoint`` hook). NetFormatError when the kind gives none."""
        if self.checkpoint is None:
            raise NetFormatError(f"a {self.name} net: net kind {self.kind!r} has no float checkpoint yet")
        return _load(self.checkpoint)(net)


FORMATS: dict[int, NnueFormat] = {f.version: f for f in (
    NnueFormat(0x7AF32F20, "Stockfish 15.1", "SFNNv5", "sfnnv5", 1024, "nnue.inference.sfnnue",
               reader="nnue.inference.sfnnv5:read_nnue", checkpoint="nnue.trainer.kinds.sfnnv5:imported_checkpoint"),
    NnueFormat(0x6A448AFA, "Stockfish 19", "SFNNv16", "sfnnv16", 1024, "nnue.inference.sfnnue19",
               reader="nnue.inference.sfnnv16:read_nnue", checkpoint="nnue.trainer.kinds.sfnnv16:imported_checkpoint"),
)}


def format_of(path, data: bytes | None = None) -> NnueFormat:
    """The entry of a ``.nnue`` file's version (its first 4 bytes: ``data``, or read from
    ``path``). Raises NetFormatError naming the version read and the ones we read."""
    if data is None:
        try:
            with open(path, "rb") as f:
                data = f.read(4)
        except OSError as e:
            raise NetFormatError(f"{path}: cannot read: {e.strerror or e}") from None
    if len(data) < 4:
        raise NetFormatError(f"{path}: {len(data)} bytes: too short for a .nnue file (a u32 version first)")
    version = struct.unpack_from("<I", data)[0]
    if version not in FORMATS:
        known = ", ".join(f.name for f in FORMATS.values())
        raise NetFormatError(f"{path}: byte 0: version 0x{version:08X} is not a .nnue version nnue-forge reads "
                             f"({known})")
    return FORMATS[version]


def read_nnue(path: str | Path, data: bytes | None = None):
    """The integer net of a Stockfish ``.nnue`` file of any version in :data:`FORMATS` (every
    check of its codec made). Raises NetFormatError, one line naming the file, the field and its
    byte offset; or "not yet" for a version no net kind reads."""
    path = Path(path)
    if data is None:
        data = read_bytes(path)
    return format_of(path, data).read(path, data)
