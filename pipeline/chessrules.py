"""The chess rules of the pipeline, on python-chess: reading a FEN (standard, or Chess960 when
its castling rights only make sense there), validating a position as ``nnue pack`` does (the
reject reasons), and the packed move (``best_move`` uint16, viriformat layout: from bits 0-5, to
6-11, promotion N/B/R/Q = 0-3 in 12-13, flag 14-15: 1 en passant, 2 castling as king takes rook,
3 promotion; :mod:`nnue.pipeline.schema`).

One copy of each rule: the packer (:mod:`nnue.pipeline.pack`), ``nnue eval --fen``
(:mod:`nnue.pipeline.positions`), ``nnue convert`` (:mod:`nnue.pipeline.convert`), the
viriformat reader and self-play's book reader import them. No pyarrow, no torch.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import chess

from .retro import double_check_possible

if TYPE_CHECKING:  # the record type only names the argument
    from .records import Record


# python-chess status bits -> reject reasons (invalid ep squares are normalised, not rejected)
STATUS_REASONS = [
    (chess.STATUS_EMPTY, "empty board"),
    (chess.STATUS_NO_WHITE_KING | chess.STATUS_NO_BLACK_KING | chess.STATUS_TOO_MANY_KINGS,
     "a side does not have exactly one king"),
    (chess.STATUS_PAWNS_ON_BACKRANK, "pawn on first or last rank"),
    (chess.STATUS_OPPOSITE_CHECK, "side not to move is in check"),
    (chess.STATUS_BAD_CASTLING_RIGHTS, "castling rights don't match kings and rooks"),
    (chess.STATUS_TOO_MANY_WHITE_PAWNS | chess.STATUS_TOO_MANY_BLACK_PAWNS
     | chess.STATUS_TOO_MANY_WHITE_PIECES | chess.STATUS_TOO_MANY_BLACK_PIECES,
     "too many pieces"),
    (chess.STATUS_TOO_MANY_CHECKERS | chess.STATUS_IMPOSSIBLE_CHECK, "impossible check"),
]


class RecordError(ValueError):
    """A record failed validation: ``reason`` is the counted category, ``detail`` the specifics."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason, self.detail = reason, detail


def encode_move(board: chess.Board, move: chess.Move) -> int:
    """Pack a legal move as uint16, viriformat layout (see :mod:`nnue.pipeline.schema`)."""
    flag = 0
    promo = 0
    if move.promotion:
        flag, promo = 3, move.promotion - chess.KNIGHT
    elif board.is_castling(move):
        flag = 2
        move = board._to_chess960(move)  # king takes rook, as in viriformat and binpack
    elif board.is_en_passant(move):
        flag = 1
    return move.from_square | move.to_square << 6 | promo << 12 | flag << 14


def validate(rec: Record) -> tuple[chess.Board, chess.Move | None]:
    """Build and check the position and move of a record. Raises RecordError.

    The board is read as standard chess first and as Chess960 when its castling rights only
    make sense there (X-FEN or Shredder-FEN). An en-passant square with no legal en-passant
    capture is dropped (normalised), never rejected.
    """
    board = rec.board
    if board is None:
        try:
            board = read_board(rec.fen)
        except ValueError as e:
            raise RecordError("bad FEN", str(e)) from None
    check_board(board, rec.fen)
    move = None
    if rec.move is not None:
        try:
            move = board.parse_uci(rec.move)
        except (ValueError, AssertionError) as e:
            raise RecordError("illegal move", f"{rec.move} in {rec.fen}: {e}") from None
    return board, move


def check_board(board: chess.Board, fen: str = "") -> None:
    """Validate a position as ``nnue pack`` does: an en-passant square with no legal en-passant
    capture is dropped from ``board`` (normalised, never rejected); a position python-chess's
    ``Board.status()`` flags, or a double check no last move can give (:mod:`nnue.pipeline.retro`),
    raises RecordError with the reason of :data:`STATUS_REASONS` (``fen`` is the detail)."""
    if board.ep_square is not None and not board.has_legal_en_passant():
        board.ep_square = None
    status = board.status()
    for bits, reason in STATUS_REASONS:
        if status & bits:
            raise RecordError(reason, fen)
    if chess.popcount(board.checkers_mask()) == 2:  # python-chess lets some impossible ones pass
        if not double_check_possible(board):
            raise RecordError("impossible check", f"no last move gives this double check: {fen}")


def read_board(fen: str, chess960: bool = False) -> chess.Board:
    """A python-chess board of ``fen``: read as standard chess, and as Chess960 when its castling
    rights only make sense there (X-FEN or Shredder-FEN of a Chess960 start) and are valid there;
    with ``chess960`` read as Chess960 only. Raises ValueError for a malformed FEN. The board is
    not validated (:func:`validate` does that)."""
    if chess960:
        return chess.Board(fen, chess960=True)
    board = chess.Board(fen)
    if board.status() & chess.STATUS_BAD_CASTLING_RIGHTS:
        try:
            b960 = chess.Board(fen, chess960=True)
        except ValueError:
            return board
        if not b960.status() & chess.STATUS_BAD_CASTLING_RIGHTS:
            return b960
    return board


def decode_move(m: int) -> chess.Move:
    """The move of a packed uint16 (:func:`encode_move`'s layout); castling comes back as king
    takes rook, as it is stored (``board._from_chess960`` gives the standard spelling)."""
    frm, to, promo, flag = m & 63, (m >> 6) & 63, (m >> 12) & 3, m >> 14
    return chess.Move(frm, to, promotion=promo + chess.KNIGHT if flag == 3 else None)
