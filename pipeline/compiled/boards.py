"""Compiled twin of :func:`nnue.pipeline.fastcheck.check_boards`: the same verdicts (reason,
slow, in_check, piece_count, black) for (N, 32) uint8 marlinformat boards, one pass a board in
numba instead of NumPy's (N, 64) temporaries. fastcheck stays the reference; the tests compare
the two on real and broken boards."""
from __future__ import annotations

import numpy as np
from numba import njit

from .bits import lsb, msb, popcount
from .chesscore import OCC, SQ, U64, attackers

_HOME = np.array([0x00000000000000FF, 0xFF00000000000000], dtype=U64)
BACKRANKS = U64(0xFF000000000000FF)
# reason indices, as fastcheck.REASONS
MALFORMED, EMPTY, KINGS, BACKRANK, OPP_CHECK, CASTLING, TOO_MANY, IMPOSSIBLE = range(1, 9)


@njit(cache=True)
def _check(boards, reason, slow, in_check, piece_count, black):
    bb = np.zeros(16, np.uint64)
    for r in range(boards.shape[0]):
        occ = U64(0)
        for i in range(8):
            occ |= U64(boards[r, i]) << U64(8 * i)
        count = popcount(occ)
        for i in range(16):
            bb[i] = 0
        rights0 = U64(0)
        rights1 = U64(0)
        malformed = count > 32 or (boards[r, 24] & 0x7F) > 64
        m = occ
        i = 0
        while m and not malformed:
            sq = lsb(m)
            m &= m - U64(1)
            code = (boards[r, 8 + (i >> 1)] >> (4 * (i & 1))) & 15
            i += 1
            kind = code & 7
            c = code >> 3
            if kind == 7:
                malformed = True
                break
            if kind == 6:
                if (sq >> 3) != (7 if c else 0):
                    malformed = True
                    break
                if c:
                    rights1 |= SQ[sq]
                else:
                    rights0 |= SQ[sq]
                kind = 3
            bb[8 * c + kind] |= SQ[sq]
            bb[OCC + c] |= SQ[sq]
        stm = boards[r, 24] >> 7
        black[r] = stm == 1
        piece_count[r] = count
        ep = (boards[r, 24] & 0x7F) != 64
        if malformed:
            reason[r] = MALFORMED
            slow[r] = False
            in_check[r] = False
            continue
        one_king_each = popcount(bb[5]) == 1 and popcount(bb[13]) == 1
        too_many = (popcount(bb[0]) > 8 or popcount(bb[8]) > 8 or popcount(bb[OCC]) > 16
                    or popcount(bb[OCC + 1]) > 16)
        backrank = ((bb[0] | bb[8]) & BACKRANKS) != 0
        castle_bad = False
        unreadable = popcount(rights0) > 2 or popcount(rights1) > 2
        for c in range(2):
            rights = rights1 if c else rights0
            if rights:
                kings = bb[8 * c + 5]
                king_home = (kings & _HOME[c]) != 0
                ksq = lsb(kings) if kings else 0
                nr = popcount(rights)
                lo = lsb(rights)
                hi = msb(rights)
                ok = (nr == 1 and lo != ksq) or (nr == 2 and lo < ksq and hi > ksq)
                if not (king_home and ok):
                    castle_bad = True
        checkers = 0
        opp = False
        if one_king_each:
            stm_k = lsb(bb[8 * stm + 5])
            opp_k = lsb(bb[8 * (1 - stm) + 5])
            checkers = popcount(attackers(bb, 1 - stm, stm_k, occ, U64(0)))
            opp = attackers(bb, stm, opp_k, occ, U64(0)) != 0
        if occ == 0:
            why = EMPTY
        elif not one_king_each:
            why = KINGS
        elif backrank:
            why = BACKRANK
        elif opp:
            why = OPP_CHECK
        elif castle_bad:
            why = CASTLING
        elif too_many:
            why = TOO_MANY
        elif checkers > 2:
            why = IMPOSSIBLE
        else:
            why = 0
        if unreadable:
            why = 0
        reason[r] = why
        slow[r] = why == 0 and (ep or checkers == 2 or unreadable)
        in_check[r] = checkers > 0


def check_boards(boards: np.ndarray):
    """As :func:`nnue.pipeline.fastcheck.check_boards` (returns its ``Checked``)."""
    from ..fastcheck import Checked

    boards = np.ascontiguousarray(boards, dtype=np.uint8)
    n = boards.shape[0]
    out = Checked(reason=np.zeros(n, np.int8), slow=np.zeros(n, bool), in_check=np.zeros(n, bool),
                  piece_count=np.zeros(n, np.uint8), black=np.zeros(n, bool))
    if n:
        _check(boards, out.reason, out.slow, out.in_check, out.piece_count, out.black)
    return out
