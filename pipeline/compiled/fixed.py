"""Compiled decoders and validators for the fixed-size binary formats: Stockfish ``.bin``
(40-byte PackedSfenValue), bulletformat and marlinformat (32-byte records).

Each kernel walks a block of records once and, per record, decodes it into the numba board state
of :mod:`.chesscore`, decides what the one-by-one python-chess reader and the packer would make
of it, and for the records it settles writes the packed board and the dataset columns straight
into caller-owned NumPy buffers (no Python object per position). Per record it writes ``kind``:

* 0: settled — a valid position (and legal move), packed exactly as python-chess packs it;
* 1: handed back — the reader's own one-record function (the python-chess path) reads it and
  the packer validates it: every reject (a record that does not decode, a result, score or ply
  out of range, an invalid position, an illegal move) and every position this core does not
  model exactly (in check with an en-passant square, two checkers on a line with the king or that
  no last move can give, Chess960 or irregular castling rights, an en-passant square without an
  enemy pawn behind it).

The kernels also number games exactly as the reference readers do (``game``), for handed-back
records too, so that the reference path only has to build that one record. Every read of the
input is bounds-checked against the array shapes.
"""
from __future__ import annotations

import chess
import numpy as np
from numba import njit

from ..records import PackedRows
from ..constants import FLAG_PLY_UNKNOWN as F_PLY_UNKNOWN, FLAG_SCORE_MATE as F_MATE, FLAG_SCORE_NONE as F_NONE
from ..constants import MATE_BOUND, VALUE_NONE
from .bits import lsb, msb, popcount
from .chesscore import (CASTLE, KING, KING_ATT, KNIGHT_ATT, OCC, PAWN, PAWN_ATT, RANK_MASK, SQ,
                        U64, attackers, bishop_att, is_legal, king_status, legal_ep, piece_status, position_status,
                        move_code, rook_att, write_board)

BETWEEN = np.array([[chess.between(a, b) for b in range(64)] for a in range(64)], dtype=U64)


def buffers(cap: int) -> dict:
    """Output buffers of ``cap`` rows for the kernels of this module."""
    return dict(board=np.zeros((cap, 32), np.uint8), score=np.zeros(cap, np.int16),
                result=np.zeros(cap, np.int8), ply=np.zeros(cap, np.uint16),
                piece_count=np.zeros(cap, np.uint8), in_check=np.zeros(cap, np.bool_),
                best_move=np.zeros(cap, np.uint16), capture=np.zeros(cap, np.bool_),
                has_move=np.zeros(cap, np.bool_), flags=np.zeros(cap, np.uint8), kind=np.zeros(cap, np.uint8),
                game=np.zeros(cap, np.int64))


OUT = ("board", "score", "result", "ply", "piece_count", "in_check", "best_move", "capture", "has_move", "flags",
       "kind")


@njit(cache=True)
def ep_candidates(bb, us, ep):
    """Own pawns that python-chess's ``generate_pseudo_legal_ep`` would try onto ``ep``."""
    if ep <= 0 or ep > 63:
        return U64(0)
    occ = bb[OCC] | bb[OCC + 1]
    if occ & SQ[ep]:
        return U64(0)
    rank = U64(0xFF00000000) if us == 0 else U64(0xFF000000)
    return PAWN_ATT[1 - us, ep] & bb[8 * us + PAWN] & rank


@njit(cache=True)
def settle_ep(bb, pc, us, ep):
    """(ok, legal en-passant square or −1) for python-chess's ep_square ``ep`` (−1 none): ok is
    False when a capture onto it is pseudo-legal but no enemy pawn stands behind it (python-chess's
    en-passant rules then differ from the generic make-and-test legality)."""
    if ep < 0:
        return True, -1
    if not ep_candidates(bb, us, ep):
        return True, -1
    behind = ep - 8 if us == 0 else ep + 8
    if pc[behind] != 8 * (1 - us) + PAWN:
        return False, -1
    return True, legal_ep(bb, pc, us, ep)


@njit(cache=True)
def settle(r, bb, pc, us, ep_raw, half, full, score, none, mate, result, ply, ply_known, frm, to, promo, has,
           any_rights, c960, o_board, o_score, o_result, o_ply, o_pcount, o_check, o_best, o_cap, o_has, o_flags):
    """Validate the position (standard chess, python-chess ``Board.status()`` plus the packer's
    checks) and write row r. any_rights: the castling rights were checked by :func:`clean_rights`
    (there is no move to play, or c960: the move is played in Chess960 mode, king takes rook), else
    they must be standard ones. Returns 0 (settled) or 1 (hand the record to python-chess).
    score: side-to-move POV (0 when none); result: side-to-move POV; ep_raw: python-chess's
    ep_square (−1 none)."""
    if popcount(bb[KING]) != 1 or popcount(bb[8 + KING]) != 1:  # before any king-square lookup
        return 1
    ok, ep = settle_ep(bb, pc, us, ep_raw)
    if not ok:
        return 1
    if (status_nc(bb, us, ep) if any_rights else position_status(bb, us, ep)) != 0:
        return 1
    occ = bb[OCC] | bb[OCC + 1]
    checkers = attackers(bb, 1 - us, lsb(bb[8 * us + KING]), occ, U64(0))
    if popcount(checkers) > 1 and not double_check_possible(bb, pc, us):  # the packer's retrograde rule
        return 1
    if score < -32767 or score > 32767 or result < -1 or result > 1 or ply < 0 or ply > 65535:
        return 1
    if has and not (is_legal960(bb, pc, us, ep, frm, to, promo) if c960 else is_legal(bb, pc, us, ep, frm, to, promo)):
        return 1
    eval_white = score if us == 0 else -score
    wdl = (result if us == 0 else -result) + 1
    write_board(o_board, r, bb, pc, us, ep, half, full, eval_white, wdl)
    o_pcount[r] = popcount(occ)
    o_check[r] = checkers != 0
    o_score[r] = score
    o_result[r] = result
    o_ply[r] = ply
    o_flags[r] = (F_NONE if none else 0) | (F_MATE if mate else 0) | (0 if ply_known else F_PLY_UNKNOWN)
    o_has[r] = has
    if has:
        o_best[r], o_cap[r] = move_code(bb, pc, us, ep, frm, to, promo)
    else:
        o_best[r] = 0
        o_cap[r] = False
    return 0


@njit(cache=True)
def castle960_legal(bb, us, ksq, rsq):
    """python-chess's generate_castling_moves (Chess960) for the king on ``ksq`` taking its own
    rook on ``rsq``, which holds a castling right."""
    home = 56 * us
    them = 1 - us
    occ = bb[OCC] | bb[OCC + 1]
    king = SQ[ksq]
    rook = SQ[rsq]
    a_side = rsq < ksq
    kto = home + (2 if a_side else 6)
    rto = home + (3 if a_side else 5)
    king_path = BETWEEN[ksq, kto]
    rook_path = BETWEEN[rsq, rto]
    if (occ ^ king ^ rook) & (king_path | rook_path | SQ[kto] | SQ[rto]):
        return False
    m = king_path | king
    o1 = occ ^ king
    while m:
        s = lsb(m)
        m &= m - U64(1)
        if attackers(bb, them, s, o1, U64(0)):
            return False
    return attackers(bb, them, kto, occ ^ king ^ rook ^ SQ[rto], U64(0)) == 0


@njit(cache=True)
def is_legal960(bb, pc, us, ep, frm, to, promo):
    """python-chess ``Board.is_legal`` in Chess960 mode (castling: king takes own rook) on a
    valid position whose rights python-chess keeps."""
    p = pc[frm]
    if p < 0 or (p >> 3) != us:
        return False
    if (p & 7) == KING and (bb[OCC + us] & SQ[to]):
        back = RANK_MASK[us]
        kings = bb[8 * us + KING] & back
        if promo != 0 or not (bb[CASTLE] & SQ[to] & back) or not kings or lsb(kings) != frm:
            return False
        return castle960_legal(bb, us, frm, to)
    return is_legal(bb, pc, us, ep, frm, to, promo)


@njit(cache=True)
def _unmove_ok(bb, b2, us, code, t, f, as_type, capture, victim):
    """:func:`nnue.pipeline.retro._unmove_ok`: is the side to move (``us``) out of check in the
    position before the piece ``code`` (then an ``as_type``) of the other side moved f -> t?"""
    them = 1 - us
    for i in range(16):
        b2[i] = bb[i]
    b2[code] &= ~SQ[t]
    b2[OCC + them] &= ~SQ[t]
    b2[8 * them + as_type] |= SQ[f]
    b2[OCC + them] |= SQ[f]
    if capture:
        b2[8 * us + 1] |= SQ[t]  # a knight of the side to move: attacks nothing of its own
        b2[OCC + us] |= SQ[t]
    if victim >= 0:
        b2[8 * us + PAWN] |= SQ[victim]
        b2[OCC + us] |= SQ[victim]
    kings = b2[8 * us + KING]
    if not kings:
        return False
    return attackers(b2, them, msb(kings), b2[OCC] | b2[OCC + 1], U64(0)) == 0


@njit(cache=True)
def double_check_possible(bb, pc, us):
    """Compiled twin of :func:`nnue.pipeline.retro.double_check_possible` (same un-moves, same
    answer; tested against it): could the side not to move (``1 - us``) have given this position's
    check by its last move?"""
    them = 1 - us
    forward = 8 if them == 0 else -8
    last_rank = 7 if them == 0 else 0
    back = 0 if them == 0 else 7
    b2 = np.zeros(16, np.uint64)
    kings = bb[8 * them + KING]
    if kings:
        k = msb(kings)
        if (k >> 3) == back:  # it may have castled: accepted, as retro does
            flip = 56 * back // 7
            for ksq, rsq in ((6, 5), (2, 3)):
                if k == (ksq ^ flip) and pc[rsq ^ flip] == 8 * them + 3:
                    return True
    occ = bb[OCC] | bb[OCC + 1]
    empty = ~occ
    m = bb[OCC + them]
    while m:
        t = lsb(m)
        m &= m - U64(1)
        code = pc[t]
        pt = code & 7
        if pt == PAWN or ((t >> 3) == last_rank and pt != KING):
            if pt == PAWN and ((t >> 3) == 0 or (t >> 3) == 7):
                continue
            f = t - forward
            if 0 <= f < 64 and empty & SQ[f]:
                if _unmove_ok(bb, b2, us, code, t, f, PAWN, False, -1):
                    return True
                f2 = f - forward
                start_rank = 1 if them == 0 else 6
                if 0 <= f2 < 64 and (f2 >> 3) == start_rank and empty & SQ[f2] and pt == PAWN:
                    if _unmove_ok(bb, b2, us, code, t, f2, PAWN, False, -1):
                        return True
            for df in (-1, 1):
                fc = t - forward + df
                if 0 <= fc < 64 and abs((fc & 7) - (t & 7)) == 1 and empty & SQ[fc]:
                    if _unmove_ok(bb, b2, us, code, t, fc, PAWN, True, -1):
                        return True
                    ep_rank = 5 if them == 0 else 2
                    victim = t - forward
                    if pt == PAWN and (t >> 3) == ep_rank and empty & SQ[victim]:
                        if _unmove_ok(bb, b2, us, code, t, fc, PAWN, False, victim):
                            return True
        if pt != PAWN:
            if pt == 1:
                froms = KNIGHT_ATT[t] & empty
            elif pt == KING:
                froms = KING_ATT[t] & empty
            else:
                o = occ & ~SQ[t]
                froms = U64(0)
                if pt == 2 or pt == 4:
                    froms |= bishop_att(t, o)
                if pt == 3 or pt == 4:
                    froms |= rook_att(t, o)
                froms &= empty
            while froms:
                f = lsb(froms)
                froms &= froms - U64(1)
                if _unmove_ok(bb, b2, us, code, t, f, pt, False, -1) or _unmove_ok(bb, b2, us, code, t, f, pt,
                                                                                   True, -1):
                    return True
    return False


@njit(cache=True)
def _clear(bb, pc):
    for i in range(16):
        bb[i] = 0
    for i in range(64):
        pc[i] = -1


@njit(cache=True)
def _put(bb, pc, sq, code):
    pc[sq] = code
    bb[code] |= SQ[sq]
    bb[OCC + (code >> 3)] |= SQ[sq]


@njit(cache=True)
def simple_castling(bb, flags):
    """Castling rights as a rook-square mask when every right python-chess reads from the FEN
    flags (bit 0 K, 1 Q, 2 k, 3 q) is a corner rook with its king on e1/e8 (standard chess, the
    rights python-chess keeps): (True, mask); (False, 0) otherwise (python-chess decides)."""
    rights = U64(0)
    for i in range(4):
        if not (flags >> i) & 1:
            continue
        c = i >> 1
        home = 56 * c
        rook = home + (7 if (i & 1) == 0 else 0)
        if not (bb[8 * c + KING] & SQ[home + 4]) or popcount(bb[8 * c + KING]) != 1:
            return False, U64(0)
        if not (bb[8 * c + 3] & SQ[rook]):
            return False, U64(0)
        rights |= SQ[rook]
    return True, rights


# ------------------------------------------------------------------ Stockfish .bin (40 bytes)
@njit(cache=True, inline="always")
def _window(w, pos):
    """64 bits of the packed position from bit ``pos`` on (fewer in the last word: zeros past
    bit 256)."""
    i = pos >> 6
    sh = pos & 63
    v = w[i] >> U64(sh)
    if sh and i < 3:
        v |= w[i + 1] << U64(64 - sh)
    return v


@njit(cache=True)
def _sfen(rec, r, bb, pc, st, w):
    """Decode the packed position of record r into bb/pc/st (st: us, ep, half, full, castling
    flags) with a shifting 64-bit window (``left`` valid bits). Returns False where the
    reference decoder raises (a malformed record): a bit read past bit 256, a bad piece code,
    more than 32 pieces, kings on one square."""
    _clear(bb, pc)
    for i in range(4):
        v = U64(0)
        for j in range(8):
            v |= U64(rec[r, 8 * i + j]) << U64(8 * j)
        w[i] = v
    black = np.int64(w[0] & U64(1))
    wk = np.int64((w[0] >> U64(1)) & U64(63))
    bk = np.int64((w[0] >> U64(7)) & U64(63))
    if wk == bk:
        return False
    _put(bb, pc, wk, KING)
    _put(bb, pc, bk, 8 + KING)
    pos = 13
    count = 2
    v = _window(w, pos)
    left = 64 - (pos & 63)  # (at least) the bits of the window that are data
    for j in range(64):  # rank 8 down to rank 1, files a to h: square j ^ 56
        sq = j ^ 56
        if sq == wk or sq == bk:
            continue
        if pos + 1 > 256:
            return False
        if left < 5:
            v = _window(w, pos)
            left = 64 - (pos & 63) if (pos >> 6) == 3 else 64
        if not v & U64(1):
            pos += 1
            v >>= U64(1)
            left -= 1
            continue
        if pos + 5 > 256:
            return False
        code = np.int64(v & U64(15))
        if code == 1:
            t = 0
        elif code == 3:
            t = 1
        elif code == 5:
            t = 2
        elif code == 7:
            t = 3
        elif code == 9:
            t = 4
        else:
            return False
        _put(bb, pc, sq, 8 * np.int64((v >> U64(4)) & U64(1)) + t)
        pos += 5
        v >>= U64(5)
        left -= 5
        count += 1
        if count > 32:
            return False
    # castling 4 bits, ep flag (+6), rule50 6, fullmove 8 + 8, rule50 bit 6
    if pos + 5 > 256:
        return False
    v = _window(w, pos)
    castle = np.int64(v & U64(15))
    ep = -1
    if (v >> U64(4)) & U64(1):
        if pos + 11 > 256:
            return False
        ep = np.int64((v >> U64(5)) & U64(63))
        pos += 11
    else:
        pos += 5
    if pos + 23 > 256:
        return False
    v = _window(w, pos)
    st[0] = black
    st[1] = ep
    st[2] = np.int64(v & U64(63)) | (np.int64((v >> U64(22)) & U64(1)) << 6)
    st[3] = max(np.int64((v >> U64(6)) & U64(0xFFFF)), 1)
    st[4] = castle
    return True


@njit(cache=True)
def decode_sfbin(rec, state, o_board, o_score, o_result, o_ply, o_pcount, o_check, o_best, o_cap, o_has, o_flags,
                 o_kind, o_game):
    """Records (n, 40) uint8 of a ``.bin`` file. state: int64[4] = (last game ordinal, has a
    previous record, its ply, its result), carried from block to block."""
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    st = np.zeros(5, np.int64)
    w = np.zeros(4, np.uint64)
    for r in range(rec.shape[0]):
        o_kind[r] = 1
        readable = _sfen(rec, r, bb, pc, st, w)
        score = np.int64(np.int16(np.uint16(rec[r, 32]) | (np.uint16(rec[r, 33]) << np.uint16(8))))
        m = np.int64(rec[r, 34]) | (np.int64(rec[r, 35]) << 8)
        ply = np.int64(rec[r, 36]) | (np.int64(rec[r, 37]) << 8)
        result = np.int64(np.int8(rec[r, 38]))
        if not readable or result < -1 or result > 1:
            o_game[r] = state[0]
            continue
        if not (state[1] and ply == state[2] + 1 and result == -state[3]):
            state[0] += 1
        state[1] = 1
        state[2] = ply
        state[3] = result
        o_game[r] = state[0]
        ok, rights = simple_castling(bb, st[4])
        if not ok:
            continue
        bb[CASTLE] = rights
        none = score == VALUE_NONE
        mate = not none and abs(score) >= MATE_BOUND
        has = m != 0
        to = m & 63
        frm = (m >> 6) & 63
        promo = ((m >> 12) & 3) + 1 if (m >> 14) == 1 else 0
        o_kind[r] = settle(r, bb, pc, st[0], st[1], st[2], st[3], 0 if none else score, none, mate, result, ply,
                           True, frm, to, promo, has, False, False, o_board, o_score, o_result, o_ply, o_pcount, o_check, o_best,
                           o_cap, o_has, o_flags)


# ------------------------------------------------------------------ marlinformat (32 bytes)
@njit(cache=True)
def _marlin(rec, r, bb, pc):
    """Board of marlinformat record r into bb/pc (castling rooks into bb[CASTLE]); False where
    :func:`nnue.pipeline.board.unpack` raises."""
    _clear(bb, pc)
    occ = U64(0)
    for i in range(8):
        occ |= U64(rec[r, i]) << U64(8 * i)
    if popcount(occ) > 32:
        return False
    m = occ
    i = 0
    while m:
        sq = lsb(m)
        m &= m - U64(1)
        code = (rec[r, 8 + (i >> 1)] >> (4 * (i & 1))) & 15
        i += 1
        t = code & 7
        c = code >> 3
        if t == 6:
            if (sq >> 3) != (7 if c else 0):
                return False
            bb[CASTLE] |= SQ[sq]
            t = 3
        elif t > 5:
            return False
        _put(bb, pc, sq, 8 * c + t)
    return (rec[r, 24] & 0x7F) <= 64


@njit(cache=True)
def clean_rights(bb):
    """Do the board's castling rooks (bb[CASTLE], rook squares) come back unchanged through the
    packer's FEN (:func:`nnue.pipeline.board.unpack_fen`: X-FEN letters for outermost rooks, else
    file letters) and python-chess's FEN parser, and are they rights python-chess keeps
    (``clean_castling_rights``; standard rights in standard chess, the others in Chess960, which
    the packer then reads the board as)? True when, for each colour with rights, it has one king,
    on its back rank, and at most one right on each side of it."""
    rights = bb[CASTLE]
    for c in range(2):
        back = U64(0xFF) << U64(56 * c)
        own = rights & back
        if own:
            kings = bb[8 * c + KING]
            if popcount(kings) != 1 or not (kings & back):
                return False
            below = own & (SQ[lsb(kings)] - U64(1))
            above = own & ~below
            if popcount(below) > 1 or popcount(above) > 1:
                return False
    return True


@njit(cache=True)
def status_nc(bb, us, ep):
    """:func:`.chesscore.position_status` without its (standard-chess) castling check, for
    boards whose rights :func:`clean_rights` accepted."""
    if piece_status(bb):
        return 2
    return king_status(bb, us, ep)


@njit(cache=True)
def decode_marlin(rec, state, o_board, o_score, o_result, o_ply, o_pcount, o_check, o_best, o_cap, o_has, o_flags,
                  o_kind, o_game):
    """Records (n, 32) uint8 of a marlinformat file; state as in :func:`decode_sfbin` (ply −1:
    unknown)."""
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    for r in range(rec.shape[0]):
        o_kind[r] = 1
        readable = _marlin(rec, r, bb, pc)
        wdl = np.int64(rec[r, 30])
        if not readable or wdl > 2:
            o_game[r] = state[0]
            continue
        us = np.int64(rec[r, 24] >> 7)
        sign = -1 if us else 1
        result = (wdl - 1) * sign
        full = np.int64(rec[r, 26]) | (np.int64(rec[r, 27]) << 8)
        ply = 2 * (full - 1) + us if full >= 1 else -1
        if not (state[1] and ply >= 0 and state[2] >= 0 and ply == state[2] + 1 and result == -state[3]):
            state[0] += 1
        state[1] = 1
        state[2] = ply
        state[3] = result
        o_game[r] = state[0]
        if not clean_rights(bb):
            continue
        ev = np.int64(np.int16(np.uint16(rec[r, 28]) | (np.uint16(rec[r, 29]) << np.uint16(8))))
        none = abs(ev) == VALUE_NONE
        mate = not none and abs(ev) >= MATE_BOUND
        epb = np.int64(rec[r, 24] & 0x7F)
        o_kind[r] = settle(r, bb, pc, us, -1 if epb == 64 else epb, np.int64(rec[r, 25]), max(full, 1),
                           0 if none else ev * sign, none, mate, result, max(ply, 0), ply >= 0, 0, 0, 0, False, True, False,
                           o_board, o_score, o_result, o_ply, o_pcount, o_check, o_best, o_cap, o_has, o_flags)


# ------------------------------------------------------------------ bulletformat (32 bytes)
@njit(cache=True)
def decode_bullet(rec, o_board, o_score, o_result, o_ply, o_pcount, o_check, o_best, o_cap, o_has, o_flags,
                  o_kind):
    """Records (n, 32) uint8 of a bulletformat file: the board seen from the side to move (who
    plays white), no castling, en passant or counters."""
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    for r in range(rec.shape[0]):
        o_kind[r] = 1
        if rec[r, 26] > 2:
            continue
        _clear(bb, pc)
        occ = U64(0)
        for i in range(8):
            occ |= U64(rec[r, i]) << U64(8 * i)
        if popcount(occ) > 32:
            continue
        m = occ
        i = 0
        bad = False
        own_k = -1
        opp_k = -1
        while m:
            sq = lsb(m)
            m &= m - U64(1)
            code = (rec[r, 8 + (i >> 1)] >> (4 * (i & 1))) & 15
            i += 1
            t = code & 7
            if t > 5:
                bad = True
                break
            if t == KING:
                if code & 8:
                    opp_k = sq
                else:
                    own_k = sq
            _put(bb, pc, sq, code)
        if bad or own_k != rec[r, 27] or opp_k != (rec[r, 28] ^ 56):
            continue
        score = np.int64(np.int16(np.uint16(rec[r, 24]) | (np.uint16(rec[r, 25]) << np.uint16(8))))
        none = abs(score) == VALUE_NONE
        mate = not none and abs(score) >= MATE_BOUND
        o_kind[r] = settle(r, bb, pc, 0, -1, 0, 1, 0 if none else score, none, mate, np.int64(rec[r, 26]) - 1,
                           0, False, 0, 0, 0, False, False, False, o_board, o_score, o_result, o_ply, o_pcount, o_check, o_best,
                           o_cap, o_has, o_flags)


# ------------------------------------------------------------------ Python driver
class Offsets:
    """Lazy "byte N" locations of a run of fixed-size records (no string per row until asked)."""

    def __init__(self, first: int, size: int, n: int):
        self.first, self.size, self.n = first, size, n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return f"byte {self.first + int(i) * self.size}"


def run_block(kernel, recs, offset: int, size: int, state, one_record, with_moves: bool, game=None):
    """Items (PackedRows, Record, Reject) of one block of whole records, in record order.

    kernel: one of the decode_* kernels (``state`` passed when not None); recs: (n, size) uint8;
    offset: byte offset of the block; one_record(i, game) -> Record | Reject: the reference
    reader's function for record i of the block (the handed-back records); game: (n,) ordinals
    when the kernel does not number games (bulletformat)."""
    n = len(recs)
    b = buffers(n)
    recs = np.require(recs, np.uint8, ["C", "W"])  # one compiled signature (fixed_blocks' views are read-only)
    if state is None:
        kernel(recs, *(b[k] for k in OUT))
        b["game"] = game
    else:
        kernel(recs, state, *(b[k] for k in OUT), b["game"])
    kind = b["kind"]
    special = np.flatnonzero(kind).tolist()
    start = 0
    for i in special + [n]:
        if i > start:
            sl = slice(start, i)
            yield PackedRows(board=b["board"][sl], score=b["score"][sl], result=b["result"][sl], ply=b["ply"][sl],
                             piece_count=b["piece_count"][sl], in_check=b["in_check"][sl], game=b["game"][sl],
                             flags=b["flags"][sl], first=f"byte {offset + start * size}",
                             locations=Offsets(offset + start * size, size, i - start),
                             best_move=b["best_move"][sl] if with_moves else None,
                             best_move_is_capture=b["capture"][sl] if with_moves else None,
                             has_move=b["has_move"][sl] if with_moves else None)
        if i == n:
            break
        yield one_record(i, int(b["game"][i]))
        start = i + 1
