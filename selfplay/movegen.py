"""Compiled legal move generation for the search's expansions: python-chess's ``board.legal_moves``
list, in python-chess's order, and the search's "captures" or "checks" priors, from the board's
bitboards in one numba call (:func:`legal_moves`): about 5 µs against 38 µs for python-chess's
moves and the Python "captures" priors, 6 µs against 175 µs for "checks" (whose Python version
pushes and pops every move for ``gives_check``).

The ORDER is python-chess 1.11's ``Board.generate_legal_moves`` (the search's priors, its
tie-breaks and so its games depend on it):

* not in check: ``generate_pseudo_legal_moves`` filtered by legality: pieces other than pawns
  (from-squares highest first, each one's to-squares highest first), then castling (rook
  squares highest first, so the h-side first), then pawn captures (from-squares highest first,
  promotions Q R B N), single pushes (to-squares highest first), double pushes, en passant;
* in check (``_generate_evasions``): the king's moves first (to-squares highest first), then,
  with a single checker, the pseudo-legal moves of the other pieces in the order above (no
  castling), en passant last.

Legality is decided by making the move on the bitboards and asking whether the king is attacked
(the same set as python-chess's pin and evasion rules on any position reached by legal moves
from a valid one); castling follows python-chess's ``generate_castling_moves`` rule literally
(Chess960 too: king takes rook when ``board.chess960``, e1g1/e1c1 style otherwise). The moves
come back as shared :class:`chess.Move` objects (one per from/to/promotion, made at import).

Tested move for move and prior for prior against python-chess on random games, Chess960 games
and constructed positions (castling, en passant and promotions that give check, stalemate,
double check), and on whole self-play games (tests/selfplay/test_movegen.py).
"""
from __future__ import annotations

import threading

import chess
import numpy as np
from numba import njit

from nnue.pipeline.compiled.bits import msb, popcount
from nnue.pipeline.compiled.chesscore import KING_ATT, KNIGHT_ATT, LINE, PAWN_ATT, SQ, bishop_att, rook_att

U64 = np.uint64
#: python-chess's between(a, b): the squares strictly between a and b on a line, else 0
BETWEEN = np.array([[chess.between(a, b) for b in range(64)] for a in range(64)], dtype=U64)
#: victim weights of the "captures" priors by piece type index 0..5 = P N B R Q K (mcts._VICTIM)
VICTIM = np.array([1.0, 3.0, 3.0, 5.0, 9.0, 0.0])
_RANK1, _RANK8 = U64(chess.BB_RANK_1), U64(chess.BB_RANK_8)
_DOUBLE = np.array([chess.BB_RANK_3 | chess.BB_RANK_4, chess.BB_RANK_6 | chess.BB_RANK_5], dtype=U64)
_EP_RANK = np.array([chess.BB_RANKS[4], chess.BB_RANKS[3]], dtype=U64)
_NONE = 64  # no en-passant square
MAX_MOVES = 256  # at most 218 legal moves in any position

# input layout (uint64[12], board_array): pawns, knights, bishops, rooks, queens, kings (both
# colours), white, black occupancy, side to move (0 white, 1 black), en-passant square (64
# none), castling rights (python-chess's clean_castling_rights: a mask of rook squares),
# chess960 (0/1)


@njit(cache=True)
def _attacked(bb, them, sq, occ):
    """Pieces of the colour with occupancy ``them`` attacking ``sq`` through occupancy ``occ``
    (python-chess's ``_attackers_mask``); the side index of ``them`` is bb[8] xor 1."""
    c = 1 - int(bb[8])
    a = KNIGHT_ATT[sq] & bb[1]
    a |= KING_ATT[sq] & bb[5]
    a |= PAWN_ATT[1 - c, sq] & bb[0]
    a |= rook_att(sq, occ) & (bb[3] | bb[4])
    a |= bishop_att(sq, occ) & (bb[2] | bb[4])
    return a & them


@njit(cache=True)
def _safe(bb, them, ksq, occ, frm, to, capsq):
    """Is the king on ``ksq`` safe after a non-king move frm -> to (capturing on capsq, −1 none)?"""
    occ2 = (occ & ~SQ[frm]) | SQ[to]
    removed = SQ[to]
    if capsq >= 0:
        occ2 &= ~SQ[capsq]
        removed |= SQ[capsq]
    return (_attacked(bb, them, ksq, occ2) & ~removed) == 0


@njit(cache=True)
def _add(out, n, frm, to, promo):
    out[n] = frm | (to << 6) | (promo << 12)
    return n + 1


@njit(cache=True)
def _add_pawn(out, n, frm, to):
    """A pawn move: to the last rank, its four promotions in python-chess's order (Q R B N)."""
    if (to >> 3) == 0 or (to >> 3) == 7:
        for pr in (5, 4, 3, 2):
            n = _add(out, n, frm, to, pr)
        return n
    return _add(out, n, frm, to, 0)


@njit(cache=True)
def _pseudo(bb, out, n, from_mask, to_mask, ksq, castling_too):
    """python-chess's generate_pseudo_legal_moves(from_mask, to_mask), each move kept when legal."""
    us = int(bb[8])
    ep = int(bb[9])
    own = bb[6] if us == 0 else bb[7]
    them = bb[7] if us == 0 else bb[6]
    occ = bb[6] | bb[7]
    # pieces other than pawns (the king too, unless from_mask leaves it out)
    m = own & ~bb[0] & from_mask
    while m:
        frm = msb(m)
        m ^= SQ[frm]
        b = SQ[frm]
        if b & bb[1]:
            att = KNIGHT_ATT[frm]
        elif b & bb[5]:
            att = KING_ATT[frm]
        else:
            att = U64(0)
            if b & (bb[3] | bb[4]):
                att |= rook_att(frm, occ)
            if b & (bb[2] | bb[4]):
                att |= bishop_att(frm, occ)
        t = att & ~own & to_mask
        king = (b & bb[5]) != 0
        while t:
            to = msb(t)
            t ^= SQ[to]
            if king:
                ok = (_attacked(bb, them, to, occ & ~b) & ~SQ[to]) == 0
            else:
                ok = _safe(bb, them, ksq, occ, frm, to, -1)
            if ok:
                n = _add(out, n, frm, to, 0)
    if castling_too:
        n = _castling(bb, out, n)
    pawns = bb[0] & own & from_mask
    if not pawns:
        return n
    m = pawns
    while m:
        frm = msb(m)
        m ^= SQ[frm]
        t = PAWN_ATT[us, frm] & them & to_mask
        while t:
            to = msb(t)
            t ^= SQ[to]
            if _safe(bb, them, ksq, occ, frm, to, -1):
                n = _add_pawn(out, n, frm, to)
    if us == 0:
        single = (pawns << U64(8)) & ~occ
        double = (single << U64(8)) & ~occ & _DOUBLE[0]
        step = -8
    else:
        single = (pawns >> U64(8)) & ~occ
        double = (single >> U64(8)) & ~occ & _DOUBLE[1]
        step = 8
    single &= to_mask
    double &= to_mask
    while single:
        to = msb(single)
        single ^= SQ[to]
        frm = to + step
        if _safe(bb, them, ksq, occ, frm, to, -1):
            n = _add_pawn(out, n, frm, to)
    while double:
        to = msb(double)
        double ^= SQ[to]
        frm = to + 2 * step
        if _safe(bb, them, ksq, occ, frm, to, -1):
            n = _add(out, n, frm, to, 0)
    if ep != _NONE and ep != 0:
        n = _ep(bb, out, n, from_mask, to_mask, ksq)
    return n


@njit(cache=True)
def _ep(bb, out, n, from_mask, to_mask, ksq):
    """python-chess's generate_pseudo_legal_ep(from_mask, to_mask), each capture kept when legal."""
    us = int(bb[8])
    ep = int(bb[9])
    own = bb[6] if us == 0 else bb[7]
    them = bb[7] if us == 0 else bb[6]
    occ = bb[6] | bb[7]
    if not SQ[ep] & to_mask or SQ[ep] & occ:
        return n
    cap = bb[0] & own & from_mask & PAWN_ATT[1 - us, ep] & _EP_RANK[us]
    capsq = ep - 8 if us == 0 else ep + 8
    while cap:
        frm = msb(cap)
        cap ^= SQ[frm]
        if _safe(bb, them, ksq, occ, frm, ep, capsq):
            n = _add(out, n, frm, ep, 0)
    return n


@njit(cache=True)
def _attacked_for_king(bb, them, path, occ):
    while path:
        sq = msb(path)
        path ^= SQ[sq]
        if _attacked(bb, them, sq, occ):
            return True
    return False


@njit(cache=True)
def _castling(bb, out, n):
    """python-chess's generate_castling_moves (standard and Chess960) and _from_chess960."""
    us = int(bb[8])
    own = bb[6] if us == 0 else bb[7]
    them = bb[7] if us == 0 else bb[6]
    occ = bb[6] | bb[7]
    backrank = _RANK1 if us == 0 else _RANK8
    king = own & bb[5] & backrank
    king &= ~king + U64(1)  # the lowest bit (king &= -king)
    if not king:
        return n
    ksq = msb(king)
    home = 56 * us
    cand = bb[10] & backrank
    while cand:
        c = msb(cand)
        cand ^= SQ[c]
        rook = SQ[c]
        a_side = rook < king
        king_to = SQ[home + 2] if a_side else SQ[home + 6]
        rook_to = SQ[home + 3] if a_side else SQ[home + 5]
        king_path = BETWEEN[ksq, msb(king_to)]
        rook_path = BETWEEN[c, msb(rook_to)]
        if not ((occ ^ king ^ rook) & (king_path | rook_path | king_to | rook_to)
                or _attacked_for_king(bb, them, king_path | king, occ ^ king)
                or _attacked_for_king(bb, them, king_to, occ ^ king ^ rook ^ rook_to)):
            to = c
            if bb[11] == 0 and ksq == home + 4 and (bb[5] & SQ[home + 4]):
                if c == home + 7:
                    to = home + 6
                elif c == home:
                    to = home + 2
            n = _add(out, n, ksq, to, 0)
    return n


@njit(cache=True)
def _gives_check(bb, work, frm, to, promo):
    """python-chess's ``gives_check`` (push, is_check, pop) of the legal move frm -> to
    (promotion ``promo``, a piece type or 0): is the other side's king attacked after it? The
    move is made on the piece bitboards as ``Board.push`` makes it (castling as king takes rook,
    or e1g1/e1c1 style in standard chess; en passant removes the pawn behind the square)."""
    us = int(bb[8])
    own = bb[6] if us == 0 else bb[7]
    them = bb[7] if us == 0 else bb[6]
    kth = bb[5] & them
    if not kth:
        return False
    k = msb(kth)
    for i in range(6):
        work[i] = bb[i]
    fb = SQ[frm]
    tb = SQ[to]
    t = 0 if fb & bb[0] else 1 if fb & bb[1] else 2 if fb & bb[2] else 3 if fb & bb[3] else 4 if fb & bb[4] else 5
    them2 = them
    df = (frm & 7) - (to & 7)
    if t == 5 and (own & bb[3] & tb or df > 1 or df < -1):
        home = 56 * us
        if own & bb[3] & tb:  # king takes its rook
            rook = to
        else:  # e1g1 / e1c1 (python-chess's _to_chess960)
            rook = home + 7 if to > frm else home
        a_side = (to & 7) < (frm & 7)
        kto = home + 2 if a_side else home + 6
        rto = home + 3 if a_side else home + 5
        work[5] &= ~fb
        work[3] &= ~SQ[rook]
        work[5] |= SQ[kto]
        work[3] |= SQ[rto]
        own2 = (own & ~fb & ~SQ[rook]) | SQ[kto] | SQ[rto]
    else:
        occ = bb[6] | bb[7]
        for i in range(6):
            work[i] &= ~tb
        work[t] &= ~fb
        work[promo - 1 if promo else t] |= tb
        own2 = (own & ~fb) | tb
        them2 = them & ~tb
        ep = int(bb[9])
        if t == 0 and to == ep and (df == 1 or df == -1) and not occ & tb:
            cap = SQ[to - 8 if us == 0 else to + 8]
            work[0] &= ~cap
            them2 &= ~cap
    occ2 = own2 | them2
    a = KNIGHT_ATT[k] & work[1]
    a |= KING_ATT[k] & work[5]
    a |= PAWN_ATT[1 - us, k] & work[0]
    a |= rook_att(k, occ2) & (work[3] | work[4])
    a |= bishop_att(k, occ2) & (work[2] | work[4])
    return (a & own2) != 0


@njit(cache=True)
def generate(bb, out, weights, priors):
    """Legal moves of the position ``bb`` (uint64[12], the layout above) into ``out`` (int64,
    from | to << 6 | promotion << 12, promotion a python-chess piece type or 0) in
    python-chess's order; returns their number. With ``priors`` 1 (2), ``weights`` gets the
    "captures" ("checks") priors of mcts.heuristic_priors: the same float64 operations in the
    same order, a check found as python-chess's gives_check finds it (:func:`_gives_check`)."""
    us = int(bb[8])
    own = bb[6] if us == 0 else bb[7]
    them = bb[7] if us == 0 else bb[6]
    occ = bb[6] | bb[7]
    allb = ~U64(0)
    kb = bb[5] & own
    n = 0
    if kb:
        ksq = msb(kb)
        checkers = _attacked(bb, them, ksq, occ)
        if checkers:
            sliders = checkers & (bb[2] | bb[3] | bb[4])
            attacked = U64(0)
            s = sliders
            while s:
                c = msb(s)
                s ^= SQ[c]
                attacked |= LINE[ksq, c] & ~SQ[c]
            t = KING_ATT[ksq] & ~own & ~attacked
            while t:
                to = msb(t)
                t ^= SQ[to]
                if (_attacked(bb, them, to, occ & ~kb) & ~SQ[to]) == 0:
                    n = _add(out, n, ksq, to, 0)
            checker = msb(checkers)
            if popcount(checkers) == 1:
                target = BETWEEN[ksq, checker] | checkers
                n = _pseudo(bb, out, n, ~bb[5], target, ksq, False)
                ep = int(bb[9])
                if ep != _NONE and ep != 0 and not SQ[ep] & target:
                    if ep + (-8 if us == 0 else 8) == checker:
                        n = _ep(bb, out, n, allb, allb, ksq)
        else:
            n = _pseudo(bb, out, n, allb, allb, ksq, True)
    if priors:
        ep = int(bb[9])
        work = np.empty(6, dtype=np.uint64)
        for i in range(n):
            code = out[i]
            frm = code & 63
            to = (code >> 6) & 63
            x = 1.0
            if them & SQ[to]:
                b = SQ[to]
                t = 0 if b & bb[0] else 1 if b & bb[1] else 2 if b & bb[2] else 3 if b & bb[3] else \
                    4 if b & bb[4] else 5
                x += 1.0 + 0.5 * VICTIM[t]
            elif to == ep and (bb[0] & SQ[frm]) and (to - frm == 7 or to - frm == 9 or frm - to == 7
                                                     or frm - to == 9) and not occ & SQ[to]:
                x += 1.0 + 0.5 * 1
            if code >> 12:
                x += 2.0
            if priors == 2 and _gives_check(bb, work, frm, to, code >> 12):
                x += 1.5
            weights[i] = x
        s = 0.0
        for i in range(n):
            s += weights[i]
        for i in range(n):
            weights[i] = weights[i] / s
    return n


#: the chess.Move of each code (from | to << 6 | promotion << 12), shared by every expansion
MOVES = [chess.Move(c & 63, (c >> 6) & 63, (c >> 12) or None) for c in range(64 * 64 * 6)]
_PRIORS = {None: 0, "captures": 1, "checks": 2}
_BUFFERS = threading.local()  # per thread: the output arrays of generate


def _buffers():
    try:
        return _BUFFERS.out, _BUFFERS.w
    except AttributeError:
        _BUFFERS.out, _BUFFERS.w = np.zeros(MAX_MOVES, dtype=np.int64), np.zeros(MAX_MOVES, dtype=np.float64)
        return _BUFFERS.out, _BUFFERS.w


def board_array(board: chess.Board) -> np.ndarray:
    """The uint64[12] input of :func:`generate` for a python-chess board."""
    ep = board.ep_square
    return np.array((board.pawns, board.knights, board.bishops, board.rooks, board.queens, board.kings,
                     board.occupied_co[chess.WHITE], board.occupied_co[chess.BLACK], 0 if board.turn else 1,
                     _NONE if ep is None else ep, board.clean_castling_rights(), 1 if board.chess960 else 0),
                    dtype=U64)


def legal_moves(board: chess.Board, priors: str | None = None) -> tuple[list[chess.Move], list[float] | None]:
    """``list(board.legal_moves)`` (same moves, same order) and, with ``priors`` "captures" or
    "checks", those priors of :func:`nnue.selfplay.mcts.heuristic_priors` for them
    (bit-identical floats), else None (ValueError for another name). For standard and Chess960
    boards (``board.chess960``) of python-chess's ``chess.Board`` class (no variants) that
    python-chess calls valid or reached by legal moves from one (elsewhere the moves may
    differ: a side without a king gets none here)."""
    mode = _PRIORS.get(priors)
    if mode is None:
        raise ValueError(f"priors {priors!r}: None, 'captures' or 'checks'")
    out, w = _buffers()
    n = generate(board_array(board), out, w, mode)
    mv = MOVES
    moves = [mv[c] for c in out[:n].tolist()]
    return moves, (w[:n].tolist() if priors else None)
