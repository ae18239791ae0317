"""LightningDataModule over packed Parquet datasets (:class:`~nnue.pipeline.stream.PackedStream`)."""
from __future__ import annotations

from collections.abc import Sequence

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from nnue.pipeline.stream import Filters, PackedStream


class NNUEDataModule(pl.LightningDataModule):
    """path: one dataset folder or a list. batch_size / val_batch_size: positions per batch.
    shuffle_buffer: rows held for shuffling. val_fraction: share of games held out (by game id).
    filters: :class:`~nnue.pipeline.stream.Filters` fields, applied to train and validation.
    num_workers: DataLoader workers (row groups are sharded across them)."""

    def __init__(self, path, batch_size: int = 16384, val_batch_size: int = 16384,
                 shuffle_buffer: int = 1 << 20, val_fraction: float = 0.05, num_workers: int = 0,
                 seed: int = 0, filters: dict | None = None):
        super().__init__()
        from .callbacks import plain

        path, filters = plain(path), plain(filters)
        self.save_hyperparameters()  # lands in checkpoints: export finds its validation data here
        self.paths = [str(path)] if isinstance(path, str) else [str(p) for p in path]
        self.batch_size, self.val_batch_size = batch_size, val_batch_size
        self.shuffle_buffer, self.val_fraction = shuffle_buffer, val_fraction
        self.num_workers, self.seed = num_workers, seed
        self.filters = Filters(**dict(filters or {}))
        self.train_set: PackedStream | None = None

    def _rank(self) -> tuple[int, int]:
        t = self.trainer
        return (t.global_rank, t.world_size) if t is not None else (0, 1)

    def setup(self, stage: str | None = None) -> None:
        rank, world = self._rank()
        self.train_set = PackedStream(self.paths, self.batch_size, self.shuffle_buffer, "train",
                                      self.val_fraction, self.filters, self.seed, True, rank, world)
        self.val_set = PackedStream(self.paths, self.val_batch_size, 0, "val", self.val_fraction,
                                    self.filters, self.seed, False, rank, world)

    def _loader(self, ds):
        return DataLoader(ds, batch_size=None, num_workers=self.num_workers,
                          pin_memory=torch.cuda.is_available(),
                          persistent_workers=False)

    def train_dataloader(self):
        self.train_set.set_epoch(self.trainer.current_epoch if self.trainer else 0)
        return self._loader(self.train_set)

    def val_dataloader(self):
        return self._loader(self.val_set)
