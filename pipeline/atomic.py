"""Atomic file writes: write a temporary file in the target folder, fsync, rename.

An interrupted write leaves the previous file (or none), never a half-written one under the
final name. Standard library only, so every package (inference included) can use it.
"""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically, with the permissions a plain ``open`` would give."""
    with atomic_writer(path) as f:
        f.write(data)


@contextmanager
def atomic_writer(path: str | Path):
    """``with atomic_writer(p) as f: f.write(...)``: a binary file that appears under ``path``
    only when the block ends without an exception (temporary file + fsync + rename). The folder
    must exist: FileNotFoundError (NotADirectoryError under a file) naming it, not the
    temporary file."""
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except (FileNotFoundError, NotADirectoryError) as e:  # name the folder, not the temporary file
        what = ("no such folder to write {} into; create it first" if isinstance(e, FileNotFoundError)
                else "not a folder (a path under a file): cannot write {} there")
        raise type(e)(f"{path.parent}: {what.format(path.name)}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
