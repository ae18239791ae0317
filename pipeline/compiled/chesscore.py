"""Compiled chess rules for the record decoders: attack tables, move legality, making moves and
packing boards, with python-chess's semantics on the positions they accept.

Board state (numba-friendly, no objects):

* ``bb``: uint64[16]. ``bb[t + 8c]`` is the bitboard of pieces of type t (0..5 = P N B R Q K)
  and colour c (0 white, 1 black); ``bb[CASTLE]`` the castling rights as a mask of rook
  squares (python-chess's ``castling_rights``); ``bb[OCC + c]`` colour c's occupancy.
* ``pc``: int8[64], the piece code ``t + 8c`` on each square, −1 when empty.
* side to move ``us`` (0/1), en-passant square ``ep`` (python-chess's ``ep_square``: set after
  every double push, whether or not a capture is possible; −1 for none), counters.

Only standard (non-Chess960) castling is modelled: king on e1/e8 taking its own rook on a/h as
the move, the rights python-chess's ``clean_castling_rights`` keeps in standard mode. Callers
accept only positions that python-chess's ``Board.status()`` calls valid (see
:func:`stem_status`), where legality below equals python-chess's ``Board.is_legal``.
"""
from __future__ import annotations

import chess
import numpy as np
from numba import njit

from .bits import lsb, msb, popcount

U64 = np.uint64
CASTLE, OCC = 6, 14
PAWN, KNIGHT, BISHOP, ROOK, QUEEN, KING = range(6)

SQ = np.array([1 << s for s in range(64)], dtype=U64)
KNIGHT_ATT = np.array(chess.BB_KNIGHT_ATTACKS, dtype=U64)
KING_ATT = np.array(chess.BB_KING_ATTACKS, dtype=U64)
PAWN_ATT = np.array([chess.BB_PAWN_ATTACKS[chess.WHITE], chess.BB_PAWN_ATTACKS[chess.BLACK]], dtype=U64)
BACKRANKS = U64(chess.BB_BACKRANKS)
RANK_MASK = np.array([chess.BB_RANK_1, chess.BB_RANK_8], dtype=U64)
# directions 0..3 increase the square (first blocker = lowest bit), 4..7 decrease it (highest)
_DIRS = [(0, 1), (1, 0), (1, 1), (-1, 1), (0, -1), (-1, 0), (-1, -1), (1, -1)]


def _rays() -> np.ndarray:
    out = np.zeros((8, 64), dtype=U64)
    for d, (df, dr) in enumerate(_DIRS):
        for sq in range(64):
            f, r, m = sq & 7, sq >> 3, 0
            while True:
                f, r = f + df, r + dr
                if not (0 <= f < 8 and 0 <= r < 8):
                    break
                m |= 1 << (8 * r + f)
            out[d, sq] = m
    return out


RAYS = _rays()
LINE = np.array(chess.BB_RAYS, dtype=U64)  # python-chess ray(a, b): the whole line through a and b, or 0


@njit(cache=True, inline="always")
def _slide(sq, occ, d):
    r = RAYS[d, sq]
    b = r & occ
    if b:
        s = lsb(b) if d < 4 else msb(b)
        r ^= RAYS[d, s]
    return r


@njit(cache=True, inline="always")
def rook_att(sq, occ):
    return _slide(sq, occ, 0) | _slide(sq, occ, 1) | _slide(sq, occ, 4) | _slide(sq, occ, 5)


@njit(cache=True, inline="always")
def bishop_att(sq, occ):
    return _slide(sq, occ, 2) | _slide(sq, occ, 3) | _slide(sq, occ, 6) | _slide(sq, occ, 7)


@njit(cache=True)
def attackers(bb, c, sq, occ, removed):
    """Pieces of colour c attacking square sq through occupancy occ, minus the squares in
    ``removed`` (pieces just captured)."""
    b = 8 * c
    a = KNIGHT_ATT[sq] & bb[b + 1]
    a |= KING_ATT[sq] & bb[b + 5]
    a |= PAWN_ATT[1 - c, sq] & bb[b]
    rq = bb[b + 3] | bb[b + 4]
    if rq:
        a |= rook_att(sq, occ) & rq
    bq = bb[b + 2] | bb[b + 4]
    if bq:
        a |= bishop_att(sq, occ) & bq
    return a & ~removed


@njit(cache=True)
def piece_attacks(t, sq, occ):
    if t == KNIGHT:
        return KNIGHT_ATT[sq]
    if t == BISHOP:
        return bishop_att(sq, occ)
    if t == ROOK:
        return rook_att(sq, occ)
    if t == QUEEN:
        return rook_att(sq, occ) | bishop_att(sq, occ)
    return KING_ATT[sq]


@njit(cache=True)
def _castle_legal(bb, us, to):
    """King on e1/e8 takes its own rook on ``to`` (a right python-chess keeps): path empty, the
    king's squares not attacked (generate_castling_moves, standard chess)."""
    home = 56 * us
    them = 1 - us
    occ = bb[OCC] | bb[OCC + 1]
    king = SQ[home + 4]
    rook = SQ[to]
    if to == home + 7:
        empty = SQ[home + 5] | SQ[home + 6]
        path = (home + 4, home + 5)
        kto, rto = home + 6, home + 5
    else:
        empty = SQ[home + 1] | SQ[home + 2] | SQ[home + 3]
        path = (home + 4, home + 3)
        kto, rto = home + 2, home + 3
    if (occ ^ king ^ rook) & empty:
        return False
    o1 = occ ^ king
    for s in path:
        if attackers(bb, them, s, o1, U64(0)):
            return False
    if attackers(bb, them, kto, occ ^ king ^ rook ^ SQ[rto], U64(0)):
        return False
    return True


@njit(cache=True)
def ep_capture_ok(bb, pc, us, ep, frm):
    """Is the pawn on ``frm`` a pseudo-legal en-passant capturer onto ``ep`` (python-chess's
    generate_pseudo_legal_ep)?"""
    if ep <= 0:  # python-chess tests `not ep_square`
        return False
    occ = bb[OCC] | bb[OCC + 1]
    if occ & SQ[ep]:
        return False
    if pc[frm] != 8 * us:
        return False
    if (frm >> 3) != (4 if us == 0 else 3):
        return False
    return (PAWN_ATT[1 - us, ep] & SQ[frm]) != 0


@njit(cache=True)
def _safe_after(bb, us, ksq, frm, to, capsq):
    occ = bb[OCC] | bb[OCC + 1]
    occ2 = (occ & ~SQ[frm]) | SQ[to]
    removed = SQ[to]
    if capsq >= 0:
        occ2 &= ~SQ[capsq]
        removed |= SQ[capsq]
    return attackers(bb, 1 - us, ksq, occ2, removed) == 0


@njit(cache=True)
def is_legal(bb, pc, us, ep, frm, to, promo):
    """python-chess ``Board.is_legal(Move(frm, to, promotion))`` on a valid standard position;
    promo: 0 none, else the piece type 1..4 (N B R Q). Castling is king takes own rook."""
    if frm == to or frm < 0 or frm > 63 or to < 0 or to > 63:
        return False
    p = pc[frm]
    if p < 0 or (p >> 3) != us:
        return False
    t = p & 7
    own = bb[OCC + us]
    enemy = bb[OCC + 1 - us]
    occ = own | enemy
    tb = SQ[to]
    last = (to >> 3) == (7 if us == 0 else 0)
    if promo != 0 and (t != PAWN or not last):
        return False
    if t == KING:
        if bb[CASTLE] & tb & own:
            return _castle_legal(bb, us, to)
        if own & tb or not KING_ATT[frm] & tb:
            return False
        return _safe_after(bb, us, to, frm, to, -1)
    if own & tb:
        return False
    ksq = lsb(bb[8 * us + KING])
    if t == PAWN:
        if last and promo == 0:
            return False
        step = 8 if us == 0 else -8
        capsq = -1
        if to == frm + step:
            if occ & tb:
                return False
        elif to == frm + 2 * step:
            if (frm >> 3) != (1 if us == 0 else 6) or occ & tb or occ & SQ[frm + step]:
                return False
        elif PAWN_ATT[us, frm] & tb:
            if not enemy & tb:
                if to != ep or not ep_capture_ok(bb, pc, us, ep, frm):
                    return False
                capsq = to - step
        else:
            return False
        return _safe_after(bb, us, ksq, frm, to, capsq)
    if not piece_attacks(t, frm, occ) & tb:
        return False
    return _safe_after(bb, us, ksq, frm, to, -1)


@njit(cache=True)
def legal_ep(bb, pc, us, ep):
    """python-chess ``has_legal_en_passant()``: -1, or the en-passant square when a legal
    en-passant capture exists."""
    if ep <= 0:
        return -1
    cand = PAWN_ATT[1 - us, ep] & bb[8 * us]
    while cand:
        frm = lsb(cand)
        cand &= cand - U64(1)
        if ep_capture_ok(bb, pc, us, ep, frm) and is_legal(bb, pc, us, ep, frm, ep, 0):
            return ep
    return -1


@njit(cache=True)
def _put(bb, pc, sq, code):
    pc[sq] = code
    bb[code] |= SQ[sq]
    bb[OCC + (code >> 3)] |= SQ[sq]


@njit(cache=True)
def _take(bb, pc, sq):
    code = pc[sq]
    if code >= 0:
        pc[sq] = -1
        bb[code] &= ~SQ[sq]
        bb[OCC + (code >> 3)] &= ~SQ[sq]
    return code


@njit(cache=True)
def push(bb, pc, st, frm, to, promo):
    """Play a legal move as python-chess's ``Board.push`` does. st: int64[4] = side to move,
    ep square (−1 none), halfmove clock, fullmove number; updated in place."""
    us = st[0]
    ep_old = st[1]
    st[1] = -1
    st[2] += 1
    if us == 1:
        st[3] += 1
    p = pc[frm]
    t = p & 7
    enemy = bb[OCC + 1 - us]
    if t == PAWN or (enemy & (SQ[frm] | SQ[to])):
        st[2] = 0
    bb[CASTLE] &= ~SQ[to] & ~SQ[frm]
    if t == KING:
        bb[CASTLE] &= ~RANK_MASK[us]
    if t == KING and (bb[OCC + us] & SQ[to]):
        home = 56 * us
        _take(bb, pc, frm)
        _take(bb, pc, to)
        if to < frm:
            _put(bb, pc, home + 2, 8 * us + KING)
            _put(bb, pc, home + 3, 8 * us + ROOK)
        else:
            _put(bb, pc, home + 6, 8 * us + KING)
            _put(bb, pc, home + 5, 8 * us + ROOK)
    else:
        _take(bb, pc, frm)
        captured = _take(bb, pc, to)
        if t == PAWN:
            diff = to - frm
            if diff == 16 and (frm >> 3) == 1:
                st[1] = frm + 8
            elif diff == -16 and (frm >> 3) == 6:
                st[1] = frm - 8
            elif to == ep_old and (diff == 7 or diff == 9 or diff == -7 or diff == -9) and captured < 0:
                _take(bb, pc, ep_old + (-8 if us == 0 else 8))
        if promo != 0:
            t = promo
        _put(bb, pc, to, 8 * us + t)
    st[0] = 1 - us


@njit(cache=True)
def write_board(out, r, bb, pc, us, ep, half, full, eval_white, wdl):
    """Write the 32-byte marlinformat PackedBoard of the position into ``out[r]`` the way
    :func:`nnue.pipeline.board.pack_board` does (ep: a legal en-passant square or −1)."""
    occ = bb[OCC] | bb[OCC + 1]
    for i in range(8):
        out[r, i] = (occ >> U64(8 * i)) & U64(255)
    lo = U64(0)
    hi = U64(0)
    m = occ
    i = 0
    cr = bb[CASTLE]
    while m:
        sq = lsb(m)
        m &= m - U64(1)
        code = pc[sq]
        if cr & SQ[sq]:
            code = (code & 8) | 6
        if i < 16:
            lo |= U64(code) << U64(4 * i)
        else:
            hi |= U64(code) << U64(4 * (i - 16))
        i += 1
    for j in range(8):
        out[r, 8 + j] = (lo >> U64(8 * j)) & U64(255)
        out[r, 16 + j] = (hi >> U64(8 * j)) & U64(255)
    out[r, 24] = (128 if us == 1 else 0) | (64 if ep < 0 else ep)
    out[r, 25] = min(max(half, 0), 255)
    f = min(max(full, 0), 65535)
    out[r, 26] = f & 255
    out[r, 27] = f >> 8
    e = eval_white & 0xFFFF
    out[r, 28] = e & 255
    out[r, 29] = e >> 8
    out[r, 30] = wdl
    out[r, 31] = 0


@njit(cache=True)
def check_status(bb, us, ep, checkers):
    """The check part of :func:`position_status` for a position reached by a legal move from a
    valid one (kings, pieces, pawns and castling rights stay valid): 0, 1 or 2 as there."""
    n = popcount(checkers)
    if n > 2:
        return 2
    if n and ep >= 0:
        return 1
    if n == 2 and LINE[lsb(checkers), msb(checkers)] & bb[8 * us + KING]:
        return 1
    return 0


@njit(cache=True)
def piece_status(bb):
    """The piece part of :func:`position_status`: 2 unless each side has one king, at most 8 pawns
    and 16 pieces, and no pawn stands on a back rank; else 0."""
    if popcount(bb[KING]) != 1 or popcount(bb[8 + KING]) != 1:
        return 2
    if popcount(bb[PAWN]) > 8 or popcount(bb[8 + PAWN]) > 8:
        return 2
    if popcount(bb[OCC]) > 16 or popcount(bb[OCC + 1]) > 16:
        return 2
    if (bb[PAWN] | bb[8 + PAWN]) & BACKRANKS:
        return 2
    return 0


@njit(cache=True)
def king_status(bb, us, ep):
    """The king part of :func:`position_status` (pieces already checked): 2 when the side not to
    move is in check, else :func:`check_status` of the side to move's checkers."""
    occ = bb[OCC] | bb[OCC + 1]
    if attackers(bb, us, lsb(bb[8 * (1 - us) + KING]), occ, U64(0)):
        return 2
    return check_status(bb, us, ep, attackers(bb, 1 - us, lsb(bb[8 * us + KING]), occ, U64(0)))


@njit(cache=True)
def standard_rights(bb):
    """The castling rights python-chess keeps in standard chess, as a mask of rook squares: rooks
    on a1/h1 with the white king on e1, on a8/h8 with the black king on e8."""
    valid = U64(0)
    if bb[KING] & SQ[4]:
        valid |= (SQ[0] | SQ[7]) & bb[ROOK]
    if bb[8 + KING] & SQ[60]:
        valid |= (SQ[56] | SQ[63]) & bb[8 + ROOK]
    return valid


@njit(cache=True)
def move_code(bb, pc, us, ep, frm, to, promo):
    """(best_move, best_move_is_capture) of a legal move in the position before it: the packed
    move of :mod:`nnue.pipeline.schema` (viriformat layout: from | to << 6 | promo << 12 |
    flag << 14; flag 1 en passant, 2 castling as king takes rook, 3 promotion), capture True for
    captures, en passant and promotions (as :func:`nnue.pipeline.pack.encode_move` and the
    packer). promo: 0 or 1..4 = N B R Q; ep: the en-passant square (−1 none)."""
    return move_code_of(bb, pc[frm] & 7, us, ep, frm, to, promo)


@njit(cache=True)
def move_code_of(bb, t, us, ep, frm, to, promo):
    """:func:`move_code` given the type t (0..5) of the piece on frm."""
    flag = 0
    pr = 0
    capture = (bb[OCC + 1 - us] & SQ[to]) != 0
    if promo != 0:
        flag, pr = 3, promo - 1
        capture = True
    elif t == KING and (bb[OCC + us] & SQ[to]):
        flag = 2
    elif t == PAWN and to == ep and (frm & 7) != (to & 7):
        flag = 1
        capture = True
    return frm | (to << 6) | (pr << 12) | (flag << 14), capture


@njit(cache=True)
def position_status(bb, us, ep):
    """python-chess ``Board.status()`` for a position the caller built, after the packer drops
    an en-passant square with no legal capture (ep: the legal en-passant square or −1):
    0 valid; 1 python-chess must settle it (in check with an en-passant square, or two checkers
    on one line with the king: its 'impossible check' rules); 2 not a position this core
    accepts (a status error, more than two checkers)."""
    if piece_status(bb):
        return 2
    if bb[CASTLE] & ~standard_rights(bb):
        return 2
    return king_status(bb, us, ep)
