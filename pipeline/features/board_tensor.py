"""Vectorised decoding of packed boards (marlinformat, 32 bytes) into per-square tensors.

Shared by every feature set and by the output-bucket functions; torch ops only, any device.
"""
from __future__ import annotations

import torch

CASTLING_ROOK = 6


def decode_squares(boards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Expand packed boards into square-indexed tensors.

    boards: (B, 32) uint8 marlinformat records.
    Returns ``(occupied, code, rank)``:

    * occupied: (B, 64) bool, square s (a1 = 0 .. h8 = 63) holds a piece;
    * code: (B, 64) int64 piece code, colour·8 + type with type P N B R Q K = 0..5 (a rook
      with a castling right is returned as a rook, 3), meaningless where not occupied;
    * rank: (B, 64) int64, the piece's position in ascending square order (0..31), the slot a
      feature list puts it in; meaningless where not occupied.

    Raises ValueError on a wrong shape or dtype.
    """
    if boards.dtype != torch.uint8 or boards.dim() != 2 or boards.shape[1] != 32:
        raise ValueError(f"boards must be (B, 32) uint8, got {tuple(boards.shape)} {boards.dtype}")
    shifts = torch.arange(8, dtype=torch.uint8, device=boards.device)
    occupied = ((boards[:, :8].unsqueeze(-1) >> shifts) & 1).reshape(-1, 64).bool()
    nib = boards[:, 8:24]
    nibbles = torch.stack((nib & 15, nib >> 4), dim=-1).reshape(-1, 32).long()
    rank = occupied.long().cumsum(1) - 1
    code = nibbles.gather(1, rank.clamp(0, 31))
    kind = code & 7
    code = torch.where(kind == CASTLING_ROOK, (code & 8) | 3, code)
    return occupied, code, rank


def black_to_move(boards: torch.Tensor) -> torch.Tensor:
    """(B, 32) uint8 -> (B,) bool, true when black is to move (bit 7 of byte 24)."""
    return (boards[:, 24] >> 7).bool()


def piece_count(boards: torch.Tensor) -> torch.Tensor:
    """(B, 32) uint8 -> (B,) int64 number of pieces, kings included (popcount of occupancy)."""
    shifts = torch.arange(8, dtype=torch.uint8, device=boards.device)
    return ((boards[:, :8].unsqueeze(-1) >> shifts) & 1).sum((1, 2), dtype=torch.int64)


def compact(values: torch.Tensor, occupied: torch.Tensor, rank: torch.Tensor, width: int) -> torch.Tensor:
    """Gather per-square values of occupied squares into ``(B, width) int32`` lists, −1 padded,
    in ascending square order. values, occupied, rank: (B, 64)."""
    out = torch.full((values.shape[0], width + 1), -1, dtype=torch.int32, device=values.device)
    slot = torch.where(occupied, rank, torch.full_like(rank, width))
    out.scatter_(1, slot, torch.where(occupied, values, -1).to(torch.int32))
    return out[:, :width]
