"""Inputs that repeat another input's games: the same games packed twice, e.g. one self-play run
kept as ``.plain``, ``.txt`` and ``.pgn``.

:func:`repeated_inputs` fingerprints each packed input by the pairs of consecutive positions in
its part file (position = the 25 key bytes of the packed board: occupancy, pieces, side to move,
en passant; so counters, scores and the format do not matter), keeps a 1/8 sample of the pair
hashes, and reports every pair of inputs where more than ``threshold`` of the smaller one's
sampled pairs are also in the other: those hold the same games in the same order. Packing both
puts each game in the dataset twice, under two game ids, possibly on both sides of the
train/validation split; ``nnue pack --dedup`` keeps one copy of each position.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from .parts import open_part, read_arrays

KEY_BYTES = 25
SAMPLE = 8  # keep pair hashes ≡ 0 mod SAMPLE
THRESHOLD = 0.5


def fingerprint(part: Path | list[Path]) -> set[int]:
    """Sampled hashes of consecutive position pairs of a part file, or of the parts of one
    input in order (game order)."""
    out: set[int] = set()
    prev = None
    for pf, rg in ((pf, rg) for p in (part if isinstance(part, list) else [part])
                   for pf in [open_part(p)] for rg in range(pf.metadata.num_row_groups)):
        boards = read_arrays(pf, rg, ["board"])["board"]  # either layout (nnue.pipeline.parts)
        keys = np.ascontiguousarray(boards[:, :KEY_BYTES]).view(np.dtype((np.void, KEY_BYTES))).ravel()
        h = np.array([int.from_bytes(hashlib.blake2b(k.tobytes(), digest_size=8).digest(), "little")
                      for k in keys], dtype=np.uint64)
        if prev is not None and len(h):
            h = np.concatenate([[prev], h])
        if len(h) >= 2:
            with np.errstate(over="ignore"):
                pair = h[:-1] * np.uint64(0x9E3779B97F4A7C15) ^ h[1:]
            out.update(int(x) for x in pair[pair % np.uint64(SAMPLE) == 0])
            prev = h[-1]
        elif len(h):
            prev = h[-1]
    return out


def repeated_inputs(dataset: str | Path, entries: list[dict], threshold: float = THRESHOLD) -> list[dict]:
    """Pairs of the manifest entries ``entries`` (and the dataset's other inputs) whose games
    repeat. Returns [{"path", "repeats", "share"}]: input ``path`` repeats input ``repeats``'s
    positions in game order, ``share`` of its sampled position pairs. Entries without rows are skipped."""
    from . import manifest as mf

    d = Path(dataset)
    allent = [e for e in mf.load(d)["files"].values() if e["packed"]]
    new = {e["sha256"] for e in entries}
    prints = {e["sha256"]: fingerprint([d / name for name in mf.entry_parts(e)]) for e in allent}
    out = []
    for i, a in enumerate(allent):
        for b in allent[i + 1:]:
            if a["sha256"] not in new and b["sha256"] not in new:
                continue
            fa, fb = prints[a["sha256"]], prints[b["sha256"]]
            small, big = (a, b) if len(fa) <= len(fb) else (b, a)
            fs, fbig = prints[small["sha256"]], prints[big["sha256"]]
            if len(fs) < 4:
                continue
            share = len(fs & fbig) / len(fs)
            if share > threshold:
                out.append({"path": small["path"], "repeats": big["path"], "share": round(share, 3)})
    return out


def groups(repeats: list[dict]) -> list[list[str]]:
    """The inputs of :func:`repeated_inputs`' pairs joined into groups that hold the same games
    (connected pairs), each in the order first named; groups in that order too."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for r in repeats:
        a, b = root(r["path"]), root(r["repeats"])
        if a != b:
            parent[b] = a
    out: dict[str, list[str]] = {}
    for r in repeats:
        for p in (r["repeats"], r["path"]):
            if p not in out.setdefault(root(p), []):
                out[root(p)].append(p)
    return list(out.values())


def extra_copies(dataset: str | Path, paths: list[str]) -> int:
    """Positions of the inputs ``paths`` (manifest paths) that repeat another of their positions
    (same 25 key bytes: occupancy, pieces, side to move, en passant; what ``--dedup`` compares):
    their rows minus their distinct keys."""
    from . import manifest as mf

    d = Path(dataset)
    keys = []
    for e in mf.load(d)["files"].values():
        if e["path"] in paths and e["packed"]:
            for name in mf.entry_parts(e):
                pf = open_part(d / name)
                for rg in range(pf.metadata.num_row_groups):
                    b = read_arrays(pf, rg, ["board"])["board"]
                    keys.append(np.ascontiguousarray(b[:, :KEY_BYTES]).view(np.dtype((np.void, KEY_BYTES))).ravel())
    if not keys:
        return 0
    k = np.concatenate(keys)
    return int(len(k) - len(np.unique(k)))
