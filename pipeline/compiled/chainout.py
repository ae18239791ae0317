"""Compiled writers of the chained dump formats for ``nnue convert``: Stockfish ``.binpack`` and viriformat.

Both formats store a game's positions as a chain: one board, then the moves that lead from each
position to the next, with a score per position. The kernels take a run of dataset rows (packed
boards, :mod:`nnue.pipeline.board`; packed moves, scores and results stm POV; plies) and decide
where a row continues the row before (:func:`binpack_links`, :func:`viri_links`), then write the
chains (:func:`binpack_chains`, :func:`viri_games`). Facts of the formats: ``FORMATS.md`` and their
readers, :mod:`nnue.pipeline.formats.binpack` and :mod:`nnue.pipeline.formats.viriformat`, which
read what these write back to the same rows (tested).

**binpack** (what Stockfish's ``CompressedTrainingDataEntryWriter`` makes a continuation): a row
continues the row before when its result is the negation of that row's, its ply that row's plus
one, and its position (pieces, side to move, castling rights, legal en-passant square, halfmove
clock) that row's after its move; and when it has a move itself (every ply of a movetext holds
one). A chain holds at most 65,536 rows (a u16 count of plies after the stem). Binpack holds no
fullmove number (its reader makes it ``ply // 2 + 1``) and standard castling only: a row whose
castling rights are not the standard ones (king on e1/e8, rooks in the corners) is not written
(``kind`` 2; the caller counts it), and plies above 16,383 (14 bits) are written modulo 2^14
(counted). A row without a move is a chain of its own (stem move 0).

**viriformat**: a game is a header (the first position's packed board, eval 0, wdl the game's
result, white POV) and one (move, eval white POV) pair per position; a row continues the row
before when its result is the negation of that row's and its packed board (all but eval and
wdl) is that row's after its move. Rows without a move cannot be written (kind 2).
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..constants import VALUE_NONE
from .bits import lsb, popcount
from .chain import _advance, _unpack_move, load
from .chesscore import CASTLE, KING, KING_ATT, OCC, PAWN, PAWN_ATT, SQ, U64, piece_attacks, write_board

MAX_PLIES = 65535


@njit(cache=True)
def standard_castling(bb):
    """Are the castling rights (rook squares) ones binpack holds: rooks in the corners of their
    own back rank, the king of that colour on e1/e8?"""
    cr = bb[CASTLE]
    if cr & ~(SQ[0] | SQ[7] | SQ[56] | SQ[63]):
        return False
    if cr & (SQ[0] | SQ[7]) and not bb[KING] & SQ[4]:
        return False
    if cr & (SQ[56] | SQ[63]) and not bb[8 + KING] & SQ[60]:
        return False
    return True


@njit(cache=True)
def _follows(boards, r, bb, pc, st, row, nbytes):
    """Is ``boards[r]`` (its first ``nbytes`` bytes) the position of the state ``bb``/``pc``/``st``?"""
    write_board(row, 0, bb, pc, st[0], st[1], st[2], st[3], 0, 1)
    for i in range(nbytes):
        if row[0, i] != boards[r, i]:
            return False
    return True


@njit(cache=True)
def binpack_links(boards, best, result, ply, o_cont, o_kind):
    """For each row: o_cont[r] whether it continues row r − 1 in one binpack chain, o_kind[r] 0
    (written) or 2 (castling rights binpack cannot hold: not written). boards (n, 32) uint8,
    best (n,) int64 (−1 none), result (n,) int64 stm POV, ply (n,) int64."""
    n = boards.shape[0]
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    st = np.zeros(4, np.int64)
    row = np.zeros((1, 32), np.uint8)
    length = 0
    prev_ok = False
    for r in range(n):
        o_cont[r] = False
        ok = load(boards, r, bb, pc, st) and standard_castling(bb)
        o_kind[r] = 0 if ok else 2
        if ok and prev_ok and best[r] >= 0 and length < MAX_PLIES + 1 and result[r] == -result[r - 1] \
                and ply[r] == ply[r - 1] + 1:
            load(boards, r - 1, bb, pc, st)
            f, t, p = _unpack_move(best[r - 1])
            _advance(bb, pc, st, f, t, p)
            # pieces, castling rooks, side to move, en passant, halfmove clock (binpack keeps no fullmove)
            o_cont[r] = _follows(boards, r, bb, pc, st, row, 26)
        length = length + 1 if o_cont[r] else 1
        prev_ok = ok and best[r] >= 0
    return 0


@njit(cache=True, inline="always")
def _zigzag(v):
    return 2 * v if v >= 0 else -2 * v - 1


@njit(cache=True, inline="always")
def _int16(v):
    return ((v + 0x8000) & 0xFFFF) - 0x8000


@njit(cache=True, inline="always")
def _bitlen(n):
    """Bits for the values 0..n−1 (0 when n ≤ 1)."""
    b = 0
    while (1 << b) < n:
        b += 1
    return b


@njit(cache=True)
def _put_bits(out, bp, v, nbits):
    """Write the low ``nbits`` bits of v at bit position bp, most significant bit first."""
    for i in range(nbits - 1, -1, -1):
        if (v >> i) & 1:
            out[bp >> 3] |= np.uint8(0x80 >> (bp & 7))
        bp += 1
    return bp


@njit(cache=True)
def _be16(out, p, v):
    out[p] = (v >> 8) & 255
    out[p + 1] = v & 255


@njit(cache=True)
def _stem(out, p, boards, r, bb, pc, st, best, score, result, ply):
    """The 32-byte stem of row r at out[p:] (binpack's layout: big-endian occupancy, piece
    codes, move, score, ply and result, rule50)."""
    occ = bb[OCC] | bb[OCC + 1]
    for i in range(8):
        out[p + i] = (occ >> U64(56 - 8 * i)) & U64(255)
    us = st[0]
    ep = st[1]
    ep_pawn = -1
    if ep >= 0:
        ep_pawn = ep - 8 if us == 0 else ep + 8
    m = occ
    i = 0
    for j in range(16):
        out[p + 8 + j] = 0
    while m:
        sq = lsb(m)
        m &= m - U64(1)
        c = pc[sq]
        t = c & 7
        col = c >> 3
        code = 2 * t + col
        if sq == ep_pawn:
            code = 12
        elif t == 3 and bb[CASTLE] & SQ[sq]:
            code = 13 + col
        elif t == KING and col == 1 and us == 1:
            code = 15
        out[p + 8 + (i >> 1)] |= code << (4 * (i & 1))
        i += 1
    mv = 0
    if best[r] >= 0:
        f, t2, pr = _unpack_move(best[r])
        flag = best[r] >> 14
        typ = 1 if flag == 3 else 2 if flag == 2 else 3 if flag == 1 else 0
        mv = (typ << 14) | (f << 8) | (t2 << 2) | (pr - 1 if flag == 3 else 0)
    _be16(out, p + 24, mv)
    _be16(out, p + 26, _zigzag(score[r]))
    _be16(out, p + 28, (ply[r] & 0x3FFF) | (_zigzag(result[r]) << 14))
    _be16(out, p + 30, boards[r, 25])


@njit(cache=True)
def _ply_bits(out, bp, bb, pc, st, frm, to, promo):
    """One movetext move (piece index, destination index) at bit bp; returns the new bit position."""
    us = st[0]
    ours = bb[OCC + us]
    theirs = bb[OCC + 1 - us]
    occ = ours | theirs
    bp = _put_bits(out, bp, popcount(ours & (SQ[frm] - U64(1))), _bitlen(popcount(ours)))
    t = pc[frm] & 7
    if t == PAWN:
        targets = theirs
        if st[1] >= 0:
            targets |= SQ[st[1]]
        dest = PAWN_ATT[us, frm] & targets
        step = 8 if us == 0 else -8
        fwd = frm + step
        if 0 <= fwd < 64 and not occ & SQ[fwd]:
            dest |= SQ[fwd]
            if (frm >> 3) == (1 if us == 0 else 6) and not occ & SQ[fwd + step]:
                dest |= SQ[fwd + step]
        idx = popcount(dest & (SQ[to] - U64(1)))
        n = popcount(dest)
        if (frm >> 3) == (6 if us == 0 else 1):
            return _put_bits(out, bp, idx * 4 + promo - 1, _bitlen(4 * n))
        return _put_bits(out, bp, idx, _bitlen(n))
    if t == KING:
        dest = KING_ATT[frm] & ~ours
        n = popcount(dest)
        home = 56 * us
        rights = bb[CASTLE] & (SQ[home] | SQ[home + 7])
        nb = _bitlen(n + popcount(rights))
        if ours & SQ[to]:  # castling, stored as the king taking its rook
            idx = n if to == home else n + (1 if rights & SQ[home] else 0)
            return _put_bits(out, bp, idx, nb)
        return _put_bits(out, bp, popcount(dest & (SQ[to] - U64(1))), nb)
    dest = piece_attacks(t, frm, occ) & ~ours
    return _put_bits(out, bp, popcount(dest & (SQ[to] - U64(1))), _bitlen(popcount(dest)))


@njit(cache=True)
def _vle(out, bp, v):
    """binpack's variable-length u16: 4-bit groups, low first, each with a "more" bit above it."""
    while True:
        g = v & 15
        v >>= 4
        bp = _put_bits(out, bp, g | (16 if v else 0), 5)
        if not v:
            return bp


@njit(cache=True, inline="always")
def _next_chain(kind, cont, r, hi):
    """(first row, row after the last) of the next chain from row r on: rows of a kind other
    than 0 (not written) are passed over; (hi, hi) when none is left (chains end at hi)."""
    while r < hi and kind[r] != 0:
        r += 1
    e = r + 1
    while e < hi and cont[e]:
        e += 1
    return r, min(e, hi)


@njit(cache=True)
def binpack_chains(boards, best, score, result, ply, cont, kind, lo, hi, out, ends):
    """Write the chains of rows lo..hi−1 (a chain starts at lo, and none continues past hi) into
    ``out`` (zeroed, large enough: 34 + 8 bytes a row), one after another; ends[k] the end of
    chain k's bytes. score: (n,) int64 stm POV as binpack stores it (VALUE_NONE where there is
    none). Returns the number of chains."""
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    st = np.zeros(4, np.int64)
    p = 0
    k = 0
    r, e = _next_chain(kind, cont, lo, hi)
    while r < hi:
        load(boards, r, bb, pc, st)
        _stem(out, p, boards, r, bb, pc, st, best, score, result, ply)
        _be16(out, p + 32, e - r - 1)
        bp = 8 * (p + 34)
        last = -score[r]
        for q in range(r + 1, e):
            f, t, pr = _unpack_move(best[q - 1])
            _advance(bb, pc, st, f, t, pr)
            f, t, pr = _unpack_move(best[q])
            bp = _ply_bits(out, bp, bb, pc, st, f, t, pr)
            bp = _vle(out, bp, _zigzag(_int16(score[q] - last)))
            last = -score[q]
        p = (bp + 7) >> 3
        ends[k] = p
        k += 1
        r, e = _next_chain(kind, cont, e, hi)
    return k


@njit(cache=True)
def viri_links(boards, best, result, o_cont, o_kind):
    """For each row: o_cont[r] whether it continues row r − 1 in one viriformat game, o_kind[r]
    0 (written) or 2 (no move: not written)."""
    n = boards.shape[0]
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    st = np.zeros(4, np.int64)
    row = np.zeros((1, 32), np.uint8)
    for r in range(n):
        o_cont[r] = False
        o_kind[r] = 0 if best[r] >= 0 else 2
        if r and best[r] >= 0 and best[r - 1] >= 0 and result[r] == -result[r - 1]:
            if load(boards, r - 1, bb, pc, st):
                f, t, p = _unpack_move(best[r - 1])
                _advance(bb, pc, st, f, t, p)
                o_cont[r] = _follows(boards, r, bb, pc, st, row, 28)
    return 0


@njit(cache=True)
def viri_games(boards, best, score, none, result, cont, kind, lo, hi, out, ends):
    """Write the games of rows lo..hi−1 into ``out`` (32 + 4 bytes a row + 4 a game); ends[k]
    the end of game k's bytes. score: (n,) int64 stm POV; none: (n,) bool no score (written as
    VALUE_NONE). Returns the number of games."""
    p = 0
    k = 0
    r, e = _next_chain(kind, cont, lo, hi)
    while r < hi:
        us = boards[r, 24] >> 7
        for i in range(28):
            out[p + i] = boards[r, i]
        out[p + 28] = 0
        out[p + 29] = 0
        out[p + 30] = (result[r] if us == 0 else -result[r]) + 1
        out[p + 31] = 0
        p += 32
        for q in range(r, e):
            m = best[q]
            out[p] = m & 255
            out[p + 1] = (m >> 8) & 255
            s = VALUE_NONE if none[q] else (score[q] if (boards[q, 24] >> 7) == 0 else -score[q])
            s &= 0xFFFF
            out[p + 2] = s & 255
            out[p + 3] = (s >> 8) & 255
            p += 4
        for i in range(4):
            out[p + i] = 0
        p += 4
        ends[k] = p
        k += 1
        r, e = _next_chain(kind, cont, e, hi)
    return k
