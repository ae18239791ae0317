"""DDP diagnostics: what each rank trained on and ended with (for checking a DDP set-up)."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytorch_lightning as pl


class RankReport(pl.Callback):
    """Write ``<dirpath>/rank<R>.json`` on every rank at the end of training: rank, world size,
    Lightning's cluster environment, the training stream's shard (part file, row group) units,
    the sha1 of every training position's stm feature list seen (for shard checks), batches
    trained, and the sha256 of the final weights. A diagnostic for DDP set-ups (tests/slurm);
    ``dirpath`` should lie outside the run folder, which only rank 0 writes."""

    def __init__(self, dirpath: str):
        self.dirpath = Path(dirpath)
        self.seen: list[str] = []
        self.batches = 0

    def on_train_batch_start(self, trainer, lit, batch, batch_idx: int) -> None:
        idx = batch.stm_indices.detach().cpu().numpy()
        self.seen += [hashlib.sha1(row.tobytes()).hexdigest()[:16] for row in idx]
        self.batches += 1

    def on_train_end(self, trainer, lit) -> None:
        h = hashlib.sha256()
        for k, v in sorted(lit.model.state_dict().items()):
            h.update(k.encode())
            h.update(v.detach().cpu().contiguous().numpy().tobytes())
        ds = trainer.datamodule.train_set
        units = [[str(ds.parts[u.file][0]), u.row_group] for src in ds.shard_units(trainer.global_rank)
                 for u in src]
        env = trainer.strategy.cluster_environment
        report = {"rank": trainer.global_rank, "world_size": trainer.world_size,
                  "cluster_environment": type(env).__name__ if env is not None else None,
                  "pid": os.getpid(), "units": units, "batches": self.batches,
                  "positions": sorted(set(self.seen)), "weights_sha256": h.hexdigest()}
        self.dirpath.mkdir(parents=True, exist_ok=True)
        tmp = self.dirpath / f".rank{trainer.global_rank}.json.tmp"
        tmp.write_text(json.dumps(report))
        tmp.replace(self.dirpath / f"rank{trainer.global_rank}.json")
