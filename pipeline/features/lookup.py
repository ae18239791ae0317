"""Table-driven feature encoding: one lookup per piece and perspective, shared by the feature sets.

Every feature set here indexes a piece by four things: the perspective's colour ``p`` (0 white,
1 black), the square ``k`` of that perspective's own king, the piece's square ``s`` and its
marlinformat nibble code ``c`` (colour·8 + type). Over all 2 · 64 · 65 · 16 combinations
(square 64 = an empty slot) that is a table of 133,120 int32 entries (520 KiB), built once per
device from the feature set's formula. Encoding a batch is then:

1. :func:`~nnue.pipeline.features.board_tensor.slot_keys`: ``16·s + c`` for the 32 slots;
2. the two king squares, from one more table lookup and a row sum (which also validates the
   board: exactly one king a side, no unused piece code);
3. one ``index_select`` of ``(p·64 + k)·1040 + key`` for both perspectives at once.

Indices come out in ascending order of the piece's absolute square (a1 = 0 .. h8 = 63), then
−1 padding. A set whose kings are not features (HalfKP) drops the two king slots from the keys
before the lookup (:func:`drop_king_slots`), so its lists are 30 wide and padded at the end. All
of it is torch ops on the boards' device; no per-position Python.

:meth:`TableEncoder.lookup_keys` stops before step 3: it returns the keys and the two table
offsets, for a caller that gathers from its own copy of the table, only the columns it needs
(integer inference: the rows of its feature-transformer table, as wide as a step's largest
piece count).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .board_tensor import EMPTY_SQ, NUM_KEYS, black_to_move, check_boards, slot_keys

KING = 5
# Rows encoded per step on CPU. Measured (bench/bench_stream.py machine, one core, halfkav2_hm):
# 3.9M pos/s in chunks of 4096 against 1.9M for whole batches of 16384, whose fresh multi-MB
# temporaries cost page faults and fall out of cache; 1024 pays torch's per-op dispatch (2.2M).
CPU_CHUNK = 4096
_NO_KING = 64  # field value offset: a king square s is stored as 64 + s, so 0 means "none"
_FIELD = 12    # bits per king field in the row sum: 32 kings · 127 < 2^12


@dataclass(frozen=True)
class Grid:
    """Every (perspective, own king square, square, code) combination as broadcastable int64
    tensors of shape (2, K, 65, 16) (K = 64, or 1 for a king-independent set). ``colour``: the
    piece's colour (0 white, 1 black); ``ptype``: P N B R Q K = 0..5 (a castling rook is a rook);
    ``valid``: a real piece (square < 64 and a used code)."""

    p: torch.Tensor
    k: torch.Tensor
    s: torch.Tensor
    colour: torch.Tensor
    ptype: torch.Tensor
    valid: torch.Tensor


def make_grid(king_relative: bool) -> Grid:
    K = 64 if king_relative else 1
    p = torch.arange(2).view(2, 1, 1, 1)
    k = torch.arange(K).view(1, K, 1, 1)
    s = torch.arange(EMPTY_SQ + 1).view(1, 1, -1, 1)
    code = torch.arange(16).view(1, 1, 1, 16)
    raw = code & 7
    ptype = torch.where(raw == 6, 3, raw)
    valid = (raw != 7) & (s < EMPTY_SQ)
    return Grid(p, k, s, code >> 3, ptype, valid)


class TableEncoder:
    """``encode(boards) -> (stm, nstm)`` for a feature set given by its index formula.

    index: ``Grid -> int64 tensor`` broadcastable to (2, K, 65, 16), the feature of every
    combination (its value where ``valid`` is false is ignored). It may leave out the kings
    (a negative value for every king: HalfKP), nothing else. num_inputs: every index must be
    below it. max_active: list width (30 when kings are left out, else 32). king_relative: the
    formula reads ``k`` (the boards must then hold exactly one king a side).
    Raises ValueError when the table breaks any of these.
    """

    def __init__(self, index: Callable[[Grid], torch.Tensor], num_inputs: int, max_active: int,
                 king_relative: bool = True):
        grid = make_grid(king_relative)
        shape = (2, 64 if king_relative else 1, EMPTY_SQ + 1, 16)
        table = torch.where(grid.valid, index(grid), -1).expand(shape).clamp(min=-1)
        if int(table.max()) >= num_inputs:
            raise ValueError(f"feature table reaches {int(table.max())} >= num_inputs {num_inputs}")
        valid = grid.valid.expand(shape)
        holes = valid & (table < 0)
        kings = valid & (grid.ptype == KING).expand(shape)
        self.drops_kings = bool(holes.any())
        if self.drops_kings and not (king_relative and torch.equal(holes, kings)):
            raise ValueError("a feature formula may leave out the kings (all of them), nothing else")
        if max_active != (30 if self.drops_kings else 32):
            raise ValueError(f"max_active {max_active} does not match the formula "
                             f"({30 if self.drops_kings else 32} pieces can be features)")
        self.table_cpu = table.to(torch.int32).reshape(-1).contiguous()
        self.max_active, self.king_relative = max_active, king_relative
        self._tables: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}

    def _device_tables(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        t = self._tables.get(device)
        if t is None:
            t = self._tables[device] = (self.table_cpu.to(device), _king_values().to(device))
        return t

    def __call__(self, boards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """boards: (B, 32) uint8 -> (stm, nstm), each (B, max_active) int32, −1 padded.
        Raises ValueError on a wrong shape or dtype, and (king-relative sets, CPU tensors) on a
        board without exactly one king a side or with an unused piece code; on CUDA that check
        is an asynchronous device assert."""
        check_boards(boards)
        n = boards.shape[0]
        if boards.device.type != "cpu" or n <= CPU_CHUNK:
            out = self._encode(boards, 0)
        else:
            out = torch.empty((2, n, self.max_active), dtype=torch.int32)
            for start in range(0, n, CPU_CHUNK):
                out[:, start:start + CPU_CHUNK] = self._encode(boards[start:start + CPU_CHUNK], start)
        return out[0], out[1]

    def encode_numba(self, boards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """:meth:`__call__` for CPU boards, compiled (:mod:`nnue.pipeline.compiled.lookup`, which
        loads numba on first call): the same lists from the same table, the same ValueError for a
        bad board; about a tenth of the torch path's time a board (bench/bench_stream.py). A
        board of more than 32 pieces, which no packer writes, sends the batch through the torch
        path. Boards on another device go through the torch path."""
        check_boards(boards)
        if boards.device.type != "cpu":
            return self(boards)
        import numpy as np

        from nnue.pipeline.compiled.lookup import BAD_KINGS, encode_table

        n = boards.shape[0]
        table = self.__dict__.get("_table_np")
        if table is None:
            table = self._table_np = self.table_cpu.numpy()
        out = np.empty((2, n, self.max_active), np.int32)
        words = np.ascontiguousarray(boards.numpy()).view(np.uint64)
        err = int(encode_table(words, table, self.king_relative, self.drops_kings, out))
        if err >= 0:
            row, why = divmod(err, 4)
            if why == BAD_KINGS:
                raise ValueError(f"board {row}: a king-relative feature set needs exactly one king of "
                                 f"each colour and valid piece codes")
            return self(boards)
        t = torch.from_numpy(out)
        return t[0], t[1]

    def _keys(self, boards: torch.Tensor, first_row: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, 32) uint8 -> (slot keys (B, max_active), table offsets (2, B)), int32: entry
        ``off[p] + keys`` of the table is the list of perspective p (0 stm, 1 nstm)."""
        _, king_values = self._device_tables(boards.device)
        keys = slot_keys(boards)
        btm = black_to_move(boards).to(torch.int32)
        if self.king_relative:
            kw, kb = king_squares(keys, king_values, first_row)
            k_stm, k_nstm = torch.where(btm == 1, kb, kw), torch.where(btm == 1, kw, kb)
            off = torch.stack(((btm * 64 + k_stm), ((1 - btm) * 64 + k_nstm))) * NUM_KEYS
            if self.drops_kings:
                keys = drop_king_slots(keys, kw, kb)
        else:
            off = torch.stack((btm, 1 - btm)) * NUM_KEYS
        return keys, off

    def _encode(self, boards: torch.Tensor, first_row: int) -> torch.Tensor:
        """(B, 32) uint8 -> (2, B, max_active) int32: stm lists, then nstm lists."""
        table, _ = self._device_tables(boards.device)
        n = boards.shape[0]
        keys, off = self._keys(boards, first_row)
        idx = keys.unsqueeze(0) + off.unsqueeze(2)                             # (2, B, width)
        return table.index_select(0, idx.view(-1)).view(2, n, keys.shape[1])

    def lookup_keys(self, boards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Where the feature lists come from, for callers that gather from their own copy of the
        table: (B, 32) uint8 -> ``(keys, offsets)``, keys (B, max_active) int32 and offsets
        (B, 2) int32, such that ``table[offsets[i, p] + keys[i]]`` is the list of perspective p
        (0 stm, 1 nstm) of board i that :meth:`__call__` returns (−1 padding included, at the
        end), ``table`` being :attr:`table_cpu` or its copy on the boards' device. Same checks
        and errors as :meth:`__call__`."""
        check_boards(boards)
        n = boards.shape[0]
        if boards.device.type != "cpu" or n <= CPU_CHUNK:
            keys, off = self._keys(boards, 0)
            return keys, off.T
        parts = [self._keys(boards[start:start + CPU_CHUNK], start) for start in range(0, n, CPU_CHUNK)]
        return torch.cat([k for k, _ in parts]), torch.cat([o for _, o in parts], 1).T


def _king_values() -> torch.Tensor:
    """Per-key contribution to the king row sum: a white king on s adds 64 + s, a black king
    (64 + s) << 12, an unused code (type 7) on a real square 1 << 24; empty slots add 0."""
    key = torch.arange(NUM_KEYS)
    s, code = key >> 4, key & 15
    real = s < EMPTY_SQ
    v = torch.zeros(NUM_KEYS, dtype=torch.int64)
    v = torch.where(real & (code == KING), _NO_KING + s, v)
    v = torch.where(real & (code == 8 + KING), (_NO_KING + s) << _FIELD, v)
    v = torch.where(real & ((code & 7) == 7), 1 << (2 * _FIELD), v)
    return v.to(torch.int32)


def king_squares(keys: torch.Tensor, king_values: torch.Tensor,
                 first_row: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 32) slot keys -> (white king square, black king square), each (B,) int32.

    Raises ValueError (CPU) naming the first bad row when a board does not have exactly one king
    of each colour or holds an unused piece code; on other devices the check is a
    ``torch._assert_async``, and the squares are masked into range, so a bad board cannot index
    out of the table. first_row: index of the first board, for the message."""
    n = keys.shape[0]
    total = king_values.index_select(0, keys.view(-1)).view(n, 32).sum(1, dtype=torch.int32)
    # minus 64 in each field: a board is good when only the two 6-bit square fields remain set
    # (no king: the field borrows; two kings: bit 6 or above; bad code: bit 24 or above)
    sq = total - ((_NO_KING << _FIELD) | _NO_KING)
    bad = (sq & ~((63 << _FIELD) | 63)) != 0
    if keys.device.type == "cpu":
        if bool(bad.any()):
            row = first_row + int(bad.nonzero()[0, 0])
            raise ValueError(f"board {row}: a king-relative feature set needs exactly one king of "
                             f"each colour and valid piece codes")
    else:
        torch._assert_async(~bad.any(), "board without exactly one king a side, or a bad piece code")
    return sq & 63, (sq >> _FIELD) & 63


_KING_VALUES: dict[torch.device, torch.Tensor] = {}


def board_kings(boards: torch.Tensor, first_row: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 32) uint8 packed boards -> (white king square, black king square), each (B,) int32,
    validated as :func:`king_squares` does (ValueError naming the board on CPU, a device assert
    elsewhere). For feature sets that are not table lookups (Full_Threats, PP_3Wide) but orient
    by the king."""
    kv = _KING_VALUES.get(boards.device)
    if kv is None:
        kv = _KING_VALUES[boards.device] = _king_values().to(boards.device)
    return king_squares(slot_keys(boards), kv, first_row)


def drop_king_slots(keys: torch.Tensor, kw: torch.Tensor, kb: torch.Tensor) -> torch.Tensor:
    """(B, 32) slot keys without the two king slots: (B, 30), order kept.

    Keys ascend along a row (16·square + code), so a king's slot is where its key sorts
    (``searchsorted``); with the two king slots s1 < s2, output m reads slot
    ``m + [m ≥ s1] + [m ≥ s2 − 1]``: two selects between shifted views, no scatter."""
    slots = torch.searchsorted(keys, torch.stack((kw * 16 + KING, kb * 16 + 8 + KING), 1).to(keys.dtype))
    a, b = slots[:, :1], slots[:, 1:]
    s1, s2 = torch.minimum(a, b), torch.maximum(a, b) - 1
    m = torch.arange(30, device=keys.device)
    return torch.where(m < s1, keys[:, :30], torch.where(m < s2, keys[:, 1:31], keys[:, 2:]))
