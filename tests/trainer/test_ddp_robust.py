"""Two ranks on one machine (Lightning DDP on CPU, gloo): validation over every row exactly once,
and stop signals that reach one rank.

Validation used the training rule of equal batch counts per rank: ``floor(smallest rank's rows /
val_batch_size)``; with 2 ranks and a rank's share under one validation batch that was 0 on every
rank, so ``val_loss`` silently disappeared (the bundled sample, ``data/demo``), and leftover rows
were always dropped. Now each rank reads its own share once (``even_batches=False``) and the sums
meet at the epoch's end (``nnue.trainer.val_metrics``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest

from nnue.pipeline.board import boards_from_bytes  # noqa: F401  (the stream's board codec)
from nnue.pipeline.stream import PackedStream

NNUE = [sys.executable, "-m", "nnue.cli"]


def _rows(ds, rank, world, batch=64):
    s = PackedStream([ds], batch, 0, "val", 0.1, seed=0, drop_last=False, rank=rank, world_size=world,
                     even_batches=False)
    return Counter(bytes(b) for batch_ in s for b in batch_["boards"].numpy())


def test_validation_stream_reads_every_row_once_on_any_world_size(sample_dataset):
    """The sample is one row group: one rank reads it all, the other none; nothing dropped, with a
    final partial batch."""
    one = _rows(sample_dataset, 0, 1)
    two = [_rows(sample_dataset, r, 2) for r in range(2)]
    three = [_rows(sample_dataset, r, 3) for r in range(3)]
    assert sum(one.values()) > 64 and sum(one.values()) % 64  # a partial final batch is kept
    assert two[0] + two[1] == one and three[0] + three[1] + three[2] == one
    assert min(sum(c.values()) for c in two) == 0  # a rank without validation rows


def _env():
    return {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}


def _ddp_overrides(ds, out, *extra):
    return ["experiment=demo", f"data.path={ds}", f"paths.output_dir={out}", "model.hidden=16",
            "data.positions_per_epoch=2048", "trainer.max_epochs=1", "trainer.enable_progress_bar=false",
            "trainer=ddp", "trainer.devices=2", *extra]


@pytest.mark.slow
def test_two_ranks_validate_every_row_once(sample_dataset, tmp_path):
    """The demo's validation batch (8,192) is larger than the sample's validation split, which is
    one row group: rank 1 has no validation row. val_loss and val_spearman are there, over every
    validation row (val_positions), the same on both ranks."""
    out = tmp_path / "out"
    r = subprocess.run([*NNUE, "train", *_ddp_overrides(sample_dataset, out)], capture_output=True, text=True,
                       timeout=900, env=_env())
    assert r.returncode == 0, r.stderr[-3000:]
    assert "error" not in r.stderr.lower(), r.stderr[-3000:]
    m = json.loads((out / "metrics.json").read_text())
    want = sum(_rows(sample_dataset, 0, 1).values())
    assert m["val_loss"] > 0 and "val_spearman" in m and m["val_positions"] == want, m
    logged = [json.loads(x.split("metrics: ", 1)[1].replace("'", '"').replace("False", "false"))
              for x in (r.stdout + r.stderr).splitlines() if "nnue.trainer][INFO] - metrics: " in x]
    assert len(logged) == 2 and logged[0]["val_loss"] == logged[1]["val_loss"] == m["val_loss"]


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return any(line.split()[:2] == ["State:", "Z"] for line in f)  # a zombie has exited
    except FileNotFoundError:
        return True


@pytest.mark.slow
@pytest.mark.parametrize("rank,at,step", [(0, "batch", 5), (1, "batch", 5), (0, "validation", 8),
                                          (0, "fit_start", 0)])
def test_a_signal_to_one_rank_stops_every_rank_with_a_checkpoint(sample_dataset, tmp_path, rank, at, step):
    """SIGTERM to one process of a 2-rank run (rank 0 is the launcher): both ranks stop at the same
    step after it with last.ckpt saved there, one line, status 143, no process left. Before,
    Lightning's handler ran a broadcast inside the signal handler, out of step with the other
    rank's collectives: both ranks deadlocked about one run in three (here: the first run)."""
    import torch

    out, pids = tmp_path / "out", tmp_path / "pids"
    cb = ["+callbacks.sig._target_=tests.trainer.ddp_signal.SignalAt", f"+callbacks.sig.rank={rank}",
          f"+callbacks.sig.at={at}", f"+callbacks.sig.step={step}", f"+callbacks.sig.pids={pids}"]
    r = subprocess.run([*NNUE, "train", *_ddp_overrides(sample_dataset, out, "trainer.max_epochs=20"), *cb],
                       capture_output=True, text=True, timeout=600, env=_env())
    assert r.returncode == 143, r.stderr[-3000:]
    mine = [x for x in r.stderr.splitlines() if x.startswith("nnue train:")]
    assert len(mine) == 1 and "interrupted by SIGTERM" in mine[0] and "Traceback" not in r.stderr, r.stderr[-3000:]
    ck = torch.load(out / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert f"step {ck['global_step']:,}" in mine[0] and ck["global_step"] < 20 * 4
    assert ck["global_step"] >= max(step, 1)
    for p in pids.glob("rank*.pid"):
        assert _gone(int(p.read_text())), p.name
    assert sorted(p.name for p in pids.glob("rank*.pid")) == ["rank0.pid", "rank1.pid"]
