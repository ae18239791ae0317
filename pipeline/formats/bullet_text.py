"""bullet text reader: ``<FEN> | <score> | <result>`` per line.

Score: integer centipawns, **white** POV. Result: 1.0/0.5/0.0 (also 1, 1/2, 0, [1.0]), white
POV (FORMATS.md). Both are turned to side-to-move POV here. Ply comes from the FEN's fullmove
counter (``2·(fullmove−1) + (black to move)``) and is unknown when the FEN has no counters.
A new game starts when ply does not follow the previous line's or the result changes.

With ``options.fast`` (the default) lines are packed in batches: :func:`nnue.pipeline.fastfen.
pack_fens` packs the FENs in the plain self-play shape and :func:`nnue.pipeline.fastcheck.
check_boards` validates them, and the records both accept come as PackedRows; every other line
(X-FEN or Shredder-FEN castling, en-passant squares, anything the bulk checks cannot settle or
would reject) comes as a Record for the python-chess path, so the packed rows and the reject
reasons are those of ``fast=False`` (tested on every self-play sample).
"""
from __future__ import annotations

import math
from typing import Iterator

from . import (MATE_BOUND, VALUE_NONE, FormatError, FormatSpec, PackedRows, ReaderOptions, Record, Reject,
               parse_result_token)

BATCH = 8192  # lines packed together on the fast path


def _parse(stream) -> Iterator[Reject | tuple]:
    """Per non-empty line: a Reject, or (loc, fen, score_white, result_white, ply, game, black)
    with score_white an int (VALUE_NONE when none), result_white in {−1, 0, 1}, ply int or None
    and game the ordinal of the game. Raises FormatError when the first non-empty line is not
    bullet text."""
    game = -1
    prev_ply = prev_white_result = None
    seen_any = False
    for lineno, line in enumerate(stream, 1):
        line = line.strip()
        if not line:
            continue
        loc = f"line {lineno}"
        parts = [p.strip() for p in line.split("|")]
        if not seen_any and (len(parts) != 3 or "/" not in parts[0]):
            raise FormatError(f"line {lineno}: expected bullet text 'FEN | score | result', "
                              f"found {line[:40]!r}")
        seen_any = True
        if len(parts) != 3:
            yield Reject(loc, "malformed record", f"expected 'FEN | score | result', found {len(parts)} field(s)", line)
            continue
        fen, score_s, result_s = parts
        fen_fields = fen.split()
        if len(fen_fields) < 4:
            yield Reject(loc, "bad FEN", "FEN has fewer than 4 fields", line)
            continue
        black = fen_fields[1] == "b"
        try:
            score_f = float(score_s)
        except ValueError:
            yield Reject(loc, "score not a finite integer", f"score {score_s!r} is not a number", line)
            continue
        if not math.isfinite(score_f) or score_f != int(score_f):
            yield Reject(loc, "score not a finite integer", f"score {score_s!r}", line)
            continue
        white_result = parse_result_token(result_s)
        if white_result is None:
            yield Reject(loc, "result out of range", f"result {result_s!r} is not 1.0/0.5/0.0", line)
            continue
        ply = None
        if len(fen_fields) >= 6:
            try:
                ply = 2 * (int(fen_fields[5]) - 1) + black
            except ValueError:
                yield Reject(loc, "bad FEN", "fullmove counter is not an integer", line)
                continue
        if not (ply is not None and prev_ply is not None and ply == prev_ply + 1
                and white_result == prev_white_result):
            game += 1
        prev_ply, prev_white_result = ply, white_result
        yield loc, fen, int(score_f), int(round(2 * white_result - 1)), ply, game, black


def _record(t: tuple) -> Record:
    loc, fen, score_w, result_w, ply, game, black = t
    sign = -1 if black else 1
    none = abs(score_w) == VALUE_NONE
    return Record(fen=fen, score=None if none else score_w * sign, result=result_w * sign, ply=ply,
                  move=None, location=loc, game=game, score_is_mate=not none and abs(score_w) >= MATE_BOUND)


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject | PackedRows]:
    """One Record or Reject per non-empty line, or (fast) PackedRows for runs of lines packed in
    bulk. Raises FormatError when the first non-empty line is not bullet text (wrong format)."""
    if not options.fast:
        for item in _parse(stream):
            yield item if isinstance(item, Reject) else _record(item)
        return
    pending: list = []
    count = 0
    for item in _parse(stream):
        pending.append(item)
        count += not isinstance(item, Reject)
        if count >= BATCH:
            yield from _fast_batch(pending)
            pending, count = [], 0
    yield from _fast_batch(pending)


def _fast_batch(items: list) -> Iterator[Record | Reject | PackedRows]:
    import numpy as np

    from ..fastcheck import check_boards
    from ..fastfen import pack_fens
    from ..schema import FLAG_PLY_UNKNOWN, FLAG_SCORE_MATE, FLAG_SCORE_NONE

    cands = [t for t in items if not isinstance(t, Reject)]
    if not cands:
        yield from items
        return
    score_w = np.array([t[2] for t in cands], dtype=np.int64)
    result_w = np.array([t[3] for t in cands], dtype=np.int64)
    black = np.array([t[6] for t in cands], dtype=bool)
    none = np.abs(score_w) == VALUE_NONE
    in_range = none | (np.abs(score_w) <= 32767)
    eval_w = np.where(none | ~in_range, 0, score_w)
    boards, packed = pack_fens([t[1] for t in cands], eval_w, result_w + 1)
    chk = check_boards(boards)
    ok = packed & in_range & (chk.reason == 0) & ~chk.slow
    sign = np.where(black, -1, 1)
    score = np.where(none, 0, score_w * sign).astype(np.int16, copy=False) if ok.any() else None
    plies = [t[4] for t in cands]
    ply = np.array([p or 0 for p in plies], dtype=np.uint16)
    unknown = np.array([p is None for p in plies], dtype=bool)
    flags = ((none * FLAG_SCORE_NONE) | ((~none & (np.abs(score_w) >= MATE_BOUND)) * FLAG_SCORE_MATE)
             | (unknown * FLAG_PLY_UNKNOWN)).astype(np.uint8)
    game = np.array([t[5] for t in cands], dtype=np.int64)
    result = (result_w * sign).astype(np.int8)

    def rows(lo: int, hi: int) -> PackedRows:
        return PackedRows(board=boards[lo:hi], score=score[lo:hi], result=result[lo:hi], ply=ply[lo:hi],
                          piece_count=chk.piece_count[lo:hi], in_check=chk.in_check[lo:hi], game=game[lo:hi],
                          flags=flags[lo:hi], first=cands[lo][0], locations=[t[0] for t in cands[lo:hi]])

    k = 0          # index of the next candidate
    run = None     # first candidate of the current run of bulk-packed lines
    for item in items:
        if not isinstance(item, Reject) and ok[k]:
            if run is None:
                run = k
            k += 1
            continue
        if run is not None:
            yield rows(run, k)
            run = None
        if isinstance(item, Reject):
            yield item
        else:
            yield _record(item)
            k += 1
    if run is not None:
        yield rows(run, k)


def sniff(head: str) -> bool:
    first = head.lstrip().split("\n", 1)[0]
    return first.count("|") == 2 and "/" in first.split("|")[0]


SPEC = FormatSpec("bullet-text", read, sniff, score_pov="white", result_pov="white",
                  doc="bullet text: FEN | score | result")
