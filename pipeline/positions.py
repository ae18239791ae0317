"""One position a line, as a user types it: a FEN, an EPD line or ``FEN | score | result``,
checked as ``nnue pack`` checks its records (``nnue eval --fens``/``--fen``).

:func:`parse_position` takes the FEN part of a line and refuses anything else on the line
(trailing text is junk, not ignored): EPD opcodes (``c9 "1-0"; hmvc 3; fmvn 7;`` — every opcode
closed by ``;``, counters taken from ``hmvc``/``fmvn``) or Ethereal's ``[1.0] eval``, and
bullet text's `` | score | result`` (score an integer, result one of bullet's spellings). The
position then goes through :func:`nnue.pipeline.chessrules.validate`, the same python-chess
validation every packed record passes (one king a side, no pawn on the back ranks, the side not
to move not in check, castling rights that match, possible checks), so eval refuses exactly
the positions pack rejects (tested).
"""
from __future__ import annotations

import re

from .records import Record, parse_result_token

_OPCODES = re.compile(r'^(?:\s*[A-Za-z]\w*(?:\s+(?:"[^"]*"|[^;"]*?))?\s*;)*\s*$')
_OPCODE = re.compile(r'([A-Za-z]\w*)(?:\s+("[^"]*"|[^;"]*?))?\s*;')
_ETHEREAL = re.compile(r"^\[[^\]]*\]\s*(-?\d+)?$")


class PositionError(ValueError):
    """A line that is not one position pack would accept; the message gives the reason."""


def parse_position(line: str) -> str:
    """The FEN (six fields) of one line, checked as pack checks records.

    Raises PositionError with the reason: the line's shape (``trailing text after the FEN``,
    ``expected 'FEN | score | result'``...) or pack's reject reason and detail
    (``side not to move is in check: <FEN>``).
    """
    text = line.strip()
    if "|" in text:
        parts = [p.strip() for p in text.split("|")]
        if len(parts) != 3:
            raise PositionError(f"expected 'FEN | score | result', found {len(parts)} field(s)")
        text, score, result = parts
        if not re.fullmatch(r"[+-]?\d+", score):
            raise PositionError(f"score {score!r} is not an integer ('FEN | score | result')")
        if parse_result_token(result) is None:
            raise PositionError(f"result {result!r} is not a game result ('FEN | score | result')")
    fields = text.split()
    if len(fields) < 4 or fields[0].count("/") != 7:
        raise PositionError(f"bad FEN: expected at least 4 FEN fields, found {text[:60]!r}")
    half, full = "0", "1"
    n = 4
    if len(fields) >= 6 and fields[4].isdigit() and fields[5].isdigit():
        half, full, n = fields[4], fields[5], 6
    rest = " ".join(fields[n:])
    if rest:
        if "|" not in line and _OPCODES.match(rest):
            ops = {k: (v or "").strip().strip('"') for k, v in _OPCODE.findall(rest)}
            half, full = ops.get("hmvc", half), ops.get("fmvn", full)
        elif "|" not in line and _ETHEREAL.match(rest):
            pass
        else:
            raise PositionError(f"trailing text after the FEN: {rest[:60]!r} (a FEN, an EPD line with "
                                f"';'-terminated opcodes, or 'FEN | score | result')")
    fen = " ".join(fields[:4] + [half, full])
    from .chessrules import RecordError, validate  # python-chess: imported only when a line is checked

    try:
        validate(Record(fen=fen, score=None, result=0, ply=None, move=None, location="", game=0))
    except RecordError as e:
        raise PositionError(str(e)) from None
    return fen
