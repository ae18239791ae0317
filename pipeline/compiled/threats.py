"""Compiled (numba) encoder of the SFNNv16 inputs from packed boards: Full_Threats, PP_3Wide, HalfKAv2_hm, alone or together.

The CPU fast path of the torch encoders in :mod:`nnue.pipeline.features.full_threats`,
:mod:`~nnue.pipeline.features.pp_3wide` and :mod:`~nnue.pipeline.features.sfnnv16`, with the same
output (lists, order, −1 padding, refusals): a board's attacks are generated once with bitboards
(:mod:`.chesscore`'s attack tables, blocked sliders through the occupancy) and indexed for each
perspective through the formula's decomposed tables, which the feature modules hand over
(``full_threats.numba_tables``, HalfKAv2_hm's lookup table), so this module holds no formula of
its own. One pass per board, no temporaries beyond a few small arrays; single-threaded.
"""
from __future__ import annotations

import numpy as np
import torch
from numba import njit

from .bits import lsb
from .chesscore import KNIGHT_ATT, PAWN_ATT, bishop_att, rook_att

U64 = np.uint64
FILE_A = 0x0101010101010101
RANKS_2_7 = 0x00FFFFFFFFFFFF00
# error codes of the kernel's result (row·4 + code)
BAD_KINGS, OVERFLOW = 1, 2


def _pair_masks() -> np.ndarray:
    """Squares on the same or an adjacent file, ranks 2–7, without the square itself."""
    out = np.zeros(64, dtype=U64)
    for s in range(64):
        f = s % 8
        files = 0
        for ff in (f - 1, f, f + 1):
            if 0 <= ff < 8:
                files |= FILE_A << ff
        out[s] = U64(files & RANKS_2_7 & ~(1 << s) & 0xFFFFFFFFFFFFFFFF)
    return out


PAIR_MASK = _pair_masks()


@njit(cache=True)
def _encode(boards, out, do_thr, do_pp, do_psq, part, slot, psq_table, pp_base, psq_base):
    """boards (n, 32) uint8; out (2, n, W) int32, filled. Returns −1, or row·4 + code for the
    first bad board (BAD_KINGS: not one king a side or an unused piece code; OVERFLOW: more than
    W active)."""
    n, width = boards.shape[0], out.shape[2]
    pc = np.zeros(64, np.int64)          # colour·8 + type, castling rook as rook
    nib = np.zeros(64, np.int64)         # raw nibble (HalfKAv2_hm's table key)
    af = np.empty(640, np.int64)         # attacks: from, to (perspective-free, in list order)
    at = np.empty(640, np.int64)
    bb = np.zeros(16, np.uint64)
    kings = np.zeros(2, np.int64)
    one = U64(1)
    for r in range(n):
        occ = U64(0)
        for i in range(8):
            occ |= U64(boards[r, i]) << U64(8 * i)
        bb[:] = 0
        nk0, nk1, j, bad = 0, 0, 0, False
        b = occ
        while b:
            s = lsb(b)
            b &= b - one
            if j >= 32:
                bad = True
                break
            v = (np.int64(boards[r, 8 + (j >> 1)]) >> (4 * (j & 1))) & 15
            j += 1
            c, t = v >> 3, v & 7
            if t == 7:
                bad = True
                break
            if t == 6:
                t = 3
            pc[s] = 8 * c + t
            nib[s] = v
            bb[8 * c + t] |= one << U64(s)
            if t == 5:
                kings[c] = s
                if c == 0:
                    nk0 += 1
                else:
                    nk1 += 1
        if bad or nk0 != 1 or nk1 != 1:
            return r * 4 + BAD_KINGS
        stm = np.int64(boards[r, 24] >> 7)

        na = 0
        if do_thr:
            minor = bb[0] | bb[1] | bb[2] | bb[3] | bb[8] | bb[9] | bb[10] | bb[11]
            queen_t = minor | bb[4] | bb[12]
            pawn_t = bb[1] | bb[3] | bb[9] | bb[11]
            b = occ
            while b:
                s = lsb(b)
                b &= b - one
                c, t = pc[s] >> 3, pc[s] & 7
                if t == 5:
                    continue
                if t == 0:
                    if s < 8 or s >= 56:
                        continue
                    att = PAWN_ATT[c, s] & pawn_t
                elif t == 1:
                    att = KNIGHT_ATT[s] & queen_t
                elif t == 2:
                    att = bishop_att(s, occ) & minor
                elif t == 3:
                    att = rook_att(s, occ) & minor
                else:
                    att = (bishop_att(s, occ) | rook_att(s, occ)) & queen_t
                while att:
                    af[na] = s
                    at[na] = lsb(att)
                    att &= att - one
                    na += 1
        pawns = (bb[0] | bb[8]) & U64(RANKS_2_7)

        for q in range(2):
            p = stm ^ q
            k = kings[p]
            x = (56 * p) ^ (7 if (k & 7) >= 4 else 0)
            m = 0
            for i in range(na):
                f, t_sq = af[i], at[i]
                a, d = pc[f], pc[t_sq]
                ta, td = a & 7, d & 7
                fo, to = f ^ x, t_sq ^ x
                if ta == td and fo < to:
                    continue
                ar = 5 * ((a >> 3) ^ p) + ta
                if m >= width:
                    return r * 4 + OVERFLOW
                out[q, r, m] = part[ar, fo, to] + slot[ar, 5 * ((d >> 3) ^ p) + td]
                m += 1
            if do_pp:
                b = pawns
                while b:
                    s = lsb(b)
                    b &= b - one
                    ida = 48 * ((pc[s] >> 3) ^ p) + (s ^ x) - 8
                    partners = PAIR_MASK[s] & pawns & ~((one << U64(s + 1)) - one)
                    while partners:
                        s2 = lsb(partners)
                        partners &= partners - one
                        idb = 48 * ((pc[s2] >> 3) ^ p) + (s2 ^ x) - 8
                        hi, lo = max(ida, idb), min(ida, idb)
                        if m >= width:
                            return r * 4 + OVERFLOW
                        out[q, r, m] = pp_base + hi * (hi - 1) // 2 + lo
                        m += 1
            if do_psq:
                base = (p * 64 + k) * 1040
                b = occ
                while b:
                    s = lsb(b)
                    b &= b - one
                    if m >= width:
                        return r * 4 + OVERFLOW
                    out[q, r, m] = psq_base + psq_table[base + 16 * s + nib[s]]
                    m += 1
            for i in range(m, width):
                out[q, r, i] = -1
    return -1


_NAMES = {(True, False, False): "Full_Threats", (False, True, False): "PP_3Wide"}


def encode_set(boards: torch.Tensor, width: int, parts: tuple[bool, bool, bool], part: np.ndarray,
               slot: np.ndarray, psq_table: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 32) uint8 CPU boards (already checked for shape and dtype) -> (stm, nstm), each
    (B, width) int32: the lists of the parts ``(threats, pawn pairs, HalfKAv2_hm)`` that are on,
    in that order, index ranges packed one after another (pawn pairs from 59,808 and HalfKAv2_hm
    from 64,368 when threats are on). Tables: ``part`` (10, 64, 64) and ``slot`` (10, 10) int32
    of ``full_threats.numba_tables``, HalfKAv2_hm's lookup table (2·64·1040,) int32. Raises
    ValueError on a non-CPU tensor, a board without one king a side or with an unused piece
    code, or more than ``width`` active features (naming the board)."""
    if boards.device.type != "cpu":
        raise ValueError(f"the compiled encoder takes CPU boards, not {boards.device}")
    do_thr, do_pp, do_psq = parts
    pp_base = 59_808 if do_thr else 0
    psq_base = pp_base + 4_560 if do_pp else pp_base
    out = np.empty((2, boards.shape[0], width), dtype=np.int32)
    err = _encode(np.ascontiguousarray(boards.numpy()), out, do_thr, do_pp, do_psq, part, slot, psq_table,
                  pp_base, psq_base)
    if err >= 0:
        row, code = divmod(int(err), 4)
        if code == BAD_KINGS:
            raise ValueError(f"board {row}: a king-relative feature set needs exactly one king of "
                             f"each colour and valid piece codes")
        raise ValueError(f"board {row}: more than {width} active {_NAMES.get(parts, 'Full_Threats+PP_3Wide+HalfKAv2_hm')} features; "
                         f"no chess game reaches that many")
    t = torch.from_numpy(out)
    return t[0], t[1]
