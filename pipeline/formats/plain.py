"""Stockfish ``.plain`` reader: six-line records ``fen``/``move``/``score``/``ply``/``result``/``e``.

Score and result are side-to-move POV (FORMATS.md). ``score 32002`` (VALUE_NONE) means no
score. A new game starts whenever ply does not follow the previous record's ply by one or
the result does not flip sign, since ``.plain`` has no game separator.

With ``options.fast`` (the default) the bytes are tokenized, parsed and validated by the compiled
text core (:mod:`nnue.pipeline.compiled.text`); records it cannot settle exactly go through this
module's line machine and python-chess, with identical results (tested).
"""
from __future__ import annotations

from typing import Iterator

from ..records import MATE_BOUND, VALUE_NONE, FormatError, FormatSpec, PackedRows, ReaderOptions, Record, Reject
from ._boundaries import text_finder
from ._write import board_of, compiled_dump, move_uci, text_block

_KEYS = ("fen", "move", "score", "ply", "result")


def _compiled():
    """The numba fast path (:mod:`nnue.pipeline.compiled.text`), imported when first used: importing
    it loads numba (0.3 CPU s), which the CLI's parser, importing this registry, must not."""
    from ..compiled import text

    return text


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject | PackedRows]:
    """Yield one Record or Reject per ``e``-terminated block (fast: runs of them as PackedRows);
    location is the block's first line.

    Raises FormatError when the first non-empty line is not a ``.plain`` key (wrong format).
    """
    if options.fast and hasattr(stream, "buffer"):
        return _compiled().read_text(stream, "plain", Machine())
    return _read(stream)


class Machine:
    """The reader's state, fed one line at a time (shared by the one-by-one path and the
    compiled path's hand-backs). ``idle``: between records (the compiled core may take over)."""

    def __init__(self):
        self.fields: dict[str, str] = {}
        self.bad: str | None = None  # first problem seen in the current block
        self.start = 0
        self.game = -1
        self.prev_ply = self.prev_result = None
        self.seen_any = False

    @property
    def idle(self) -> bool:
        return not self.fields and self.bad is None

    def _raw(self) -> str:
        return " | ".join(f"{k} {v}" for k, v in self.fields.items())

    def feed(self, lineno: int, line: str) -> list:
        line = line.strip()
        if not line:
            return []
        if line == "e":
            loc = f"line {self.start or lineno}"
            missing = [k for k in _KEYS if k not in self.fields]
            cur, cur_bad, text = self.fields, self.bad, self._raw()
            self.fields, self.bad, self.start = {}, None, 0
            if cur_bad:
                return [Reject(loc, "malformed record", cur_bad, text)]
            if missing:
                return [Reject(loc, "missing field", f"missing: {', '.join(missing)}", text)]
            try:
                score = int(cur["score"])
                ply = int(cur["ply"])
                result = int(cur["result"])
            except ValueError:
                return [Reject(loc, "number not an integer", "score, ply or result is not an integer", text)]
            if result not in (-1, 0, 1):
                return [Reject(loc, "result out of range", f"result {result} not in -1/0/1", text)]
            if not (self.prev_ply is not None and ply == self.prev_ply + 1 and result == -self.prev_result):
                self.game += 1
            self.prev_ply, self.prev_result = ply, result
            none = score == VALUE_NONE
            return [Record(
                fen=cur["fen"], score=None if none else score, result=result, ply=ply,
                move=cur["move"], location=loc, game=self.game,
                score_is_mate=not none and abs(score) >= MATE_BOUND,
            )]
        out = []
        key, _, value = line.partition(" ")
        if not self.seen_any and key not in _KEYS:
            raise FormatError(f"line {lineno}: expected a Stockfish .plain key (fen, move, score, ply, "
                              f"result or e), found {line[:40]!r}")
        self.seen_any = True
        if key == "fen" and self.fields:  # a record without its closing "e"
            out.append(Reject(f"line {self.start}", "malformed record", "record not terminated by 'e'", self._raw()))
            self.fields, self.bad = {}, None
        if not self.fields and self.bad is None:
            self.start = lineno
        if key not in _KEYS:
            self.bad = self.bad or f"line {lineno}: unexpected line {line[:60]!r}"
            return out
        if key in self.fields:
            self.bad = self.bad or f"line {lineno}: repeated key {key!r}"
        self.fields[key] = value.strip()
        return out

    def finish(self) -> list:
        if self.fields or self.bad:
            return [Reject(f"line {self.start}", "truncated record", "record at end of file has no 'e'", self._raw())]
        return []

    # the compiled core's copy of the state between records: game, prev known, prev ply, prev result, seen
    def state(self) -> list:
        known = self.prev_ply is not None
        return [self.game, int(known), self.prev_ply if known else 0, self.prev_result if known else 0,
                int(self.seen_any)]

    def set_state(self, st) -> None:
        self.game = int(st[0])
        self.prev_ply, self.prev_result = (int(st[2]), int(st[3])) if st[1] else (None, None)
        self.seen_any = bool(st[4])


def _read(stream) -> Iterator[Record | Reject]:
    m = Machine()
    for lineno, line in enumerate(stream, 1):
        yield from m.feed(lineno, line)
    yield from m.finish()


def sniff(head: str) -> bool:
    return head.lstrip().startswith("fen ")


def write(r: dict) -> bytes:
    """One dataset row as a ``.plain`` record: ``fen``/``move``/``score``/``ply``/``result``/``e``;
    no score is VALUE_NONE (32002), no recorded move ``move 0000``; castling e1g1-style in standard
    chess and king-takes-rook in Chess960, as Stockfish writes it, and king-takes-rook wherever the
    input spelled it so (``castling``), so that a Chess960 ``.plain`` round trips to the same text."""
    b = board_of(r["board"])
    score = VALUE_NONE if r["score_none"] else r["score"]
    return (f"fen {b.fen()}\nmove {move_uci(b, r['best_move'], r.get('castling'))}\nscore {score}\n"
            f"ply {r['ply']}\nresult {r['result']}\ne\n").encode()


def write_block(c):
    """A row group (:class:`nnue.pipeline.convert.Columns`) through the compiled writer
    (:func:`nnue.pipeline.compiled.dump.write_plain`): (out, ends, fallback)."""
    out, ends, fallback = text_block(c.n)
    compiled_dump().write_plain(c.boards, c.score, c.result, c.ply, c.best, c.none, c.king_takes_rook,
                                out, ends, fallback)
    return out, ends, fallback


SPEC = FormatSpec("plain", read, sniff, score_pov="side to move", result_pov="side to move",
                  doc="Stockfish .plain: fen/move/score/ply/result/e", extensions=(".plain",),
                  find_ranges=text_finder(read, after_e=True), detail_offsets=r"^(line) (\d+)",
                  compiled=_compiled, write=write, write_block=write_block)
