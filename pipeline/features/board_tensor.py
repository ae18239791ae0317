"""Vectorised decoding of packed boards (marlinformat, 32 bytes) into per-square and per-slot tensors.

Shared by every feature set and by the output-bucket functions; torch ops only, any device.

Two views of a board:

* per square (:func:`decode_squares`): ``(B, 64)`` tensors indexed by square, a1 = 0 .. h8 = 63;
* per slot (:func:`slot_keys`): ``(B, 32)`` tensors indexed by the piece's slot, its position in
  ascending square order (marlinformat stores one nibble per slot). The feature sets use this
  one: it is half the size and needs no compaction afterwards.
"""
from __future__ import annotations

import torch

CASTLING_ROOK = 6
#: Square of an empty slot (past the board's piece count) in :func:`slot_keys`.
EMPTY_SQ = 64
#: Number of distinct slot keys: 16 · square + nibble code, square 0..64.
NUM_KEYS = (EMPTY_SQ + 1) * 16


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
    check_boards(boards)
    shifts = torch.arange(8, dtype=torch.uint8, device=boards.device)
    occupied = ((boards[:, :8].unsqueeze(-1) >> shifts) & 1).reshape(-1, 64).bool()
    nib = boards[:, 8:24]
    nibbles = torch.stack((nib & 15, nib >> 4), dim=-1).reshape(-1, 32).long()
    rank = occupied.long().cumsum(1) - 1
    code = nibbles.gather(1, rank.clamp(0, 31))
    kind = code & 7
    code = torch.where(kind == CASTLING_ROOK, (code & 8) | 3, code)
    return occupied, code, rank


def check_boards(boards: torch.Tensor) -> None:
    """Raise ValueError unless ``boards`` is a (B, 32) uint8 tensor."""
    if boards.dtype != torch.uint8 or boards.dim() != 2 or boards.shape[1] != 32:
        raise ValueError(f"boards must be (B, 32) uint8, got {tuple(boards.shape)} {boards.dtype}")


def black_to_move(boards: torch.Tensor) -> torch.Tensor:
    """(B, 32) uint8 -> (B,) bool, true when black is to move (bit 7 of byte 24)."""
    return (boards[:, 24] >> 7).bool()


class _Tables:
    """Small lookup tables for :func:`slot_keys` and :func:`piece_count`, built once per device."""

    def __init__(self, device: torch.device):
        byte = torch.arange(256)
        bits = (byte[:, None] >> torch.arange(8)) & 1                        # (256, 8)
        self.pop = bits.sum(1).to(torch.int32).to(device)                    # popcount of a byte
        # sq16[(j·256 + byte)·32 + r] = 16 · (square of the r-th set bit of occupancy byte j),
        # or 16 · EMPTY_SQ when the byte has at most r set bits.
        pos = torch.where(bits.bool(), torch.arange(8), 8).sort(1).values     # set bits first
        pos = torch.cat((pos, torch.full((256, 24), 8)), 1)                  # (256, 32)
        sq = torch.arange(8)[:, None, None] * 8 + pos                         # (8, 256, 32)
        self.sq16 = (torch.where(pos < 8, sq, EMPTY_SQ) * 16).to(torch.int32).reshape(-1).to(device)
        self.byte_base = (torch.arange(8, dtype=torch.int32) * (256 * 32)).to(device)
        # a nibble byte -> its two codes as one int64 that views as two int32 (little-endian)
        self.nibble_pair = ((byte & 15) | ((byte >> 4) << 32)).to(device)


_TABLES: dict[torch.device, _Tables] = {}


def _tables(device: torch.device) -> _Tables:
    t = _TABLES.get(device)
    if t is None:
        t = _TABLES[device] = _Tables(device)
    return t


def slot_keys(boards: torch.Tensor) -> torch.Tensor:
    """Per-slot keys of packed boards: (B, 32) uint8 -> (B, 32) int32.

    Slot k holds the k-th piece in ascending square order; its key is ``16 · square + code``,
    where code is the raw marlinformat nibble (bit 3 = black; 0..5 = P N B R Q K; 6 = rook with a
    castling right). Slots past the piece count have square :data:`EMPTY_SQ` (64).

    How: the square of slot k is the k-th set bit of the occupancy. With ``pre_j`` the number of
    pieces on occupancy bytes before byte j, slot k lies in the last byte j with ``pre_j <= k``,
    and is that byte's ``(k − pre_j)``-th set bit, read from a (8·256·32)-entry table at
    ``U_j + k`` with ``U_j = 32·(256·j + byte_j) − pre_j``. ``U_j + k`` for every slot comes from
    one scatter-add of the differences ``U_j − U_{j−1}`` at slot ``pre_j`` onto ones, and a
    cumulative sum: a handful of passes over (B, 32) int32, no (B, 64) temporaries and no
    compaction (measured in bench/bench_stream.py). Raises ValueError on a wrong shape or dtype.
    """
    check_boards(boards)
    t = _tables(boards.device)
    n = boards.shape[0]
    occ = boards[:, :8].to(torch.int32)                                       # (B, 8)
    pop = t.pop.index_select(0, occ.view(-1)).view(n, 8)
    pre = pop.cumsum(1, dtype=torch.int32).sub_(pop)                          # pieces before byte j
    u = (occ << 5).add_(t.byte_base).sub_(pre)                                # U_j
    du = u.clone()
    du[:, 1:] -= u[:, :-1]
    du[:, 0] -= 1                                                             # the ones below add k
    first = torch.ones((n, 33), dtype=torch.int32, device=boards.device)
    first.scatter_add_(1, pre.long(), du)                                     # column 32: past the end
    idx = first[:, :32].cumsum(1, dtype=torch.int32)                          # U_j(k) + k
    keys = t.sq16.index_select(0, idx.view(-1)).view(n, 32)
    nib = boards[:, 8:24].to(torch.int32)
    keys |= t.nibble_pair.index_select(0, nib.view(-1)).view(torch.int32).view(n, 32)
    return keys


def piece_count(boards: torch.Tensor) -> torch.Tensor:
    """(B, 32) uint8 -> (B,) int64 number of pieces, kings included (popcount of occupancy).

    On CPU, NumPy's popcount of the occupancy word (about 1 ns a board; NumPy 2); elsewhere a SWAR
    popcount of its two 32-bit halves in torch, held in int64 so that no step can overflow
    (15 ns a board on one CPU core, against 16 for a per-byte table lookup and row sum)."""
    check_boards(boards)
    if boards.device.type == "cpu":
        import numpy as np

        if hasattr(np, "bitwise_count"):  # NumPy 2.0 and later (the project accepts 1.26)
            occ = np.ascontiguousarray(boards.numpy()[:, :8]).view(np.uint64)[:, 0]
            return torch.from_numpy(np.bitwise_count(occ).astype(np.int64))
    return _piece_count_swar(boards)


def _piece_count_swar(boards: torch.Tensor) -> torch.Tensor:
    """:func:`piece_count` in torch ops, any device."""
    n = boards.shape[0]
    words = boards.contiguous().view(torch.int32)                                  # little-endian
    x = torch.cat((words[:, 0], words[:, 1])).to(torch.int64) & 0xFFFFFFFF
    x = x - ((x >> 1) & 0x55555555)
    x = (x & 0x33333333) + ((x >> 2) & 0x33333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F
    x = x + (x >> 8)
    x = (x + (x >> 16)) & 63
    return x[:n] + x[n:]


def compact(values: torch.Tensor, occupied: torch.Tensor, rank: torch.Tensor, width: int) -> torch.Tensor:
    """Gather per-square values of occupied squares into ``(B, width) int32`` lists, −1 padded,
    in ascending square order. values, occupied, rank: (B, 64)."""
    out = torch.full((values.shape[0], width + 1), -1, dtype=torch.int32, device=values.device)
    slot = torch.where(occupied, rank, torch.full_like(rank, width))
    out.scatter_(1, slot, torch.where(occupied, values, -1).to(torch.int32))
    return out[:, :width]
