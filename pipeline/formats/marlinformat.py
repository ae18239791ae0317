"""marlinformat reader: 32-byte ``PackedBoard`` records (the dataset's own board layout).

eval: int16, **white** POV; wdl: 0 black win, 1 draw, 2 white win (FORMATS.md). Both are turned
to side-to-move POV. Ply comes from the fullmove counter and the side to move. A new game starts
when ply does not follow on or the result changes.
"""
from __future__ import annotations

from typing import Iterator

from ..board import unpack, unpack_fen
from . import MATE_BOUND, VALUE_NONE, FormatSpec, PackedRows, ReaderOptions, Record, Reject
from ._binary import emit_runs, fixed_blocks, fixed_records, game_boundary

SIZE = 32


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject | PackedRows]:
    """Records in file order; with ``options.fast`` (the default), runs of records validated in
    bulk come as PackedRows (:mod:`nnue.pipeline.fastcheck`), the rest one by one."""
    if not options.fast:
        yield from _read_slow(stream, options)
        return
    state = {"game": -1, "ply": None, "result": None}
    for item in fixed_blocks(stream, SIZE):
        if isinstance(item, Reject):
            yield item
        else:
            yield from _fast_block(*item, state)


def _fast_block(offset: int, recs, state: dict):
    import numpy as np

    from ..fastcheck import R, REASONS, clear_unused_nibbles
    from ..compiled.boards import check_boards  # numba twin of fastcheck.check_boards
    from ..schema import FLAG_PLY_UNKNOWN, FLAG_SCORE_MATE, FLAG_SCORE_NONE

    n = len(recs)
    chk = check_boards(recs)
    wdl = recs[:, 30].astype(np.int64)
    ev = recs[:, 28:30].copy().view("<i2").ravel().astype(np.int64)
    fullmove = recs[:, 26:28].copy().view("<u2").ravel().astype(np.int64)
    black = chk.black
    sign = np.where(black, -1, 1)
    result = (wdl - 1) * sign
    ply = np.where(fullmove >= 1, 2 * (fullmove - 1) + black, -1)
    malformed = chk.reason == R["malformed record"]
    wdl_bad = ~malformed & (wdl > 2)
    readable = ~malformed & ~wdl_bad
    # game ordinals, as the one-by-one reader numbers them (rows it reads, in order)
    game = np.full(n, -1, dtype=np.int64)
    v = np.nonzero(readable)[0]
    if len(v):
        p, r = ply[v], result[v]
        prev_p = np.concatenate([[-1 if state["ply"] is None else state["ply"]], p[:-1]])
        prev_r = np.concatenate([[0 if state["result"] is None else state["result"]], r[:-1]])
        has_prev = np.ones(len(v), bool)
        has_prev[0] = state["ply"] is not None or state["result"] is not None
        same = has_prev & (prev_p >= 0) & (p >= 0) & (p == prev_p + 1) & (r == -prev_r)
        game[v] = state["game"] + np.cumsum(~same)
        state.update(game=int(game[v[-1]]), ply=None if p[-1] < 0 else int(p[-1]), result=int(r[-1]))
    none = np.abs(ev) == VALUE_NONE
    score = np.where(none, 0, ev * sign)
    status = readable & (chk.reason != 0)
    score_bad = readable & ~status & ((score < -32767) | (score > 32767))
    ply_bad = readable & ~status & ~score_bad & (ply > 65535)
    slow = readable & ~status & ~score_bad & ~ply_bad & chk.slow
    ok = readable & ~status & ~score_bad & ~ply_bad & ~slow
    rejects = [(i, "malformed record", "bad occupancy, piece code or en-passant byte") for i in np.nonzero(malformed)[0]]
    rejects += [(i, "result out of range", f"wdl byte {wdl[i]}") for i in np.nonzero(wdl_bad)[0]]
    rejects += [(i, REASONS[chk.reason[i]], "") for i in np.nonzero(status)[0]]
    rejects += [(i, "score out of int16 range", str(score[i])) for i in np.nonzero(score_bad)[0]]
    rejects += [(i, "ply out of range", str(ply[i])) for i in np.nonzero(ply_bad)[0]]
    board = recs.copy()
    board[:, 28:30] = np.where(none, 0, ev).astype("<i2").view(np.uint8).reshape(n, 2)
    board[:, 31] = 0
    board[:, 26:28] = np.maximum(fullmove, 1).astype("<u2").view(np.uint8).reshape(n, 2)  # as python-chess
    sel = np.nonzero(ok)[0]
    if len(sel):
        sub = board[sel]
        clear_unused_nibbles(sub)
        board[sel] = sub
    flags = ((none * FLAG_SCORE_NONE) | ((~none & (np.abs(ev) >= MATE_BOUND)) * FLAG_SCORE_MATE)
             | ((ply < 0) * FLAG_PLY_UNKNOWN)).astype(np.uint8)

    def rows(lo, hi):
        return PackedRows(board=board[lo:hi], score=score[lo:hi].astype(np.int16),
                          result=result[lo:hi].astype(np.int8), ply=np.maximum(ply[lo:hi], 0).astype(np.uint16),
                          piece_count=chk.piece_count[lo:hi], in_check=chk.in_check[lo:hi],
                          game=game[lo:hi], flags=flags[lo:hi], first=f"byte {offset + lo * SIZE}")

    def record(i):
        rec = recs[i].tobytes()
        e = int(ev[i])
        yield Record(fen=unpack_fen(rec), score=None if none[i] else e * int(sign[i]), result=int(result[i]),
                     ply=None if ply[i] < 0 else int(ply[i]), move=None, location=f"byte {offset + i * SIZE}",
                     game=int(game[i]), score_is_mate=bool(not none[i] and abs(e) >= MATE_BOUND))

    yield from emit_runs(offset, SIZE, ok, slow, rejects, rows, record)


def _read_slow(stream, options: ReaderOptions) -> Iterator[Record | Reject]:
    game, prev = -1, None
    for item in fixed_records(stream, SIZE):
        if isinstance(item, Reject):
            yield item
            continue
        offset, rec = item
        loc = f"byte {offset}"
        try:
            d = unpack(rec)
            fen = unpack_fen(rec)
        except ValueError as e:
            yield Reject(loc, "malformed record", str(e), rec.hex())
            continue
        if d["wdl"] > 2:
            yield Reject(loc, "result out of range", f"wdl byte {d['wdl']}", rec.hex())
            continue
        black = d["black_to_move"]
        sign = -1 if black else 1
        result = (d["wdl"] - 1) * sign
        ply = 2 * (d["fullmove"] - 1) + black if d["fullmove"] >= 1 else None
        if game_boundary(prev, ply, result):
            game += 1
        prev = (ply, result)
        ev = d["eval_white"]
        none = abs(ev) == VALUE_NONE
        yield Record(fen=fen, score=None if none else ev * sign, result=result, ply=ply, move=None,
                     location=loc, game=game, score_is_mate=not none and abs(ev) >= MATE_BOUND)


def sniff(head: bytes) -> bool:
    return False  # no magic: chosen by extension (.marlin) or --format


SPEC = FormatSpec("marlinformat", read, sniff, score_pov="white", result_pov="white (wdl 0/1/2)",
                  doc="marlinformat PackedBoard, 32-byte records", binary=True, record_size=SIZE)
