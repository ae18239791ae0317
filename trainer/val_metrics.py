"""Validation metrics over every validation row exactly once, whatever the number of ranks.

Under DDP each rank reads its own share of the validation set once, with a final partial batch
(``data.NNUEDataModule``: ``even_batches=False``), so ranks run different numbers of validation
batches, a rank may run none, and no collective may run per validation step. The metrics are
kept as sums on each rank (:class:`ValidationSums`) and combined once, at the epoch's end, by one
``all_gather_object`` that every rank reaches: ``val_loss`` = Σ loss·n / Σ n (each batch's loss is
its rows' mean), the activation densities likewise per row, and ``val_spearman`` on the pooled
predictions and scores of all ranks. Every rank then logs the same numbers, so that checkpoint
monitors and early stopping decide alike on every rank. On one process it is the same arithmetic
without the gather.

Before, validation used a fixed, equal batch count per rank (the training rule), computed as
the smallest rank's rows ÷ ``data.val_batch_size``: with 2 ranks and a validation share smaller
than one batch it was 0 on every rank, and ``val_loss`` silently disappeared; leftover rows were
always dropped, and each rank logged its own share's loss.
"""
from __future__ import annotations

import numpy as np
import torch

from .metrics import spearman


class ValidationSums:
    """One validation epoch's sums on this rank. ``add`` after each batch; ``result`` once at the
    epoch's end on every rank (it is collective under DDP)."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.rows = 0
        self.sums: dict[str, float] = {}
        self.pred: list[np.ndarray] = []
        self.score: list[np.ndarray] = []

    def add(self, n: int, means: dict[str, torch.Tensor | float], pred: torch.Tensor, score: torch.Tensor) -> None:
        """A batch of ``n`` rows: ``means`` are per-row means over the batch (loss, densities);
        ``pred``/``score`` (n,) centipawns for the Spearman ρ."""
        self.rows += int(n)
        for k, v in means.items():
            self.sums[k] = self.sums.get(k, 0.0) + float(v) * int(n)
        self.pred.append(pred.detach().float().cpu().numpy())
        self.score.append(score.detach().float().cpu().numpy())

    def result(self, trainer=None) -> tuple[dict[str, float], int]:
        """({metric: value} over every rank's rows, ``val_positions`` = the rows, rows in all); {}
        when no rank had a row.
        Under DDP every rank must call it (one all_gather_object)."""
        mine = (self.rows, self.sums, np.concatenate(self.pred) if self.pred else np.zeros(0, np.float32),
                np.concatenate(self.score) if self.score else np.zeros(0, np.float32))
        parts = [mine]
        if trainer is not None and trainer.world_size > 1 and torch.distributed.is_available() \
                and torch.distributed.is_initialized():
            parts = [None] * trainer.world_size
            torch.distributed.all_gather_object(parts, mine)
        rows = sum(p[0] for p in parts)
        if rows == 0:
            return {}, 0
        keys = sorted({k for p in parts for k in p[1]})
        out = {k: sum(p[1].get(k, 0.0) for p in parts) / rows for k in keys}
        pred = np.concatenate([p[2] for p in parts])
        score = np.concatenate([p[3] for p in parts])
        out["val_spearman"] = float(np.nan_to_num(spearman(pred, score)))
        out["val_positions"] = float(rows)  # rows validated, all ranks: the validation split after the filters
        return out, rows
