"""Load the integer net a command names: ``net.safetensors``, the NETDIR holding it, or a Stockfish
``.nnue`` file of a version nnue-forge reads (``nnue eval``, ``nnue export-net``)."""
from __future__ import annotations

from pathlib import Path

from nnue.inference import load
from nnue.inference.stockfish_files import read_nnue


def load_any(path) -> object:
    """An integer net from ``net.safetensors``, a NETDIR holding it, or a Stockfish ``.nnue``
    file. Raises ValueError / NetFormatError naming the path."""
    p = Path(path)
    if p.is_dir():
        if not (p / "net.safetensors").is_file():
            raise ValueError(f"{p}: a folder without net.safetensors; give NETDIR/net.safetensors")
        p = p / "net.safetensors"
    elif not p.exists():
        raise ValueError(f"{p}: no such net file")
    if p.suffix == ".nnue":
        return read_nnue(p)
    return load(p)
