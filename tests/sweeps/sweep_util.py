"""Helpers of the sweep tests: the `nnue` command in a subprocess, a tiny training recipe, a
dataset of two part files (so that two DDP ranks get disjoint row groups)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

NNUE = [sys.executable, "-m", "nnue.cli"]
# a few seconds of training a job: 16 steps of 256, a tiny net, one validation pass
TINY = ["experiment=demo", "trainer.max_epochs=1", "data.positions_per_epoch=4096", "data.val_batch_size=64",
        "trainer.enable_progress_bar=false", "logger.tensorboard=null", "data.shuffle_buffer=8192"]


def nnue(*args, cwd=None, timeout=900, check=True):
    r = subprocess.run([*NNUE, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"nnue {' '.join(map(str, args))} failed ({r.returncode}):\n"
                             f"{r.stdout[-4000:]}\n{r.stderr[-4000:]}")
    return r


def two_part_dataset(sample: Path, out: Path) -> Path:
    """The bundled sample split in two .plain files (at record ends) and packed: 2 part files."""
    from nnue.pipeline.pack import pack

    recs, cur = [], []
    for line in sample.read_text().splitlines(keepends=True):
        cur.append(line)
        if line.strip() == "e":
            recs.append("".join(cur))
            cur = []
    out.mkdir(parents=True, exist_ok=True)
    half = len(recs) // 2
    (out / "a.plain").write_text("".join(recs[:half]))
    (out / "b.plain").write_text("".join(recs[half:]))
    pack([out / "a.plain", out / "b.plain"], out / "dataset", progress=False)
    return out / "dataset"
