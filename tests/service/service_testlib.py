"""Helpers of the service tests: small distinct dumps cut from the bundled sample, dataset checks."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nnue.pipeline.parts import read_part

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample" / "sf15-n5000-s1-sample.plain"
NNUE = [sys.executable, "-m", "nnue.cli"]
LINES_PER_RECORD = 6  # fen, move, score, ply, result, e


def sample_records() -> list[str]:
    lines = SAMPLE.read_text().splitlines(keepends=True)
    return ["".join(lines[i:i + LINES_PER_RECORD]) for i in range(0, len(lines), LINES_PER_RECORD)]


def cut_dumps(folder: Path, n: int, records: int = 60, bad_every: int = 17, stem: str = "dump",
              start: int = 0) -> list[Path]:
    """Write ``n`` distinct .plain dumps of ``records`` sample records each (different slices of the
    sample, so different sha256), every ``bad_every``-th record with a broken FEN (a reject).
    Returns their paths."""
    recs = sample_records()
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        chunk = []
        for j in range(records):
            r = recs[(start + i * records + j) % len(recs)]
            if bad_every and j % bad_every == bad_every - 1:
                r = r.replace("fen ", "fen x", 1)
            chunk.append(r)
        p = folder / f"{stem}{start + i:03d}.plain"
        p.write_text("".join(chunk))
        out.append(p)
    return out


def dataset_rows(dataset: Path, manifest: dict) -> int:
    """Rows actually readable from the part files the manifest lists (checks each count)."""
    total = 0
    for e in manifest["files"].values():
        n = read_part(dataset / e["part"]).num_rows
        assert n == e["packed"], (e["path"], n, e["packed"])
        total += n
    return total


def env() -> dict:
    e = dict(os.environ)
    e.pop("NNUE_DEBUG", None)
    return e


def nnue(*args, check: bool = False, **kw) -> subprocess.CompletedProcess:
    r = subprocess.run([*NNUE, *map(str, args)], capture_output=True, text=True, env=env(), **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"nnue {' '.join(map(str, args))} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r
