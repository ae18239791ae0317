"""Stockfish ``.plain`` reader: six-line records ``fen``/``move``/``score``/``ply``/``result``/``e``.

Score and result are side-to-move POV (FORMATS.md). ``score 32002`` (VALUE_NONE) means no
score. A new game starts whenever ply does not follow the previous record's ply by one or
the result does not flip sign, since ``.plain`` has no game separator.
"""
from __future__ import annotations

from typing import Iterator

from . import MATE_BOUND, VALUE_NONE, FormatSpec, ReaderOptions, Record, Reject

_KEYS = ("fen", "move", "score", "ply", "result")


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject]:
    """Yield one Record or Reject per ``e``-terminated block; location is the ``fen`` line."""
    fields: dict[str, str] = {}
    start = 0
    game = -1
    prev_ply = prev_result = None
    for lineno, line in enumerate(stream, 1):
        line = line.strip()
        if not line:
            continue
        if line == "e":
            loc = f"line {start or lineno}"
            raw = " | ".join(f"{k} {v}" for k, v in fields.items())
            missing = [k for k in _KEYS if k not in fields]
            cur, fields, start = fields, {}, 0
            if missing:
                yield Reject(loc, "missing field", f"missing: {', '.join(missing)}", raw)
                continue
            try:
                score = int(cur["score"])
                ply = int(cur["ply"])
                result = int(cur["result"])
            except ValueError:
                yield Reject(loc, "number not an integer", "score, ply or result is not an integer", raw)
                continue
            if result not in (-1, 0, 1):
                yield Reject(loc, "result out of range", f"result {result} not in -1/0/1", raw)
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
        if key not in _KEYS:
            loc = f"line {lineno}"
            yield Reject(loc, "malformed record", f"unexpected line {line[:60]!r}", line)
            fields, start = {}, 0
            continue
        if key == "fen":
            if fields:  # a record without its closing "e"
                yield Reject(f"line {start}", "malformed record", "record not terminated by 'e'",
                             " | ".join(f"{k} {v}" for k, v in fields.items()))
                fields = {}
            start = lineno
        elif not fields:
            start = lineno
        fields[key] = value.strip()
    if fields:
        yield Reject(f"line {start}", "truncated record", "record at end of file has no 'e'",
                     " | ".join(f"{k} {v}" for k, v in fields.items()))


def sniff(head: str) -> bool:
    return head.lstrip().startswith("fen ")


SPEC = FormatSpec("plain", read, sniff, score_pov="side to move", result_pov="side to move",
                  doc="Stockfish .plain: fen/move/score/ply/result/e")
