"""Variable-length feature lists in torch, for the sets that are not one feature per piece
(Full_Threats, PP_3Wide and their composition): the board as piece ids, the perspective's
orientation, and the layout of flat entries (board, value) as fixed-width −1-padded lists.

Torch ops only, any device, no per-position Python. On CPU an overflowing list (more active
features than the list holds) raises ValueError naming the board; on other devices the check is
a ``torch._assert_async``.
"""
from __future__ import annotations

import torch

from .board_tensor import black_to_move, slot_keys
from .lookup import board_kings

#: piece id of an empty square in :func:`piece_ids` (0..11: colour·6 + type, P N B R Q K = 0..5)
EMPTY = 12
NUM_IDS = 13


_PID: dict[torch.device, torch.Tensor] = {}


def _pid_of_code(device: torch.device) -> torch.Tensor:
    """(16,) uint8: marlinformat nibble -> piece id (castling rook 6 -> rook; 7, 15 -> EMPTY)."""
    t = _PID.get(device)
    if t is None:
        code = torch.arange(16)
        kind = torch.where(code & 7 == 6, 3, code & 7)
        t = _PID[device] = torch.where(kind < 6, (code >> 3) * 6 + kind, EMPTY).to(torch.uint8).to(device)
    return t


def piece_ids(boards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 32) uint8 -> (ids (B, 64) uint8, occupancy (B,) int64 bitboard, a1 = bit 0).

    ids: colour·6 + type (P N B R Q K = 0..5; a rook with a castling right is a rook) on each
    square, :data:`EMPTY` where there is no piece (or an unused piece code, which the king check
    of :func:`orientation` refuses)."""
    keys = slot_keys(boards)
    ids = torch.full((boards.shape[0], 65), EMPTY, dtype=torch.uint8, device=boards.device)
    ids.scatter_(1, (keys >> 4).long(), _pid_of_code(boards.device)[keys & 15])  # empty slots: column 64
    occ = boards[:, :8].contiguous().view(torch.int64).view(-1)  # little-endian u64
    return ids[:, :64], occ


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


def assemble(parts, n: int, width: int, what: str, first_row: int = 0) -> torch.Tensor:
    """Lay out flat feature entries as fixed-width lists: parts, each ``(rows, values)`` of (M,)
    tensors with rows ``q·n + board`` (q 0: stm, 1: nstm) ascending, entries of one row in list
    order -> (2, n, width) int32, each row the entries of part 0, then part 1, ..., then −1.
    Raises ValueError (CPU; an async assert elsewhere) naming the board when a row holds more
    than ``width``; ``what`` names the lists."""
    device = parts[0][0].device
    out = torch.full((2 * n * width,), -1, dtype=torch.int32, device=device)
    filled = torch.zeros(2 * n, dtype=torch.int64, device=device)
    for rows, values in parts:
        counts = torch.bincount(rows, minlength=2 * n)
        start = counts.cumsum(0) - counts - filled
        pos = torch.arange(rows.shape[0], device=device) - start[rows]
        keep = pos < width
        out.index_put_(((rows * width + pos)[keep],), values[keep].to(torch.int32))
        filled += counts
    _check_width(filled.view(2, n).amax(0), width, what, first_row)
    return out.view(2, n, width)


def _check_width(count: torch.Tensor, width: int, what: str, first_row: int) -> None:
    bad = count > width
    if count.device.type == "cpu":
        if bool(bad.any()):
            row = first_row + int(bad.nonzero()[0, -1])
            raise ValueError(f"board {row}: more than {width} active {what} features "
                             f"({int(count.max())}); no chess game reaches that many")
    else:
        torch._assert_async(~bad.any(), f"a board with more than {width} active {what} features")


def row_entries(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, N) bool -> (rows, columns) of the set entries, (M,) int64 each, row by row, columns
    ascending within a row."""
    return torch.nonzero(mask, as_tuple=True)


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


class ListEncoder:
    """``encode(boards) -> (stm, nstm)``, (B, width) int32 each, for a set whose lists are laid
    out from flat entries (torch, any device; CPU boards in chunks of ``chunk``).

    entries: ``(boards, ids, occ, orient) -> [(rows, values), ...]``, the parts of the list in
    order (:func:`assemble`), from :func:`piece_ids` and :func:`orientation`. what: the name in
    the overflow error."""

    def __init__(self, entries, width: int, chunk: int, what: str):
        self.entries, self.max_active, self.chunk, self.what = entries, width, chunk, what

    def __call__(self, boards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return chunked(boards, self.max_active, self.chunk, self._encode)

    def _encode(self, boards: torch.Tensor, first_row: int) -> torch.Tensor:
        orient = orientation(boards, first_row)
        ids, occ = piece_ids(boards)
        return assemble(self.entries(boards, ids, occ, orient), boards.shape[0], self.max_active, self.what,
                        first_row)
