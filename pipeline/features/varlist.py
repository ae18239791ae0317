"""Variable-length feature lists in torch, for the sets that are not one feature per piece
(Full_Threats, PP_3Wide and their composition): the board as piece ids, the perspective's
orientation, and left compaction of a masked row into a fixed-width −1-padded list.

Torch ops only, any device, no per-position Python. On CPU an overflowing list (more active
features than the list holds) raises ValueError naming the board; on other devices the check is
a ``torch._assert_async``.
"""
from __future__ import annotations

import torch

from .board_tensor import black_to_move, decode_squares
from .lookup import board_kings

#: piece id of an empty square in :func:`piece_ids` (0..11: colour·6 + type, P N B R Q K = 0..5)
EMPTY = 12
NUM_IDS = 13


def piece_ids(boards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 32) uint8 -> (ids (B, 64) int64, occupancy (B,) int64 bitboard, a1 = bit 0).

    ids: colour·6 + type (P N B R Q K = 0..5; a rook with a castling right is a rook) on each
    square, :data:`EMPTY` where there is no piece (or an unused piece code, which the king check
    of :func:`orientation` refuses)."""
    occupied, code, _ = decode_squares(boards)
    t = code & 7
    ids = torch.where(occupied & (t < 6), (code >> 3) * 6 + t, EMPTY)
    occ = boards[:, :8].contiguous().view(torch.int64).view(-1)  # little-endian u64
    return ids, occ


def orientation(boards: torch.Tensor, first_row: int = 0) -> torch.Tensor:
    """(B, 32) uint8 -> (2, B) int64: per board, for the side to move (row 0) and the other side
    (row 1), ``o = 2·colour + mirrored``: colour 0 white, 1 black; mirrored when that side's own
    king stands on files e–h (Stockfish's ``FullThreats::OrientTBL``: the threat and pawn-pair
    features flip the board left–right so that the own king is on files a–d, and flip ranks for
    black). The square transform of ``o`` is :func:`square_xor`. Validates the kings (ValueError
    naming the board on CPU)."""
    kw, kb = board_kings(boards, first_row)
    btm = black_to_move(boards).long()
    k_stm = torch.where(btm == 1, kb, kw).long()
    k_nstm = torch.where(btm == 1, kw, kb).long()
    return torch.stack((2 * btm + (k_stm % 8 >= 4).long(), 2 * (1 - btm) + (k_nstm % 8 >= 4).long()))


def square_xor(o: torch.Tensor | int):
    """The square transform of orientation ``o`` (:func:`orientation`): ``s ^ square_xor(o)``."""
    return 56 * (o >> 1) ^ 7 * (o & 1)


def compact(mask: torch.Tensor, values: torch.Tensor, width: int, what: str,
            first_row: int = 0) -> torch.Tensor:
    """Left-compact each row: (..., B, N) bool mask and int values -> (..., B, width) int32, the
    masked values in their order, then −1. Raises ValueError (CPU; an async assert elsewhere)
    naming the board when a row holds more than ``width``; ``what`` names the list."""
    lead = mask.shape[:-1]
    if mask.shape[-1] == 0:
        return torch.full((*lead, width), -1, dtype=torch.int32, device=mask.device)
    pos = mask.cumsum(-1, dtype=torch.int32)
    count = pos[..., -1]
    _check_width(count, width, what, first_row)
    col = torch.where(mask, pos - 1, width).clamp_(max=width).long()
    out = torch.full((*lead, width + 1), -1, dtype=torch.int32, device=mask.device)
    out.scatter_(-1, col, torch.where(mask, values.to(torch.int32), -1))
    return out[..., :width]


def _check_width(count: torch.Tensor, width: int, what: str, first_row: int) -> None:
    bad = count > width
    if count.device.type == "cpu":
        if bool(bad.any()):
            row = first_row + int(bad.nonzero()[0, -1])
            raise ValueError(f"board {row}: more than {width} active {what} features "
                             f"({int(count.max())}); no chess game reaches that many")
    else:
        torch._assert_async(~bad.any(), f"a board with more than {width} active {what} features")


def chunked(boards: torch.Tensor, width: int, chunk: int, encode) -> tuple[torch.Tensor, torch.Tensor]:
    """Run ``encode(boards_chunk, first_row) -> (2, b, width) int32`` over CPU chunks of
    ``chunk`` rows (whole batches on other devices): (stm, nstm), each (B, width)."""
    n = boards.shape[0]
    if boards.device.type != "cpu" or n <= chunk:
        out = encode(boards, 0)
    else:
        out = torch.empty((2, n, width), dtype=torch.int32)
        for start in range(0, n, chunk):
            out[:, start:start + chunk] = encode(boards[start:start + chunk], start)
    return out[0], out[1]
