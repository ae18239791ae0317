"""Compiled writers for ``nnue convert``: dataset rows to ``.plain``, bullet text and bulletformat bytes.

Each kernel takes one row group's columns as NumPy arrays and writes the output records into one
byte buffer, with no Python object per row. The text written is what the python-chess writers of
:mod:`nnue.pipeline.convert` write (``chess.Board(unpack_fen(board)).fen()`` and the UCI of the
packed move), on the rows these kernels accept:

* FEN: placement, side to move, castling ``KQkq`` (standard rights only: king on e1/e8, rooks on
  a/h), the en-passant square only when an en-passant capture is legal (python-chess's
  ``fen()`` default), halfmove clock, fullmove number (0 is written as 1, as python-chess does);
* move: ``0000`` when none; promotions as ``e7e8q``; castling (stored king takes rook) as the
  king's two-square step unless the input spelled it king-takes-rook (``ktr``).

A row with castling rights python-chess would read as Chess960 (anything but standard rights)
gets ``ends[r] == ends[r - 1]`` and ``fallback[r] = 1``: :mod:`nnue.pipeline.convert` writes it
with python-chess (rare; counted). Inputs: ``boards`` (n, 32) uint8 packed boards (marlinformat
layout, :mod:`nnue.pipeline.board`), ``score`` (n,) int64 stm POV, ``result`` (n,) int64 stm POV
−1/0/1, ``ply`` (n,) int64, ``best`` (n,) int64 packed move (viriformat layout) or −1 for none,
``none`` (n,) bool: no score (written as VALUE_NONE 32002). Output: ``out`` uint8 buffer of at
least ``ROW_BYTES * n`` bytes, ``ends`` (n,) int64 end offsets, ``fallback`` (n,) uint8.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..constants import VALUE_NONE
from .chesscore import CASTLE, KING, legal_ep
from .fixed import _marlin

U64 = np.uint64
ROW_BYTES = 256  # an upper bound on one output record of any kernel here (a FEN is at most 92 bytes)
_LETTERS = np.frombuffer(b"PNBRQK..pnbrqk..", dtype=np.uint8)
_PROMO = np.frombuffer(b"nbrq", dtype=np.uint8)


@njit(cache=True)
def _int(out, p, v):
    """Write int ``v`` in decimal at ``out[p:]``; returns the new end."""
    if v < 0:
        out[p] = 45  # '-'
        p += 1
        v = -v
    if v == 0:
        out[p] = 48
        return p + 1
    n = 0
    t = v
    while t:
        n += 1
        t //= 10
    for i in range(n - 1, -1, -1):
        out[p + i] = 48 + v % 10
        v //= 10
    return p + n


@njit(cache=True)
def _str(out, p, s):
    for i in range(len(s)):
        out[p + i] = s[i]
    return p + len(s)


@njit(cache=True)
def _square(out, p, sq):
    out[p] = 97 + (sq & 7)
    out[p + 1] = 49 + (sq >> 3)
    return p + 2


@njit(cache=True)
def _standard_rights(bb):
    """Castling mask as standard rights (bit 0 K, 1 Q, 2 k, 3 q), or −1 when a right is not one
    python-chess keeps in standard chess (the row is then Chess960 for python-chess)."""
    rights = bb[CASTLE]
    out = 0
    for c in range(2):
        home = 56 * c
        own = rights & (U64(0xFF) << U64(home))
        if not own:
            continue
        if not (bb[8 * c + KING] & (U64(1) << U64(home + 4))):
            return -1
        if own & ~((U64(1) << U64(home)) | (U64(1) << U64(home + 7))):
            return -1
        if own & (U64(1) << U64(home + 7)):
            out |= 1 << (2 * c)
        if own & (U64(1) << U64(home)):
            out |= 2 << (2 * c)
    return out


@njit(cache=True)
def _fen(boards, r, bb, pc, out, p):
    """FEN of row r (board decoded into bb/pc) at out[p:]; −1 when the row needs python-chess."""
    rights = _standard_rights(bb)
    if rights < 0:
        return -1
    for rank in range(7, -1, -1):
        empty = 0
        for file in range(8):
            code = pc[8 * rank + file]
            if code < 0:
                empty += 1
            else:
                if empty:
                    out[p] = 48 + empty
                    p += 1
                    empty = 0
                out[p] = _LETTERS[code]
                p += 1
        if empty:
            out[p] = 48 + empty
            p += 1
        if rank:
            out[p] = 47  # '/'
            p += 1
    us = np.int64(boards[r, 24] >> 7)
    out[p] = 32
    out[p + 1] = 98 if us else 119
    out[p + 2] = 32
    p += 3
    if rights == 0:
        out[p] = 45
        p += 1
    else:
        for i, ch in enumerate((75, 81, 107, 113)):  # K Q k q
            if rights & (1 << i):
                out[p] = ch
                p += 1
    out[p] = 32
    p += 1
    epb = np.int64(boards[r, 24] & 0x7F)
    ep = legal_ep(bb, pc, us, epb) if epb < 64 else -1
    if ep >= 0:
        p = _square(out, p, ep)
    else:
        out[p] = 45
        p += 1
    out[p] = 32
    p = _int(out, p + 1, np.int64(boards[r, 25]))
    out[p] = 32
    full = np.int64(boards[r, 26]) | (np.int64(boards[r, 27]) << 8)
    return _int(out, p + 1, max(full, 1))


@njit(cache=True)
def _uci(out, p, best, ktr):
    """UCI of a packed move at out[p:] (see the module docstring); best −1: ``0000``."""
    if best < 0:
        for i in range(4):
            out[p + i] = 48
        return p + 4
    frm = best & 63
    to = (best >> 6) & 63
    flag = best >> 14
    if flag == 2 and not ktr and (frm == 4 or frm == 60) and (to == frm + 3 or to == frm - 4):
        to = frm + 2 if to > frm else frm - 2
    p = _square(out, _square(out, p, frm), to)
    if flag == 3:
        out[p] = _PROMO[(best >> 12) & 3]
        p += 1
    return p


@njit(cache=True)
def write_plain(boards, score, result, ply, best, none, ktr, out, ends, fallback):
    """``.plain`` records (``fen``/``move``/``score``/``ply``/``result``/``e``) of rows; see the
    module docstring. Returns the number of fallback rows."""
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    p = 0
    nfb = 0
    for r in range(boards.shape[0]):
        _marlin(boards, r, bb, pc)
        q = _str(out, p, b"fen ")
        q = _fen(boards, r, bb, pc, out, q)
        if q < 0:
            fallback[r] = 1
            nfb += 1
            ends[r] = p
            continue
        q = _str(out, q, b"\nmove ")
        q = _uci(out, q, best[r], ktr)
        q = _str(out, q, b"\nscore ")
        q = _int(out, q, VALUE_NONE if none[r] else score[r])
        q = _str(out, q, b"\nply ")
        q = _int(out, q, ply[r])
        q = _str(out, q, b"\nresult ")
        q = _int(out, q, result[r])
        q = _str(out, q, b"\ne\n")
        p = q
        ends[r] = p
    return nfb


@njit(cache=True)
def write_bullet_text(boards, score, result, none, out, ends, fallback):
    """Bullet text records ``FEN | score | result`` (white POV, result 1.0/0.5/0.0) of rows."""
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    p = 0
    nfb = 0
    for r in range(boards.shape[0]):
        _marlin(boards, r, bb, pc)
        q = _fen(boards, r, bb, pc, out, p)
        if q < 0:
            fallback[r] = 1
            nfb += 1
            ends[r] = p
            continue
        sign = -1 if boards[r, 24] >> 7 else 1
        q = _str(out, q, b" | ")
        q = _int(out, q, VALUE_NONE if none[r] else score[r] * sign)
        w = result[r] * sign
        q = _str(out, q, b" | 1.0\n" if w > 0 else b" | 0.5\n" if w == 0 else b" | 0.0\n")
        p = q
        ends[r] = p
    return nfb


@njit(cache=True)
def write_bulletformat(boards, score, result, none, out):
    """32-byte bulletformat records of rows into ``out`` (n, 32) uint8: the board seen from the
    side to move (squares flipped when black is to move; bit 3 = the opponent's piece), score
    stm POV (VALUE_NONE when none), result + 1, own king square, opponent's king square ^ 56."""
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    rel = np.full(64, -1, np.int8)
    for r in range(boards.shape[0]):
        _marlin(boards, r, bb, pc)
        black = boards[r, 24] >> 7
        flip = 56 if black else 0
        own_king = opp_king = 0
        for sq in range(64):
            rel[sq] = -1
        for sq in range(64):
            code = pc[sq]
            if code >= 0:
                own = (code >> 3) == black
                rel[sq ^ flip] = (code & 7) | (0 if own else 8)
                if code & 7 == 5:
                    if own:
                        own_king = sq ^ flip
                    else:
                        opp_king = sq ^ flip
        occ = U64(0)
        lo = U64(0)
        hi = U64(0)
        i = 0
        for sq in range(64):
            if rel[sq] >= 0:
                occ |= U64(1) << U64(sq)
                if i < 16:
                    lo |= U64(rel[sq]) << U64(4 * i)
                else:
                    hi |= U64(rel[sq]) << U64(4 * (i - 16))
                i += 1
        for j in range(8):
            out[r, j] = (occ >> U64(8 * j)) & U64(255)
            out[r, 8 + j] = (lo >> U64(8 * j)) & U64(255)
            out[r, 16 + j] = (hi >> U64(8 * j)) & U64(255)
        s = (VALUE_NONE if none[r] else score[r]) & 0xFFFF
        out[r, 24] = s & 255
        out[r, 25] = s >> 8
        out[r, 26] = result[r] + 1
        out[r, 27] = own_king
        out[r, 28] = opp_king ^ 56
        out[r, 29] = 0
        out[r, 30] = 0
        out[r, 31] = 0
