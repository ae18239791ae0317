"""SparseBatch: the trainer's input, built from a packed batch on the device that trains.

Contract (DESIGN.md): ``stm_indices``, ``nstm_indices``: (B, MAX_ACTIVE) int32, −1 = padding;
``score``: (B,) float32 centipawns, side-to-move POV; ``result``: (B,) float32 in {0, 0.5, 1},
side-to-move POV; ``bucket``: (B,) int64 output bucket. All tensors on the same device.
Optional, when the dataset is annotated (``nnue annotate``): ``base_eval``, ``teacher_eval``:
(B,) float32 centipawns, side-to-move POV, NaN where the column is null (in check).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .features import FeatureSet, OutputBuckets


@dataclass
class SparseBatch:
    stm_indices: torch.Tensor
    nstm_indices: torch.Tensor
    score: torch.Tensor
    result: torch.Tensor
    bucket: torch.Tensor
    base_eval: torch.Tensor | None = None
    teacher_eval: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.score.shape[0]


def to_sparse_batch(packed: dict[str, torch.Tensor], features: FeatureSet,
                    buckets: OutputBuckets) -> SparseBatch:
    """Encode a packed batch (``boards`` (B, 32) uint8, ``score``, ``result``) on its device
    (CPU batches through the feature set's compiled path where it has one, ``encode_numba``)."""
    boards = packed["boards"]
    fast = features.encode_numba if boards.device.type == "cpu" else None
    stm, nstm = (fast or features.encode)(boards)
    return SparseBatch(stm, nstm, packed["score"].float(), packed["result"].float(), buckets.of(boards),
                       packed.get("base_eval"), packed.get("teacher_eval"))
