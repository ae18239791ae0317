"""Test oracle: python-chess's verdicts on packed boards, for a whole block at once, in NumPy.

:func:`check_boards` takes marlinformat boards ``(N, 32) uint8`` and decides, with NumPy bitboard
arithmetic and no per-position Python, what :func:`nnue.pipeline.pack.validate` (python-chess
``Board.status()``) would decide: the reject reason, if any, in the same order of precedence,
whether the side to move is in check, and the piece count. Rows it cannot settle exactly — an
en-passant square (legality needs pins), exactly two checkers (python-chess's "impossible
check" geometry) — are marked ``slow``. It is an independent implementation of the rules that
the compiled decoders (:mod:`nnue.pipeline.compiled`) apply, so the fuzzers
(``scripts/fuzz_compiled_fixed.py``, ``scripts/fuzz_compiled_binpack.py``, which load this file by
its path) check every row those decoders settle against it. It was ``nnue.pipeline.fastcheck``,
the fixed-record readers' bulk path, before the compiled core replaced that path; the package no
longer uses it.
"""
from __future__ import annotations

from dataclasses import dataclass

import chess
import numpy as np

REASONS = ["", "malformed record", "empty board", "a side does not have exactly one king",
           "pawn on first or last rank", "side not to move is in check",
           "castling rights don't match kings and rooks", "too many pieces", "impossible check"]
R = {name: i for i, name in enumerate(REASONS)}

_U64 = np.uint64
_KNIGHT = np.array(chess.BB_KNIGHT_ATTACKS, dtype=_U64)
_KING = np.array(chess.BB_KING_ATTACKS, dtype=_U64)
_PAWN = np.array([chess.BB_PAWN_ATTACKS[chess.WHITE], chess.BB_PAWN_ATTACKS[chess.BLACK]], dtype=_U64)
CHUNK = 8192
_ORTHO = [(1, 0), (-1, 0), (0, 1), (0, -1)]
_DIAG = [(1, 1), (1, -1), (-1, 1), (-1, -1)]


def _rays(dirs) -> np.ndarray:
    """(len(dirs), 64, 7) int64: the squares along each direction from each square, −1 past the edge."""
    out = np.full((len(dirs), 64, 7), -1, dtype=np.int64)
    for d, (df, dr) in enumerate(dirs):
        for sq in range(64):
            f, r = sq & 7, sq >> 3
            for step in range(7):
                f, r = f + df, r + dr
                if not (0 <= f < 8 and 0 <= r < 8):
                    break
                out[d, sq, step] = 8 * r + f
    return out


_RAYS_ORTHO, _RAYS_DIAG = _rays(_ORTHO), _rays(_DIAG)


@dataclass
class Checked:
    """reason: (N,) int8 index into REASONS (0 = valid); slow: (N,) bool, settle with python-chess;
    in_check: (N,) bool; piece_count: (N,) uint8; black: (N,) bool side to move; ep: (N,) bool
    the board carries an en-passant square."""

    reason: np.ndarray
    slow: np.ndarray
    in_check: np.ndarray
    piece_count: np.ndarray
    black: np.ndarray


def _bb(mask: np.ndarray) -> np.ndarray:
    """(N, 64) bool -> (N,) uint64 bitboards (bit s = square s)."""
    return np.packbits(mask, axis=1, bitorder="little").view("<u8").ravel()


def _lsb(bb: np.ndarray) -> np.ndarray:
    """Index of the lowest set bit of each uint64 (0 for 0)."""
    low = bb & (~bb + _U64(1))
    out = np.zeros(bb.shape, dtype=np.int64)
    nz = low != 0
    out[nz] = np.log2(low[nz].astype(np.float64)).astype(np.int64)
    return out


def _slider_attackers(t: np.ndarray, occ: np.ndarray, sliders: np.ndarray, rays: np.ndarray) -> np.ndarray:
    """Bitboard of ``sliders`` that see square t along ``rays`` through the occupancy."""
    out = np.zeros(t.shape, dtype=_U64)
    for d in range(rays.shape[0]):
        blocked = np.zeros(t.shape, dtype=bool)
        for step in range(7):
            sq = rays[d, t, step]
            live = (sq >= 0) & ~blocked
            if not live.any():
                break
            bit = np.where(live, _U64(1) << np.maximum(sq, 0).astype(_U64), _U64(0))
            hit = (occ & bit) != 0
            out |= np.where(hit & ((sliders & bit) != 0), bit, _U64(0))
            blocked |= hit
    return out


def _attackers(t, king_black, occ, bbs) -> np.ndarray:
    """Pieces of the colour opposite ``king_black`` that attack square t: (N,) uint64."""
    them = np.where(king_black, 0, 1)  # attacker colour index: 0 white, 1 black
    rows = np.arange(t.shape[0])
    p, n, b, r, q, k = (bbs[them, kind, rows] for kind in range(6))
    att = _KNIGHT[t] & n
    att |= _KING[t] & k
    att |= _PAWN[king_black.astype(np.int64), t] & p
    att |= _slider_attackers(t, occ, r | q, _RAYS_ORTHO)
    att |= _slider_attackers(t, occ, b | q, _RAYS_DIAG)
    return att


def _squares(boards: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N, 32) uint8 boards -> (occupancy (N,) uint64, occupied (N, 64) bool, the nibble code
    on each square (N, 64) uint8, 255 where empty)."""
    n = boards.shape[0]
    occ = boards[:, :8].copy().view("<u8").ravel()
    bits = np.unpackbits(boards[:, :8], axis=1, bitorder="little").view(bool)  # (N, 64)
    nib = boards[:, 8:24]
    nibbles = np.stack([nib & 15, nib >> 4], axis=2).reshape(n, 32)
    rank = np.cumsum(bits, axis=1, dtype=np.uint8)
    rank -= 1
    np.minimum(rank, 31, out=rank)  # empty squares before the first piece wrap to 255
    code = np.take_along_axis(nibbles, rank.astype(np.intp), axis=1)
    code[~bits] = 255
    return occ, bits, code


def decode(boards: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Valid (N, 32) uint8 boards -> (occupancy (N,) uint64, piece on each square (N, 64) uint8:
    0..5 white P N B R Q K, 8..13 black, 255 empty (castling rooks read as rooks), bitboards
    (2 colours, 6 kinds, N) uint64, black to move (N,) bool)."""
    occ, _, code = _squares(boards)
    piece = np.where((code != 255) & ((code & 7) == 6), (code & 8) | 3, code)
    bbs = np.zeros((2, 6, boards.shape[0]), dtype=_U64)
    for c in (0, 1):
        for k in range(6):
            bbs[c, k] = _bb(piece == 8 * c + k)
    return occ, piece, bbs, (boards[:, 24] >> 7).astype(bool)


def check_boards(boards: np.ndarray) -> Checked:
    """Validate (N, 32) uint8 marlinformat boards the way python-chess would.

    Precedence of reasons follows :data:`nnue.pipeline.pack._STATUS_REASONS` after the codec's
    own "malformed record" (more than 32 pieces, a bad piece code, a castling code off its back
    rank, an en-passant byte above 64).
    """
    n = boards.shape[0]
    if n > CHUNK:  # cache-sized pieces: (N, 64) temporaries of a whole block cost more in page faults
        parts = [check_boards(boards[i:i + CHUNK]) for i in range(0, n, CHUNK)]
        return Checked(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                         ("reason", "slow", "in_check", "piece_count", "black")))
    occ, bits, code = _squares(boards)
    count = np.bitwise_count(occ)
    raw_kind = code & 7
    raw_kind[~bits] = 8
    sq = np.arange(64)
    back = np.where(code >= 8, (sq >> 3 == 7), (sq >> 3 == 0))
    malformed = ((count > 32) | (raw_kind == 7).any(1) | ((raw_kind == 6) & ~back).any(1)
                 | ((boards[:, 24] & 0x7F) > 64))
    black = (boards[:, 24] >> 7).astype(bool)
    ep = (boards[:, 24] & 0x7F) != 64
    piece = np.where(raw_kind == 6, (code & 8) | 3, code)  # castling rooks are rooks; 255 = empty

    bbs = np.zeros((2, 6, n), dtype=_U64)
    for c in (0, 1):
        for k in range(6):
            bbs[c, k] = _bb(piece == 8 * c + k)
    kings = np.bitwise_count(bbs[:, 5])  # (2, N)
    one_king_each = (kings == 1).all(0)
    pawns = np.bitwise_count(bbs[:, 0])
    pieces = np.bitwise_count(bbs.reshape(2, 6, n)).sum(1)
    too_many = (pawns > 8).any(0) | (pieces > 16).any(0)
    backrank_pawn = ((bbs[0, 0] | bbs[1, 0]) & _U64(chess.BB_BACKRANKS)) != 0

    # castling: per colour, the rights survive python-chess's Chess960 cleaning unchanged
    castle_bad = np.zeros(n, dtype=bool)
    fen_unreadable = np.zeros(n, dtype=bool)  # python-chess refuses > 2 castling rights a side
    for c, home in ((0, chess.BB_RANK_1), (1, chess.BB_RANK_8)):
        rights = _bb(code == 8 * c + 6)
        fen_unreadable |= np.bitwise_count(rights) > 2
        has = rights != 0
        king_home = (bbs[c, 5] & _U64(home)) != 0
        ksq = _lsb(bbs[c, 5])
        nr = np.bitwise_count(rights)
        lo = _lsb(rights)
        hi = 63 - _lsb_rev(rights)
        ok1 = (nr == 1) & (lo != ksq)
        ok2 = (nr == 2) & (lo < ksq) & (hi > ksq)
        castle_bad |= has & ~(king_home & (ok1 | ok2))

    # checks, only where each side has one king
    safe = one_king_each & ~malformed
    wk, bk = _lsb(bbs[0, 5]), _lsb(bbs[1, 5])
    stm_k = np.where(black, bk, wk)
    them_k = np.where(black, wk, bk)
    stm_att = np.zeros(n, dtype=_U64)
    opp_att = np.zeros(n, dtype=_U64)
    if safe.any():
        idx = np.nonzero(safe)[0]
        sub = bbs[:, :, idx]
        stm_att[idx] = _attackers(stm_k[idx], black[idx], occ[idx], sub)
        opp_att[idx] = _attackers(them_k[idx], ~black[idx], occ[idx], sub)
    checkers = np.bitwise_count(stm_att)

    reason = np.zeros(n, dtype=np.int8)
    order = [("malformed record", malformed), ("empty board", occ == 0),
             ("a side does not have exactly one king", ~one_king_each),
             ("pawn on first or last rank", backrank_pawn),
             ("side not to move is in check", safe & (opp_att != 0)),
             ("castling rights don't match kings and rooks", castle_bad),
             ("too many pieces", too_many), ("impossible check", safe & (checkers > 2))]
    for name, cond in reversed(order):  # earlier entries win
        reason = np.where(cond, np.int8(R[name]), reason)
    # rows python-chess must settle: an ep square (legality needs pins), two checkers (its
    # "impossible check" geometry), or castling rights its FEN parser refuses ("bad FEN")
    odd = fen_unreadable & (reason != R["malformed record"])
    reason = np.where(odd, np.int8(0), reason)
    slow = (reason == 0) & (ep | (checkers == 2) | odd)
    return Checked(reason=reason, slow=slow, in_check=checkers > 0, piece_count=count.astype(np.uint8),
                   black=black)


def clear_unused_nibbles(boards: np.ndarray) -> None:
    """Zero, in place, the nibble slots past the last occupied square (the codec writes zeros
    there; a dump may not). boards: (N, 32) uint8 with at most 32 occupied squares."""
    count = np.bitwise_count(boards[:, :8].copy().view("<u8").ravel()).astype(np.int64)
    slot = np.arange(32)
    keep = slot[None, :] < count[:, None]  # (N, 32) nibble slots in use
    mask = (keep[:, 0::2] * 0x0F | keep[:, 1::2] * 0xF0).astype(np.uint8)
    boards[:, 8:24] &= mask


def _lsb_rev(bb: np.ndarray) -> np.ndarray:
    """63 − index of the highest set bit (for 0: 63)."""
    out = np.full(bb.shape, 63, dtype=np.int64)
    nz = bb != 0
    out[nz] = 63 - np.floor(np.log2(bb[nz].astype(np.float64))).astype(np.int64)
    # float64 rounding can overshoot for bits ≥ 53: correct downward where 2^msb > bb
    msb = 63 - out[nz]
    over = (_U64(1) << msb.astype(_U64)) > bb[nz]
    out[nz] += over
    return out
