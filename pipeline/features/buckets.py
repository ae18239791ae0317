"""Output-bucket functions: pick one of several copies of the layers after the feature transformer.

Formulas (FORMATS.md, "Output bucket formulas differ"):

* ``MaterialCount<N>`` (bullet): ``(piece_count − 2) / ceil(32 / N)``;
* ``SFPieceCount<N>`` (Stockfish layer stacks, N = 8): ``(piece_count − 1) / 4``.

Both are clamped to ``[0, N−1]``. Trainer, exporter and inference all call :meth:`OutputBuckets.of`,
and the net header stores :attr:`OutputBuckets.name`, so the three cannot disagree.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from .board_tensor import piece_count

KINDS = ("MaterialCount", "SFPieceCount")


@dataclass(frozen=True)
class OutputBuckets:
    kind: str
    count: int

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown output-bucket kind {self.kind!r}; known: {', '.join(KINDS)}")
        if not 1 <= self.count <= 32:
            raise ValueError(f"output bucket count {self.count} not in 1..32")
        if self.kind == "SFPieceCount" and self.count > 8:
            raise ValueError(f"SFPieceCount<{self.count}>: (pieces − 1) / 4 is at most 7 (32 pieces), "
                             f"so buckets 8 and up would never be used; use 1..8")

    @property
    def name(self) -> str:
        return f"{self.kind}<{self.count}>"

    def of_piece_count(self, pieces: torch.Tensor) -> torch.Tensor:
        """pieces: (B,) int64 piece counts (kings included) -> (B,) int64 bucket in [0, count)."""
        if self.kind == "MaterialCount":
            div = -(-32 // self.count)
            b = torch.div(pieces - 2, div, rounding_mode="floor")
        else:
            b = torch.div(pieces - 1, 4, rounding_mode="floor")
        return b.clamp(0, self.count - 1)

    def of(self, boards: torch.Tensor) -> torch.Tensor:
        """boards: (B, 32) uint8 packed boards -> (B,) int64 bucket."""
        return self.of_piece_count(piece_count(boards))


def parse_output_buckets(text: str) -> OutputBuckets:
    """Parse ``"MaterialCount<8>"`` or ``"SFPieceCount<8>"``. Raises ValueError otherwise."""
    m = re.fullmatch(r"\s*(\w+)<(\d+)>\s*", text)
    if not m:
        raise ValueError(f"output buckets {text!r}: expected e.g. 'MaterialCount<8>'")
    return OutputBuckets(m.group(1), int(m.group(2)))
