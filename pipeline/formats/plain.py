"""Stockfish ``.plain`` reader: six-line records ``fen``/``move``/``score``/``ply``/``result``/``e``.

Score and result are side-to-move POV (FORMATS.md). ``score 32002`` (VALUE_NONE) means no
score. A new game starts whenever ply does not follow the previous record's ply by one or
the result does not flip sign, since ``.plain`` has no game separator.

With ``options.fast`` (the default) runs of records are packed and validated in bulk, moves
included (:mod:`._bulk_text`); the rest go through python-chess, with identical results (tested).
"""
from __future__ import annotations

from typing import Iterator

from . import MATE_BOUND, VALUE_NONE, FormatError, FormatSpec, PackedRows, ReaderOptions, Record, Reject
from ._bulk_text import bulk

_KEYS = ("fen", "move", "score", "ply", "result")


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject | PackedRows]:
    """Yield one Record or Reject per ``e``-terminated block (fast: runs of them as PackedRows);
    location is the block's first line.

    Raises FormatError when the first non-empty line is not a ``.plain`` key (wrong format).
    """
    records = _read(stream)
    return bulk(records) if options.fast else records


def _read(stream) -> Iterator[Record | Reject]:
    fields: dict[str, str] = {}
    bad: str | None = None  # first problem seen in the current block
    start = 0
    game = -1
    prev_ply = prev_result = None
    seen_any = False

    def raw() -> str:
        return " | ".join(f"{k} {v}" for k, v in fields.items())

    for lineno, line in enumerate(stream, 1):
        line = line.strip()
        if not line:
            continue
        if line == "e":
            loc = f"line {start or lineno}"
            missing = [k for k in _KEYS if k not in fields]
            cur, cur_bad, text = fields, bad, raw()
            fields, bad, start = {}, None, 0
            if cur_bad:
                yield Reject(loc, "malformed record", cur_bad, text)
                continue
            if missing:
                yield Reject(loc, "missing field", f"missing: {', '.join(missing)}", text)
                continue
            try:
                score = int(cur["score"])
                ply = int(cur["ply"])
                result = int(cur["result"])
            except ValueError:
                yield Reject(loc, "number not an integer", "score, ply or result is not an integer", text)
                continue
            if result not in (-1, 0, 1):
                yield Reject(loc, "result out of range", f"result {result} not in -1/0/1", text)
                continue
            if not (prev_ply is not None and ply == prev_ply + 1 and result == -prev_result):
                game += 1
            prev_ply, prev_result = ply, result
            none = score == VALUE_NONE
            yield Record(
                fen=cur["fen"], score=None if none else score, result=result, ply=ply,
                move=cur["move"], location=loc, game=game,
                score_is_mate=not none and abs(score) >= MATE_BOUND,
            )
            continue
        key, _, value = line.partition(" ")
        if not seen_any and key not in _KEYS:
            raise FormatError(f"line {lineno}: expected a Stockfish .plain key (fen, move, score, ply, "
                              f"result or e), found {line[:40]!r}")
        seen_any = True
        if key == "fen" and fields:  # a record without its closing "e"
            yield Reject(f"line {start}", "malformed record", "record not terminated by 'e'", raw())
            fields, bad = {}, None
        if not fields and bad is None:
            start = lineno
        if key not in _KEYS:
            bad = bad or f"line {lineno}: unexpected line {line[:60]!r}"
            continue
        if key in fields:
            bad = bad or f"line {lineno}: repeated key {key!r}"
        fields[key] = value.strip()
    if fields or bad:
        yield Reject(f"line {start}", "truncated record", "record at end of file has no 'e'", raw())


def sniff(head: str) -> bool:
    return head.lstrip().startswith("fen ")


SPEC = FormatSpec("plain", read, sniff, score_pov="side to move", result_pov="side to move",
                  doc="Stockfish .plain: fen/move/score/ply/result/e")
