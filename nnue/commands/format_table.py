"""The format registry's names, for the parser: ``nnue pack --format`` choices and extensions,
``nnue convert --to`` choices. Standard library only.

The registry itself (:mod:`nnue.pipeline.formats`) imports every format module, and with them numpy
and python-chess: 0.3 CPU s, against 0.08 s for any other ``--help`` (bench/results/cli_cpu.json).
So its names are shipped in ``format_table.json`` beside this module, with the digest of the
sources they come from (:func:`sources_digest`: ``pipeline/formats/*.py`` and ``pipeline/records.py``).
:func:`table` answers from, in order: the registry when it is imported already (a format a test
registered at run time is then seen), the shipped table when its digest matches the sources, the
registry imported now. ``python scripts/gen_docs.py`` rewrites the table when it is stale;
``tests/test_docs.py`` fails while it is.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path

from nnue.pipeline.atomic import atomic_write_bytes  # standard library only

SHIPPED = Path(__file__).with_name("format_table.json")


def _pipeline() -> Path:
    """The ``nnue.pipeline`` package's folder, found through its spec (nothing imported)."""
    return Path(list(importlib.util.find_spec("nnue.pipeline").submodule_search_locations)[0])


def sources_digest() -> str:
    """sha256 (hex) of the sources of the format registry's names: every ``pipeline/formats/*.py``
    and ``pipeline/records.py`` (file name and bytes, in sorted order)."""
    root = _pipeline()
    h = hashlib.sha256()
    for f in sorted((root / "formats").glob("*.py")) + [root / "records.py"]:
        h.update(f"{f.relative_to(root).as_posix()}\n".encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def live_table() -> dict:
    """The table from the registry itself (imports it: numpy and python-chess)."""
    from nnue.pipeline import formats

    return {"names": formats.names(), "writers": formats.writer_names(), "extensions": sorted(formats.EXTENSIONS)}


def shipped_table() -> dict | None:
    """The shipped table when its digest matches the sources, else None."""
    try:
        shipped = json.loads(SHIPPED.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(shipped, dict) or shipped.get("digest") != sources_digest():
        return None
    return {k: shipped[k] for k in ("names", "writers", "extensions")}


def table() -> dict:
    """``{"names": [...], "writers": [...], "extensions": [...]}`` of the format registry (module
    docstring: the live registry if imported, else the shipped table if current, else the registry)."""
    if not _registry_imported() and (shipped := shipped_table()) is not None:
        return shipped
    return live_table()


def _registry_imported() -> bool:
    return "nnue.pipeline.formats" in sys.modules


def write() -> None:
    """Rewrite the shipped table from the registry (atomically: a temporary file, then a rename)."""
    text = json.dumps({"digest": sources_digest(), **live_table()}, indent=1) + "\n"
    atomic_write_bytes(SHIPPED, text.encode("utf-8"))
