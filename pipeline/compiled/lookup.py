"""Compiled (numba) table encoder: a piece-per-feature set's lists from packed boards, on the CPU.

The CPU fast path of :class:`nnue.pipeline.features.lookup.TableEncoder` (each such set's
``encode_numba``), with the same output: for each board and perspective, the table entry of
every piece in ascending square order (the marlinformat nibbles are already in that order),
−1 padded; the kings left out for a set whose formula drops them (HalfKP). The table is the
torch encoder's own (``TableEncoder.table_cpu``: entry ``(p·K + k)·1040 + 16·s + code``), so this
module holds no formula.

Per board: the two king squares come from the nibble words without a loop (the slot whose
nibble is the king's code, by a SWAR zero-nibble test, then that slot's square in the
occupancy), which also validates the board as the torch encoder does for a king-relative set
(exactly one king a side, no unused piece code among the pieces); then one pass over the pieces,
two table loads each. A board with more than 32 occupied squares, which no packer writes, is
handed back (the caller encodes the batch with torch, whose output is the reference).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .bits import lsb, popcount
from .chain import LOWN, _nth

U64 = np.uint64
NIB_LOW = U64(0x7777777777777777)
NIB_ONE = U64(0x1111111111111111)
BAD_KINGS, TOO_MANY = 1, 2  # why a board is handed back: row · 4 + this


@njit(cache=True, inline="always")
def _zero_nibbles(x):
    """Bit 3 of each nibble of x set where that nibble is 0, every other bit clear."""
    return ~(((x & NIB_LOW) + NIB_LOW) | x | NIB_LOW)


@njit(cache=True, inline="always")
def _slot_of(lo, hi, vlo, vhi, code):
    """(count, first slot) of the nibbles equal to ``code`` among the valid ones (masks vlo,
    vhi) of the 32-nibble string (lo, hi); the slot is 32 when there is none."""
    c = U64(code) * NIB_ONE
    mlo = _zero_nibbles(lo ^ c) & vlo
    mhi = _zero_nibbles(hi ^ c) & vhi
    n = popcount(mlo) + popcount(mhi)
    slot = lsb(mlo) >> 2 if mlo else (16 + (lsb(mhi) >> 2) if mhi else 32)
    return n, slot


@njit(cache=True)
def encode_table(words, table, king_relative, drop_kings, out):
    """words (n, 4) uint64: packed boards (n, 32) uint8 viewed as words; table: the set's int32
    lookup table (2·K·1040,); out (2, n, W) int32: stm lists, then nstm lists, filled.
    Returns −1, or row·4 + why for the first board handed back (BAD_KINGS: a king-relative set
    and not one king a side or an unused piece code; TOO_MANY: more than 32 pieces)."""
    n = words.shape[0]
    width = out.shape[2]
    for r in range(n):
        occ = words[r, 0]
        lo = words[r, 1]
        hi = words[r, 2]
        pieces = popcount(occ)
        if pieces > 32:
            return r * 4 + TOO_MANY
        btm = np.int64((words[r, 3] >> U64(7)) & U64(1))
        if king_relative:
            vlo = LOWN[U64(min(pieces, 16))] & ~NIB_LOW  # bit 3 of each nibble of a real piece
            vhi = LOWN[U64(max(pieces - 16, 0))] & ~NIB_LOW
            nw, sw = _slot_of(lo, hi, vlo, vhi, 5)
            nb, sb = _slot_of(lo, hi, vlo, vhi, 13)
            # an unused code: type 7 (nibble 7 or 15), i.e. its low three bits all set
            unused = (_zero_nibbles((lo & NIB_LOW) ^ NIB_LOW) & vlo) | (_zero_nibbles((hi & NIB_LOW) ^ NIB_LOW) & vhi)
            if nw != 1 or nb != 1 or unused:
                return r * 4 + BAD_KINGS
            kw = _nth(occ, sw)
            kb = _nth(occ, sb)
            base0 = (btm * 64 + (kb if btm else kw)) * 1040
            base1 = ((1 - btm) * 64 + (kw if btm else kb)) * 1040
        else:
            base0 = btm * 1040
            base1 = (1 - btm) * 1040
        m = occ
        j = 0
        o0 = out[0, r]
        o1 = out[1, r]
        x = lo
        for i in range(pieces):
            if i == 16:
                x = hi
            s = lsb(m)
            m &= m - U64(1)
            code = x & U64(15)
            x >>= U64(4)
            if drop_kings and (code & U64(7)) == U64(5):
                continue
            key = U64(16 * s) + code
            # unsigned indices: numba checks a signed one for wraparound on every access
            o0[U64(j)] = table[U64(base0) + key]
            o1[U64(j)] = table[U64(base1) + key]
            j += 1
        for i in range(j, width):
            o0[U64(i)] = -1
            o1[U64(i)] = -1
    return -1
