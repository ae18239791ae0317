"""Compiled viriformat decoder: python-chess's semantics of
:mod:`nnue.pipeline.formats.viriformat` (Chess960 mode, which also plays standard chess),
straight into dataset columns.

:func:`decode_games` walks the games of a byte buffer (a marlinformat header, (move u16,
eval i16) pairs, 4 zero bytes) and for each pair writes the position before its move (packed
board and columns) into caller-owned NumPy buffers. It returns with a status:

* ``END``: every game of the buffer done; ``NEED``: the next game does not end inside the buffer
  (the caller reads more; with ``final`` the game goes to the reference reader instead);
  ``FULL``: the next game does not fit the buffers (call again);
* ``GAME``: the next game (at the returned position) is one this core does not model — a header
  that does not decode, a wdl byte above 2, castling rights python-chess would not keep as they
  are, an invalid start position, an en-passant square with no enemy pawn behind it — or is cut
  short by the end of the file: the caller reads that whole game with the reference reader;
* ``PAIR``: a move that is not legal (or not spelled king-takes-rook for castling): the caller
  hands the rest of the game, from that pair, to the reference reader, with the board rebuilt
  from ``bb``/``pc``/``st`` (:func:`board_from_state`).

Rows get ``kind`` 0 (settled) or 1 (python-chess validates the record: in check with an
en-passant square, two checkers, a score out of int16 range, ply beyond 65535). Every read of
``data`` is bounds-checked against ``end``.
"""
from __future__ import annotations

import chess
import numpy as np
from numba import njit

from ..board import unpack
from .bits import popcount
from .chesscore import KING, push, write_board
from .fixed import buffers as fixed_buffers
from .fixed import MATE_BOUND, VALUE_NONE, _marlin, clean_rights, is_legal960, settle, settle_ep, status_nc

END, NEED, FULL, GAME, PAIR = range(5)


def buffers(cap: int) -> dict:
    """Output buffers for :func:`decode_games` of ``cap`` rows."""
    return fixed_buffers(cap) | dict(loc=np.zeros(cap, np.int64), state=np.zeros((cap, 32), np.uint8),
                                     half=np.zeros(cap, np.int64), full=np.zeros(cap, np.int64), raw_ev=np.zeros(cap, np.int16),
                                     raw_move=np.zeros(cap, np.uint16))


OUT = ("board", "score", "result", "ply", "piece_count", "in_check", "best_move", "capture", "has_move", "flags",
       "kind", "game", "loc", "state", "half", "full", "raw_ev", "raw_move")


@njit(cache=True)
def decode_games(data, pos, end, final, game, bb, pc, st, o_board, o_score, o_result, o_ply, o_pcount, o_check,
                 o_best, o_cap, o_has, o_flags, o_kind, o_game, o_loc, o_state, o_half, o_full, o_raw_ev,
                 o_raw_move):
    """Decode the games of ``data[:end]`` from byte ``pos``. bb/pc/st: the board state arrays
    (uint64[16], int8[64], int64[4]: side to move, ep square, halfmove clock, fullmove number),
    left as they were before the pair where a ``PAIR`` status stops. game: the last game
    ordinal so far. Returns (rows written, position reached, last game ordinal, status, byte
    of the pair that stopped, byte where its game starts, the game's white result)."""
    cap = o_score.shape[0]
    head = np.zeros((1, 32), np.uint8)
    rows = 0
    while pos < end:
        if end - pos < 32:
            return rows, pos, game, NEED if not final else GAME, 0, pos, 0
        q = pos + 32
        while True:
            if q + 4 > end:
                return rows, pos, game, NEED if not final else GAME, 0, pos, 0
            if data[q] == 0 and data[q + 1] == 0 and data[q + 2] == 0 and data[q + 3] == 0:
                break
            q += 4
        npairs = (q - pos - 32) // 4
        if rows + npairs > cap:
            return rows, pos, game, FULL if rows else GAME, 0, pos, 0
        for i in range(32):
            head[0, i] = data[pos + i]
        if not _marlin(head, 0, bb, pc) or head[0, 30] > 2 or not clean_rights(bb):
            return rows, pos, game, GAME, 0, pos, 0
        st[0] = head[0, 24] >> 7
        epb = np.int64(head[0, 24] & 0x7F)
        st[1] = -1 if epb == 64 else epb
        st[2] = head[0, 25]
        st[3] = max(np.int64(head[0, 26]) | (np.int64(head[0, 27]) << 8), 1)
        if popcount(bb[KING]) != 1 or popcount(bb[8 + KING]) != 1:  # before any king-square lookup
            return rows, pos, game, GAME, 0, pos, 0
        ok, ep = settle_ep(bb, pc, st[0], st[1])
        if not ok or status_nc(bb, st[0], ep) != 0:
            return rows, pos, game, GAME, 0, pos, 0
        game += 1
        white_result = np.int64(head[0, 30]) - 1
        start = pos
        p = pos + 32
        while p < q:
            mv = np.int64(data[p]) | (np.int64(data[p + 1]) << 8)
            ev = np.int64(np.int16(np.uint16(data[p + 2]) | (np.uint16(data[p + 3]) << np.uint16(8))))
            us = st[0]
            frm = mv & 63
            to = (mv >> 6) & 63
            promo = ((mv >> 12) & 3) + 1 if (mv >> 14) == 3 else 0
            if not is_legal960(bb, pc, us, st[1], frm, to, promo):
                return rows, p, game, PAIR, p, start, white_result
            sign = -1 if us else 1
            none = abs(ev) == VALUE_NONE
            mate = not none and abs(ev) >= MATE_BOUND
            ply = 2 * (st[3] - 1) + us
            kind = settle(rows, bb, pc, us, st[1], st[2], st[3], 0 if none else ev * sign, none, mate,
                          white_result * sign, ply, True, frm, to, promo, True, True, True, o_board, o_score,
                          o_result, o_ply, o_pcount, o_check, o_best, o_cap, o_has, o_flags)
            o_kind[rows] = kind
            if kind:
                o_result[rows] = white_result * sign
                write_board(o_state, rows, bb, pc, us, st[1], st[2], st[3], 0, 1)
                o_half[rows] = st[2]
                o_full[rows] = st[3]
                o_raw_ev[rows] = ev
                o_raw_move[rows] = mv
            o_game[rows] = game
            o_loc[rows] = p
            rows += 1
            push(bb, pc, st, frm, to, promo)
            p += 4
        pos = q + 4
    return rows, pos, game, END, 0, pos, 0


@njit(cache=True)
def pack_state(bb, pc, st, out):
    """The board state as a packed board (raw en-passant square, castling rooks) in out[0]."""
    write_board(out, 0, bb, pc, st[0], st[1], st[2], st[3], 0, 1)


def board_from_state(packed: bytes, half: int, full: int) -> chess.Board:
    """The Chess960-mode python-chess board of a packed state (castling rooks as rights, the
    en-passant byte as python-chess's ep_square, as the reference reader's board holds it) and
    its counters (unclamped: the packed board holds at most 255 and 65535)."""
    d = unpack(packed)
    board = chess.Board(None, chess960=True)
    for sq, code in d["pieces"].items():
        board.set_piece_at(sq, chess.Piece((code & 7) + 1, not code & 8))
    board.turn = not d["black_to_move"]
    board.castling_rights = d["castling_rooks"]
    board.ep_square = d["ep_square"]
    board.halfmove_clock = half
    board.fullmove_number = full
    return board
