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


class ChainWriter:
    """The chained formats' writer for ``nnue convert`` (``FormatSpec.write_stream``): row groups
    of dataset rows in (:class:`nnue.pipeline.convert.Columns`), the bytes of whole chains out.

    A chain may run on into the next row group, so the rows of the chain still open at the end of
    a row group are held back (at most one chain: 65,536 rows in binpack) and written with the
    next one; :meth:`finish` writes the last. Subclasses give ``links(c) -> (cont, kind)`` (numpy:
    a row continues the row before; 0 written, 2 not written, reason ``NOT_WRITTEN``) and
    ``chains(c, cont, kind, lo, hi) -> bytes``. ``written``: rows written; ``not_written``:
    {reason: rows}; ``chain_count``: chains (games) written."""

    NOT_WRITTEN = "not written"

    def __init__(self):
        self.carry: dict | None = None
        self.written = 0
        self.chain_count = 0
        self.not_written: dict[str, int] = {}
        self.notes: dict[str, int] = {}

    def rows(self, c) -> bytes:
        cols = self._arrays(c)
        if self.carry is not None:
            cols = {k: np.concatenate([self.carry[k], v]) for k, v in cols.items()}
        n = len(cols["best"])
        if not n:
            return b""
        cont, kind = self.links(cols)
        heads = np.flatnonzero((kind == 0) & ~cont)
        last = int(heads[-1]) if len(heads) else n  # the chain still open, held back
        out = self._write(cols, cont, kind, 0, last)
        self.carry = {k: v[last:] for k, v in cols.items()} if last < n else None
        return out

    def finish(self) -> bytes:
        if self.carry is None:
            return b""
        cols, self.carry = self.carry, None
        cont, kind = self.links(cols)
        return self._write(cols, cont, kind, 0, len(cols["best"]))

    def _write(self, cols, cont, kind, lo, hi) -> bytes:
        skipped = int(np.count_nonzero(kind[lo:hi]))
        if skipped:
            self.not_written[self.NOT_WRITTEN] = self.not_written.get(self.NOT_WRITTEN, 0) + skipped
        self.written += hi - lo - skipped
        return self.chains(cols, cont, kind, lo, hi) if hi > lo else b""

    @staticmethod
    def _arrays(c) -> dict:
        return {"boards": c.boards, "best": c.best, "score": c.score, "result": c.result, "ply": c.ply,
                "none": c.none}
