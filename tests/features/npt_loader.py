"""nnue-pytorch's C++ data loader as an independent oracle of the SFNNv16 inputs, and the golden
fixture made with it (tests/data/features/sfnnv16_nnue_pytorch.npz).

The loader (``libtraining_data_loader.so``, built from nnue-pytorch's ``data_loader/cpp``) is
found through ``NNUE_PYTORCH_LOADER`` (the .so), else ``$NPA/src/`` (where
``anchors/nnue-pytorch/setup.sh`` builds it), else ``../npa/src/`` beside the repository. Its
``get_sparse_batch_from_fens(feature_set, n, fens, scores, plies, results)`` returns a
``SparseBatch`` whose ``white``/``black`` arrays hold each position's active features, −1 padded
(the struct layout is that of nnue-pytorch's ``data_loader/_native.py``). We ask for
``Full_Threats+PP_3Wide+HalfKAv2_hm``, the features of its default ``Full_Threats+PP_3Wide+HalfKAv2_hm^``
(the ``^`` only adds the factoriser's virtual rows in the Python model). Its HalfKAv2_hm part is
the 24,576-row training indexing (own king plane 10, other king plane 11); :func:`to_engine_index`
merges it into the engine's 22,528 rows as nnue-pytorch's export does (plane 11 -> 10).

The fixture: for every position of the self-play the repository ships
(``tests/data/selfplay/sf15-n2000-s11-cut.plain`` then ``sf15-960-xfen-s2.plain``, the "fen"
lines in file order, 17,264 positions, 4,586 of them Chess960, then the four constructed
positions of :data:`FIXTURE_EXTRA`), per perspective (white, black):
a 32-bit digest of the sorted engine-space index list (:func:`digest`) and the number of active
threats, pawn pairs and HalfKAv2_hm features. Made with
``python -m tests.features.npt_loader --write`` against nnue-pytorch commit 9f72946
(2026-07-26); the command prints what it wrote.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "data" / "features" / "sfnnv16_nnue_pytorch.npz"
FIXTURE_SOURCES = ("sf15-n2000-s11-cut.plain", "sf15-960-xfen-s2.plain")
FEATURES = "Full_Threats+PP_3Wide+HalfKAv2_hm"
NPT_COMMIT = "9f72946"
THREATS, PAIRS, PSQ = 59808, 4560, 22528
PP_BASE, PSQ_BASE = THREATS, THREATS + PAIRS


def loader_path() -> Path | None:
    """Where nnue-pytorch's loader is, or None (see the module docstring)."""
    env = os.environ.get("NNUE_PYTORCH_LOADER")
    cands = [Path(env)] if env else []
    if os.environ.get("NPA"):
        cands.append(Path(os.environ["NPA"]) / "src" / "libtraining_data_loader.so")
    cands.append(REPO.parent / "npa" / "src" / "libtraining_data_loader.so")
    return next((p for p in cands if p.is_file()), None)


class _SparseBatch(ctypes.Structure):
    _fields_ = [("num_inputs", ctypes.c_int), ("size", ctypes.c_int),
                ("is_white", ctypes.POINTER(ctypes.c_float)), ("outcome", ctypes.POINTER(ctypes.c_float)),
                ("score", ctypes.POINTER(ctypes.c_float)), ("num_active_white_features", ctypes.c_int),
                ("num_active_black_features", ctypes.c_int), ("max_active_features", ctypes.c_int),
                ("white", ctypes.POINTER(ctypes.c_int)), ("black", ctypes.POINTER(ctypes.c_int)),
                ("piece_count", ctypes.POINTER(ctypes.c_int))]


def load(path: Path):
    lib = ctypes.cdll.LoadLibrary(str(path))
    lib.get_sparse_batch_from_fens.restype = ctypes.POINTER(_SparseBatch)
    lib.get_sparse_batch_from_fens.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p),
                                               ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
                                               ctypes.POINTER(ctypes.c_int)]
    lib.destroy_sparse_batch.argtypes = [ctypes.c_void_p]
    return lib


def to_engine_index(v: np.ndarray) -> np.ndarray:
    """The loader's indices (threats, pawn pairs, then 24,576 HalfKAv2_hm training rows) -> the
    engine's (HalfKAv2_hm in 22,528 rows: plane 11, the other king, merged into plane 10)."""
    v = np.asarray(v, dtype=np.int64)
    j = v - PSQ_BASE
    bucket, r = j // 768, j % 768
    merged = PSQ_BASE + bucket * 704 + np.minimum(r // 64, 10) * 64 + r % 64
    return np.where(v >= PSQ_BASE, merged, v)


def loader_lists(lib, fens: list[str], batch: int = 4096) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per FEN, (white, black) engine-space index arrays, in the loader's order."""
    out = []
    for start in range(0, len(fens), batch):
        part = [f.encode() for f in fens[start:start + batch]]
        n = len(part)
        arr = (ctypes.c_char_p * n)(*part)
        zeros = (ctypes.c_int * n)()
        ptr = lib.get_sparse_batch_from_fens(FEATURES.encode(), n, arr, zeros, zeros, zeros)
        if not ptr:
            raise RuntimeError(f"nnue-pytorch's loader does not know {FEATURES}")
        try:
            sb = ptr.contents
            width = sb.max_active_features
            if sb.num_inputs != THREATS + PAIRS + 24576 or width != 288:
                raise RuntimeError(f"unexpected loader batch: {sb.num_inputs} inputs, {width} wide")
            w = np.ctypeslib.as_array(sb.white, shape=(n * width,)).reshape(n, width).copy()
            b = np.ctypeslib.as_array(sb.black, shape=(n * width,)).reshape(n, width).copy()
        finally:
            lib.destroy_sparse_batch(ptr)
        out += [(to_engine_index(w[i][w[i] >= 0]), to_engine_index(b[i][b[i] >= 0])) for i in range(n)]
    return out


def digest(indices) -> int:
    """32-bit digest of an index list: blake2b (4 bytes, little-endian) of its sorted int32 values."""
    a = np.sort(np.asarray(indices, dtype=np.int64)).astype("<i4")
    return int.from_bytes(hashlib.blake2b(a.tobytes(), digest_size=4).digest(), "little")


def part_counts(indices) -> tuple[int, int, int]:
    a = np.asarray(indices)
    return int((a < PP_BASE).sum()), int(((a >= PP_BASE) & (a < PSQ_BASE)).sum()), int((a >= PSQ_BASE).sum())


def summarise(lists) -> tuple[np.ndarray, np.ndarray]:
    """[(white, black)] -> (digests (N, 2) uint32, counts (N, 2, 3) uint8)."""
    dig = np.array([[digest(w), digest(b)] for w, b in lists], dtype=np.uint32)
    cnt = np.array([[part_counts(w), part_counts(b)] for w, b in lists], dtype=np.uint8)
    return dig, cnt


#: positions added to the self-play: two bishops of one colour attacking each other (the only
#: attacker/attacked pairs the games never show: they need an under-promotion), for both
#: perspectives and both sides to move
FIXTURE_EXTRA = (
    "4k3/8/8/8/8/4B3/8/2B1K3 w - - 0 1",
    "4k3/8/8/8/8/4B3/8/2B1K3 b - - 0 1",
    "2b1k3/8/4b3/8/8/8/8/4K3 w - - 0 1",
    "2b1k3/8/4b3/8/8/8/8/4K3 b - - 0 1",
)


def fixture_fens() -> list[str]:
    """The fixture's positions: the "fen" lines of the shipped self-play, in file order, then
    :data:`FIXTURE_EXTRA`."""
    from tests.samples import selfplay

    fens = []
    for name in FIXTURE_SOURCES:
        with selfplay(name).open() as fh:
            fens += [line[4:].strip() for line in fh if line.startswith("fen ")]
    return fens + list(FIXTURE_EXTRA)


def read_fixture() -> dict:
    with np.load(FIXTURE, allow_pickle=False) as z:
        out = {k: z[k] for k in z.files}
    out["meta"] = json.loads(str(out["meta"]))
    return out


def write_fixture(path: Path = FIXTURE) -> dict:
    lib_path = loader_path()
    if lib_path is None:
        raise SystemExit("nnue-pytorch's loader not found: set NNUE_PYTORCH_LOADER to libtraining_data_loader.so")
    fens = fixture_fens()
    dig, cnt = summarise(loader_lists(load(lib_path), fens))
    meta = {"features": FEATURES, "nnue_pytorch_commit": NPT_COMMIT, "sources": list(FIXTURE_SOURCES),
            "extra": list(FIXTURE_EXTRA),
            "positions": len(fens), "perspectives": ["white", "black"],
            "digest": "blake2b-32 (little-endian) of the sorted engine-space indices as int32 LE",
            "counts": ["threats", "pawn pairs", "HalfKAv2_hm"],
            "made_with": "python -m tests.features.npt_loader --write"}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, digest=dig, counts=cnt, meta=np.array(json.dumps(meta)))
    os.replace(tmp, path)
    return meta


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.features.npt_loader --write  (needs nnue-pytorch's loader)")
    print(json.dumps(write_fixture(), indent=1))
    print(f"wrote {FIXTURE} ({FIXTURE.stat().st_size} bytes)")
