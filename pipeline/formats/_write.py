"""Helpers shared by the format writers (``SPEC.write``, ``nnue convert``): a dataset row's board and move.

A row (:class:`~nnue.pipeline.records.FormatSpec`, ``write``) holds the packed board
(marlinformat layout, :mod:`nnue.pipeline.board`) and the packed move (viriformat layout: from
0–5, to 6–11, promotion N/B/R/Q 12–13, flag 14–15 with 2 = castling as king takes rook,
3 = promotion; FORMATS.md).
"""
from __future__ import annotations

import chess
import numpy as np

from ..board import unpack_fen
from ..chessrules import decode_move, read_board


def board_of(packed: bytes) -> chess.Board:
    """The python-chess board of a packed board: standard chess, or Chess960 when python-chess
    finds its castling rights bad in standard chess (rooks off a/h): :func:`chessrules.read_board`."""
    return read_board(unpack_fen(packed))


def move_uci(board: chess.Board, packed_move: int | None, castling: str | None = None) -> str:
    """UCI of a packed move ("0000" when None). Castling (stored king takes rook): king takes
    rook in Chess960 or when the input spelled castling so (``castling``, the manifest's record
    of the input), else the king's two-square step (e1g1)."""
    if packed_move is None:
        return "0000"
    move = decode_move(packed_move)
    if packed_move >> 14 == 2 and not board.chess960 and castling != "king-takes-rook":
        move = board._from_chess960(board.chess960, move.from_square, move.to_square)  # king takes rook -> e1g1
    return move.uci()


def compiled_dump():
    """The numba writers (:mod:`nnue.pipeline.compiled.dump`), the ``write_block`` fast paths.
    Imported when first used: importing them loads numba, which the CLI's parser must not."""
    from ..compiled import dump

    return dump


def text_block(n: int):
    """Empty output buffers of a text writer kernel for ``n`` rows: (out, ends, fallback)."""
    return (np.empty(compiled_dump().ROW_BYTES * n, np.uint8), np.zeros(n, np.int64), np.zeros(n, np.uint8))
