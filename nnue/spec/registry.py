"""Adding an entry to a registry for the length of a ``with`` block: the one copy that the
activation, feature-set and net-kind registries share (tests register their toy extensions with it:
tests/test_toy_extensions.py). Standard library only."""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator


@contextlib.contextmanager
def registered(table: dict, entry, what: str, changed: Callable[[], None] | None = None) -> Iterator:
    """Add ``entry`` to ``table`` under ``entry.name`` for the duration of the ``with`` block, then
    remove it. what: the registry's word for an entry, for the error ("net kind"). changed: called
    after each change (a cache to clear). Raises ValueError, naming the entry, if the name is taken."""
    if entry.name in table:
        raise ValueError(f"{what} {entry.name!r} is already registered")
    table[entry.name] = entry
    if changed is not None:
        changed()
    try:
        yield entry
    finally:
        del table[entry.name]
        if changed is not None:
            changed()
