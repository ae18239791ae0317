"""The bulk path of the text readers: runs of records packed and validated with NumPy.

:func:`bulk` takes a reader's stream of Records and Rejects (in file order) and yields the same
stream with runs of records replaced by :class:`~nnue.pipeline.formats.PackedRows`: every
batch of records is packed by :func:`nnue.pipeline.fastfen.pack_fens` and validated by
:func:`nnue.pipeline.fastcheck.check_boards`, and a record both accept joins a run. Every other
record — a FEN outside fastfen's plain shape, a board the bulk checks cannot settle or would
reject, a move :func:`nnue.pipeline.fastmove.check_moves` does not find legal (castling, en
passant and every doubtful one included), a score outside int16 — is passed on unchanged, to the
python-chess path of :mod:`nnue.pipeline.pack`, which decides and names its reject reason. So a
reader's output packs to the same rows and rejects with and without this path (tested).
"""
from __future__ import annotations

from typing import Iterable, Iterator

from . import PackedRows, Record, Reject

BATCH = 8192  # records packed together


def bulk(items: Iterable[Record | Reject], batch: int = BATCH) -> Iterator[Record | Reject | PackedRows]:
    """``items`` with runs of bulk-validated records as PackedRows (module docstring)."""
    pending: list = []
    count = 0
    for item in items:
        pending.append(item)
        count += isinstance(item, Record)
        if count >= batch:
            yield from _batch(pending)
            pending, count = [], 0
    yield from _batch(pending)


def _batch(items: list) -> Iterator[Record | Reject | PackedRows]:
    import numpy as np

    from ..fastcheck import check_boards
    from ..fastfen import pack_fens
    from ..fastmove import check_moves
    from ..schema import FLAG_PLY_UNKNOWN, FLAG_SCORE_MATE, FLAG_SCORE_NONE

    recs = [r for r in items if isinstance(r, Record)]
    if not recs:
        yield from items
        return
    n = len(recs)
    # what the python-chess path checks by value, checked here in Python ints (a reader may hand
    # on any int: only the in-range records take this path, and their values fit the arrays)
    in_range = np.fromiter((r.board is None and (r.score is None or -32767 <= r.score <= 32767)
                         and r.result in (-1, 0, 1) and (r.ply is None or 0 <= r.ply <= 65535) for r in recs),
                        dtype=bool, count=n)
    none = np.fromiter((r.score is None for r in recs), dtype=bool, count=n)
    score = np.fromiter((r.score if fits and r.score is not None else 0 for r, fits in zip(recs, in_range)),
                        dtype=np.int64, count=n)
    result = np.fromiter((r.result if fits else 0 for r, fits in zip(recs, in_range)), dtype=np.int64, count=n)
    black = np.fromiter((r.fen.split()[1:2] == ["b"] for r in recs), dtype=bool, count=n)
    sign = np.where(black, -1, 1)
    boards, packed = pack_fens([r.fen for r in recs], score * sign, result * sign + 1)
    chk = check_boards(boards)
    ok = in_range & packed & (chk.reason == 0) & ~chk.slow
    has_move = np.fromiter((r.move is not None for r in recs), dtype=bool, count=n)
    best = np.zeros(n, dtype=np.uint16)
    capture = np.zeros(n, dtype=bool)
    sel = np.nonzero(ok & has_move)[0]
    if len(sel):  # the move must be legal by the bulk check too, else python-chess decides
        legal, best[sel], capture[sel] = check_moves(boards[sel], [recs[i].move for i in sel])
        ok[sel] &= legal
    unknown = np.fromiter((r.ply is None for r in recs), dtype=bool, count=n)
    ply = np.fromiter((r.ply if fits and r.ply is not None else 0 for r, fits in zip(recs, in_range)),
                      dtype=np.int64, count=n)
    mate = np.fromiter((r.score_is_mate for r in recs), dtype=bool, count=n)
    flags = ((none * FLAG_SCORE_NONE) | (mate * FLAG_SCORE_MATE) | (unknown * FLAG_PLY_UNKNOWN)).astype(np.uint8)
    game = np.fromiter((r.game for r in recs), dtype=np.int64, count=n)

    def rows(lo: int, hi: int) -> PackedRows:
        return PackedRows(board=boards[lo:hi], score=score[lo:hi].astype(np.int16), result=result[lo:hi].astype(np.int8),
                          ply=ply[lo:hi].astype(np.uint16), piece_count=chk.piece_count[lo:hi],
                          in_check=chk.in_check[lo:hi], game=game[lo:hi], flags=flags[lo:hi],
                          first=recs[lo].location, locations=[r.location for r in recs[lo:hi]],
                          **({"best_move": best[lo:hi], "best_move_is_capture": capture[lo:hi],
                              "has_move": has_move[lo:hi]} if has_move[lo:hi].any() else {}))

    k = 0          # index of the next record
    run = None     # first record of the current run
    for item in items:
        if isinstance(item, Record) and ok[k]:
            if run is None:
                run = k
            k += 1
            continue
        if run is not None:
            yield rows(run, k)
            run = None
        yield item
        k += isinstance(item, Record)
    if run is not None:
        yield rows(run, k)
