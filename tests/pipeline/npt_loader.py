"""nnue-pytorch's C++ data loader (``libtraining_data_loader.so``), driven through ctypes as its own
Python binding drives it, to read a ``.binpack`` the way Stockfish's trainer does (tests only).

Where the library is: the setting ``NNUE_PYTORCH_LOADER`` (its path), else ``$NPA/src/`` (the
folder ``../shared/anchors/nnue-pytorch/setup.sh`` builds it in), else ``../npa/src/`` beside the
repository, else the cache path ``~/.cache/nnue-forge/nnue-pytorch/libtraining_data_loader.so``.
:func:`find` returns None when none holds it, and the tests skip, saying so.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

from tests.features.npt_loader import _SparseBatch as _Sparse
from tests.features.npt_loader import loader_path

NAME = "libtraining_data_loader.so"
CACHE = Path.home() / ".cache" / "nnue-forge" / "nnue-pytorch" / NAME


def find() -> Path | None:
    """The loader: where tests/features/npt_loader.py looks (``NNUE_PYTORCH_LOADER``,
    ``$NPA/src``, ``../npa/src``), else the cache path; None when none holds it."""
    return loader_path() or (CACHE if CACHE.is_file() else None)


def why_absent() -> str:
    return ("nnue-pytorch's C++ data loader is not built here: set NNUE_PYTORCH_LOADER to its "
            f"{NAME}, or NPA to the folder ../shared/anchors/nnue-pytorch/setup.sh built it in, or build it in "
            f"../npa, or put it at {CACHE}")


class _Skip(ctypes.Structure):  # DataloaderSkipConfig, every filter off
    _fields_ = [("filtered", ctypes.c_bool), ("random_fen_skipping", ctypes.c_int), ("wld_filtered", ctypes.c_bool),
                ("early_fen_skipping", ctypes.c_int), ("soft_early_fen_skipping", ctypes.c_int),
                ("simple_eval_skipping", ctypes.c_int), ("param_index", ctypes.c_int)] + \
               [(f"pc_y{i}", ctypes.c_double) for i in range(5)] + \
               [(f"ply_{a}{i}", ctypes.c_double) for i in range(1, 5) for a in ("x", "y")]


class _DDP(ctypes.Structure):
    _fields_ = [("rank", ctypes.c_int), ("world_size", ctypes.c_int)]


class _Fen(ctypes.Structure):
    _fields_ = [("size", ctypes.c_int), ("fen", ctypes.c_char_p)]


class _FenBatch(ctypes.Structure):
    _fields_ = [("size", ctypes.c_int), ("fens", ctypes.POINTER(_Fen))]


def _lib(path: Path):
    dll = ctypes.cdll.LoadLibrary(str(path))
    files = ctypes.POINTER(ctypes.c_char_p)
    dll.create_fen_batch_stream.restype = ctypes.c_void_p
    dll.create_fen_batch_stream.argtypes = [ctypes.c_int, ctypes.c_int, files, ctypes.c_int, ctypes.c_bool, _Skip, _DDP]
    dll.fetch_next_fen_batch.restype = ctypes.POINTER(_FenBatch)
    dll.fetch_next_fen_batch.argtypes = [ctypes.c_void_p]
    dll.destroy_fen_batch.argtypes = [ctypes.POINTER(_FenBatch)]
    dll.destroy_fen_batch_stream.argtypes = [ctypes.c_void_p]
    dll.create_sparse_batch_stream.restype = ctypes.c_void_p
    dll.create_sparse_batch_stream.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, files, ctypes.c_int,
                                               ctypes.c_bool, _Skip, _DDP]
    dll.fetch_next_sparse_batch.restype = ctypes.POINTER(_Sparse)
    dll.fetch_next_sparse_batch.argtypes = [ctypes.c_void_p]
    dll.destroy_sparse_batch.argtypes = [ctypes.POINTER(_Sparse)]
    dll.destroy_sparse_batch_stream.argtypes = [ctypes.c_void_p]
    return dll


def _args(binpack: Path):
    names = (ctypes.c_char_p * 1)(str(binpack).encode())
    return names, _Skip(False, 0, False, -1, 0, -1, 0, *([1.0] * 5), *([0.0] * 8)), _DDP(0, 1)


def read(lib: Path, binpack: Path, batch: int = 4096) -> tuple[list[str], list[float], list[float], list[float]]:
    """Every position of ``binpack`` as the C++ loader reads it, in file order (one thread, no
    filters): (FENs, scores (stm POV), outcomes (0, 0.5, 1, stm POV), is_white (1.0 white to move))."""
    dll = _lib(lib)
    names, skip, ddp = _args(binpack)
    fens = []
    s = dll.create_fen_batch_stream(1, 1, names, batch, False, skip, ddp)
    try:
        while True:
            b = dll.fetch_next_fen_batch(s)
            if not b:
                break
            fens += [b.contents.fens[i].fen.decode() for i in range(b.contents.size)]
            dll.destroy_fen_batch(b)
    finally:
        dll.destroy_fen_batch_stream(s)
    rows = stream_tuples(lib, binpack, batch)
    return fens, [r[3] for r in rows], [r[4] for r in rows], [r[2] for r in rows]


def _tuples(b) -> list[tuple]:
    """(white features, black features, is_white, score, outcome) of each position of a SparseBatch."""
    c = b.contents
    m = c.max_active_features
    out = []
    for i in range(c.size):
        w = tuple(sorted(x for x in c.white[i * m:(i + 1) * m] if x >= 0))
        k = tuple(sorted(x for x in c.black[i * m:(i + 1) * m] if x >= 0))
        out.append((w, k, c.is_white[i], c.score[i], c.outcome[i]))
    return out


def stream_tuples(lib: Path, binpack: Path, batch: int = 4096) -> list[tuple]:
    """:func:`_tuples` of every position the C++ loader reads from ``binpack`` (HalfKAv2_hm, no filters)."""
    dll = _lib(lib)
    names, skip, ddp = _args(binpack)
    out = []
    s = dll.create_sparse_batch_stream(b"HalfKAv2_hm", 1, 1, names, batch, False, skip, ddp)
    try:
        while True:
            b = dll.fetch_next_sparse_batch(s)
            if not b:
                break
            out += _tuples(b)
            dll.destroy_sparse_batch(b)
    finally:
        dll.destroy_sparse_batch_stream(s)
    return out


def fen_tuples(lib: Path, fens: list[str], scores: list[int], plies: list[int], results: list[int]) -> list[tuple]:
    """:func:`_tuples` of positions given as FENs with their score, ply and result (stm POV), made
    by the same C++ code (``get_sparse_batch_from_fens``)."""
    dll = _lib(lib)
    dll.get_sparse_batch_from_fens.restype = ctypes.POINTER(_Sparse)
    ints = ctypes.POINTER(ctypes.c_int)
    dll.get_sparse_batch_from_fens.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                                               ints, ints, ints]
    out = []
    for lo in range(0, len(fens), 4096):
        n = len(fens[lo:lo + 4096])
        arr = (ctypes.c_char_p * n)(*[f.encode() for f in fens[lo:lo + n]])
        mk = lambda xs: (ctypes.c_int * n)(*xs[lo:lo + n])  # noqa: E731
        b = dll.get_sparse_batch_from_fens(b"HalfKAv2_hm", n, arr, mk(scores), mk(plies), mk(results))
        out += _tuples(b)
        dll.destroy_sparse_batch(b)
    return out
