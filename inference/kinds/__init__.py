"""The net-kind registry of inference: one module (or small package) per kind, each exporting
``KIND`` (an :class:`~.spec.InferenceKind`), collected in :data:`KINDS` by plain imports.

Adding a kind: a module here (its integer net class, evaluator, arch builder, summary line and
whatever engine files, trace or export-net layouts it has), its line below, the trainer's module
under :mod:`nnue.trainer.kinds`, and its tests (docs/extending.md). Nothing outside the kinds
branches on a kind's name: the rest of inference and the commands ask this registry.
"""
from __future__ import annotations

import struct
from pathlib import Path

from nnue.spec.registry import registered

from ..net import NetFormatError
from . import deep, perspective, sfnnv5, sfnnv16, tiny
from .spec import EngineFile, InferenceKind

KINDS: dict[str, InferenceKind] = {k.name: k for k in (perspective.KIND, deep.KIND, tiny.KIND, sfnnv5.KIND, sfnnv16.KIND)}
#: the kind of a net whose header names none (nets written before kinds existed)
DEFAULT = perspective.KIND.name


def register(kind: InferenceKind):
    """Add ``kind`` to :data:`KINDS` for the duration of a ``with`` block (tests: the toy
    extensions). Raises ValueError if its name is taken."""
    return registered(KINDS, kind, "net kind")


def get(kind) -> InferenceKind:
    """The entry of ``kind``. Raises ValueError naming the known kinds."""
    try:
        return KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"net kind {kind!r}: one of {', '.join(KINDS)}") from None


def of(net) -> InferenceKind:
    """The entry of a loaded integer net's kind."""
    return get(net.kind)


def c_args(arch: dict) -> list[str]:
    """The C reference's arguments (after the net file) for a net's ``architecture`` object (and
    ``--residual BASE ALPHA_NUM ALPHA_SHIFT`` for a residual net). Raises ValueError for a kind
    the C reference does not evaluate."""
    entry = get(arch.get("kind", "perspective"))
    if entry.c_args is None:
        raise ValueError(f"the C reference has no net kind {entry.name!r}")
    out = entry.c_args(arch)
    r = arch.get("residual")
    if r is not None:
        out += ["--residual", r["base"], str(r["alpha_num"]), str(r["alpha_shift"])]
    return out


def with_trace() -> list[str]:
    """The kinds with an eval trace (``nnue eval --trace``)."""
    return [k.name for k in KINDS.values() if k.trace is not None]


def target(name: str):
    """The ``nnue export-net --to`` writer ``(net, path) -> dict`` named ``name`` (one kind's
    layout). Raises ValueError naming every kind's layouts for an unknown name."""
    for k in KINDS.values():
        if name in k.targets:
            return k.targets[name]
    known = ", ".join(f"{t} ({k.name} nets)" for k in KINDS.values() for t in k.targets)
    raise ValueError(f"--to {name}: no such layout; one of {known}")


def engine_suffixes() -> set[str]:
    """The file suffixes of the engine files the kinds read (".nnue")."""
    return {k.engine_reader.suffix for k in KINDS.values() if k.engine_reader is not None}


def engine_reader_of(path, data: bytes) -> "EngineFile | None":
    """The :class:`~.spec.EngineFile` that reads an engine's net file: the kind's reader with the
    file's suffix and the version at byte 0 of ``data`` (at least 4 bytes), None when no kind
    reads that version (another engine may: ``nnue match`` passes such a file on)."""
    version = struct.unpack("<I", data[:4])[0]
    return next((k.engine_reader for k in KINDS.values() if k.engine_reader is not None
                 and k.engine_reader.suffix == Path(path).suffix and k.engine_reader.version == version), None)


def engine_versions(suffix: str) -> str:
    """The versions of ``suffix`` files the kinds read, for messages:
    ``0x7AF32F20 (Stockfish 15.1 .nnue, kind sfnnv5), ...``."""
    return ", ".join(f"0x{r.version:08X} ({r.name}, kind {k.name})" for k in KINDS.values()
                     if (r := k.engine_reader) is not None and r.suffix == suffix)


def read_engine_file(path, data: bytes | None = None):
    """The integer net of an engine's own net file (a Stockfish ``.nnue``): the kind whose
    :class:`~.spec.EngineFile` has the file's suffix and the version at byte 0 reads it
    (``data``: the file's bytes, or None to read ``path``). Raises
    :class:`~nnue.inference.net.NetFormatError` naming the file and the reason: unreadable,
    another version (naming the ones this build reads), or what the kind's reader finds."""
    path = Path(path)
    if data is None:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise NetFormatError(f"{path}: cannot read: {e.strerror or e}") from None
    readers = [k.engine_reader for k in KINDS.values() if k.engine_reader is not None
               and k.engine_reader.suffix == path.suffix]
    if len(data) < 4:
        if not readers:
            raise NetFormatError(f"{path}: not a net file this build reads")
        return readers[0].read(path, data)  # the reader names the truncation
    reader = engine_reader_of(path, data)
    if reader is not None:
        return reader.read(path, data)
    if len(readers) == 1:  # one kind reads this suffix: its reader words the refusal (it knows the versions)
        return readers[0].read(path, data)
    known = engine_versions(path.suffix)
    raise NetFormatError(f"{path}: byte 0: version 0x{struct.unpack('<I', data[:4])[0]:08X} is not one this build "
                         "reads" + (f" ({known})" if known else ""))
