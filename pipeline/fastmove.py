"""Move legality in bulk, with NumPy: the moves of text dumps (``.plain``) checked a batch at once.

:func:`check_moves` takes packed boards that :func:`nnue.pipeline.fastcheck.check_boards` found
valid and settled, and UCI moves, and says which moves are certainly legal: a piece of the side to
move goes where its kind can (knight and king steps, slider lines with nothing between, pawn
pushes, double pushes from the start rank, captures, promotions to N B R Q on the last rank), the
target holds no piece of its own, and the own king is not attacked afterwards. Castling, en
passant, null moves, and every move it does not find legal are left to the caller's python-chess
path, which decides them and names the reason. For the moves it takes it gives the schema's
``best_move`` (viriformat layout, as :func:`nnue.pipeline.pack.encode_move`) and whether the
move captures or promotes (``best_move_is_capture``).
"""
from __future__ import annotations

import chess
import numpy as np

from .fastcheck import _U64, _attackers, _lsb, decode

_KNIGHT = np.array(chess.BB_KNIGHT_ATTACKS, dtype=_U64)
_KING = np.array(chess.BB_KING_ATTACKS, dtype=_U64)
_PAWN = np.array([chess.BB_PAWN_ATTACKS[chess.WHITE], chess.BB_PAWN_ATTACKS[chess.BLACK]], dtype=_U64)
_BETWEEN = np.array([[chess.between(a, b) for b in range(64)] for a in range(64)], dtype=_U64)
_DIAG = np.array([[a != b and abs((a & 7) - (b & 7)) == abs((a >> 3) - (b >> 3)) for b in range(64)]
                  for a in range(64)])
_ORTHO = np.array([[a != b and (a >> 3 == b >> 3 or a & 7 == b & 7) for b in range(64)] for a in range(64)])
_SQ = {chess.square_name(s): s for s in range(64)}
_PROMO = {"n": 1, "b": 2, "r": 3, "q": 4}  # piece kind 1..4 (N B R Q), viriformat promo = kind − 1


def _parse(moves: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """UCI moves -> (from, to, promotion kind or 0) int64 arrays and a parsed mask."""
    n = len(moves)
    fr, to, pr = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    ok = np.zeros(n, dtype=bool)
    for i, m in enumerate(moves):
        if m is None or not 4 <= len(m) <= 5:
            continue
        a, b = _SQ.get(m[:2]), _SQ.get(m[2:4])
        p = _PROMO.get(m[4:], -1) if len(m) == 5 else 0
        if a is None or b is None or p < 0:
            continue
        fr[i], to[i], pr[i], ok[i] = a, b, p, True
    return fr, to, pr, ok


def check_moves(boards: np.ndarray, moves: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """boards: (N, 32) uint8, each valid with no en-passant square (check_boards: reason 0, not
    slow); moves: N UCI strings. Returns (legal (N,) bool, best_move (N,) uint16, capture (N,)
    bool); best_move and capture are meaningful where legal."""
    n = len(moves)
    fr, to, pr, ok = _parse(moves)
    occ, piece, bbs, black = decode(boards)
    rows = np.arange(n)
    p = piece[rows, fr]                 # 255 = empty
    target = piece[rows, to]
    colour = (p >> 3).astype(np.int64)  # 0 white, 1 black (for empty squares: 31, never stm)
    kind = (p & 7).astype(np.int64)
    stm = black.astype(np.int64)
    ok &= (p != 255) & (colour == stm) & (fr != to)
    ok &= (target == 255) | ((target >> 3) != stm)
    capture = target != 255
    to_bb = np.left_shift(_U64(1), to.astype(_U64))
    fr_bb = np.left_shift(_U64(1), fr.astype(_U64))
    clear = (_BETWEEN[fr, to] & occ) == 0
    last = np.where(stm == 0, to >> 3 == 7, to >> 3 == 0)
    geo = np.zeros(n, dtype=bool)
    geo |= (kind == 1) & ((_KNIGHT[fr] & to_bb) != 0)
    geo |= (kind == 5) & ((_KING[fr] & to_bb) != 0)             # castling is never one king step
    geo |= (kind == 2) & _DIAG[fr, to] & clear
    geo |= (kind == 3) & _ORTHO[fr, to] & clear
    geo |= (kind == 4) & (_DIAG[fr, to] | _ORTHO[fr, to]) & clear
    fwd = np.where(stm == 0, 8, -8)
    start = np.where(stm == 0, fr >> 3 == 1, fr >> 3 == 6)
    push1 = (to == fr + fwd) & ~capture
    push2 = start & (to == fr + 2 * fwd) & ~capture & (piece[rows, np.clip(fr + fwd, 0, 63)] == 255)
    pawn_capture = ((_PAWN[stm, fr] & to_bb) != 0) & capture         # en passant goes to python-chess
    geo |= (kind == 0) & (push1 | push2 | pawn_capture)
    ok &= geo
    ok &= np.where(kind == 0, last == (pr != 0), pr == 0)           # promote exactly on the last rank
    # the position after the move: the own king must not be attacked
    after = bbs.copy()
    them = 1 - stm
    for k in range(6):  # the captured piece leaves the board
        after[them, k, rows] &= ~to_bb
    kind = np.minimum(kind, 5)  # rows with no piece on the from-square are not ok already
    new_kind = np.where(pr != 0, pr, kind)
    after[stm, kind, rows] &= ~fr_bb
    after[stm, new_kind, rows] |= to_bb
    occ2 = (occ & ~fr_bb) | to_bb
    ksq = np.where(kind == 5, to, _lsb(after[stm, 5, rows]))
    ok &= _attackers(ksq, black, occ2, after) == 0
    flag = np.where(pr != 0, 3, 0)
    best = (fr | (to << 6) | (np.maximum(pr - 1, 0) << 12) | (flag << 14)).astype(np.uint16)
    return ok, best, capture | (pr != 0)

