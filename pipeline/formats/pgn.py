"""Engine-match PGN reader: one record per position before each mainline move.

Scores come from move comments (FORMATS.md):

* cutechess-cli / fastchess ``{+0.35/12 0.500s}``: pawns, POV given by ``ReaderOptions.pgn_pov``
  ("mover", the default, as cutechess writes; "white" for files written by python-chess);
  ``+M16``/``-M16`` are mates, the number counting plies (the selfplay PGNs and their
  ``.plain`` twins agree on ±(32000 − 16)); ``{book}`` and moves without a comment carry no score.
* lichess ``[%eval 0.20]`` / ``[%eval #-3]``: always white POV, and the eval of the position
  *after* the move it follows (so it scores the next record). The grammar is python-chess's
  (``[%eval 0.20,15]``: an optional comma-separated depth, as python-chess writes it).
* a comment that looks like an eval of either kind but does not parse is not "no score": the
  position it scores is rejected as ``eval comment not understood``, so it is counted.

A cutechess comment after a move is the eval of the position *before* that move. The result is the
game's ``Result`` tag; a game with ``*`` yields its positions as rejects. A move python-chess
cannot play ends the game's mainline: that is reported as one reject naming the move.
"""
from __future__ import annotations

import logging
import re
from typing import Iterator

import chess
import chess.pgn

from . import MATE, FormatError, FormatSpec, ReaderOptions, Record, Reject

_CUTECHESS = re.compile(r"^\s*([+-]?)(M?)(\d+(?:\.\d+)?)/\d+")
# a comment that starts like a cutechess/fastchess eval: a sign, a mate mark or a decimal point
_CUTECHESS_LIKE = re.compile(r"^\s*(?:[+-]?M[\d/]|[+-]\d|[+-]?\d*\.\d)")
# the %eval grammar of python-chess's reader (chess.pgn.EVAL_REGEX, python-chess 1.11): one
# space, then #mate or centipawn pawns with at most two decimals, then an optional ",depth"
_LICHESS = re.compile(r"\[%eval\s(?:#([+-]?\d+)|([+-]?(?:\d{0,10}\.\d{1,2}|\d{1,10}\.?)))(?:,\d+)?\]")
BAD_EVAL = "eval comment not understood"  # reject reason: looks like an eval, does not parse


def _bad_lichess(comment: str) -> str | None:
    """The ``[%eval ...`` text of a comment when python-chess's grammar does not parse it, else None."""
    if "%eval" in comment and not _LICHESS.search(comment):
        i = comment.index("%eval")
        return comment[max(0, i - 1):i + 40].split("]")[0] + "]"
    return None


def _bad_cutechess(comment: str) -> str | None:
    """The comment when it starts like a cutechess/fastchess eval but does not parse, else None."""
    if _CUTECHESS_LIKE.match(comment) and not _CUTECHESS.match(comment):
        return comment.strip()[:60]
    return None
_RESULTS = {"1-0": 1, "0-1": -1, "1/2-1/2": 0}


class _LineCounter:
    """Wrap a text stream so that python-chess's readline calls are counted."""

    def __init__(self, stream):
        self.stream = stream
        self.line = 0

    def readline(self):
        s = self.stream.readline()
        if s:
            self.line += 1
        return s


def _mate_cp(plies: int, positive: bool) -> int:
    """Mate score as ±(32000 − plies), Stockfish's convention."""
    return MATE - plies if positive else -(MATE - plies)


def parse_cutechess(comment: str, white_to_move: bool, pov: str) -> tuple[int | None, bool]:
    """cutechess/fastchess comment ``{+0.35/12 0.5s}`` of the position *before* the move.

    Returns (centipawns, side-to-move POV, or None; is_mate). ``pov``: "mover" or "white".
    """
    m = _CUTECHESS.match(comment)
    if not m:
        return None, False
    sign = -1 if m.group(1) == "-" else 1
    if m.group(2):
        score = _mate_cp(int(float(m.group(3))), sign > 0)
    else:
        score = sign * round(float(m.group(3)) * 100)
    if pov == "white" and not white_to_move:
        score = -score
    return score, bool(m.group(2))


def parse_lichess(comment: str, white_to_move: bool) -> tuple[int | None, bool]:
    """lichess ``[%eval 0.20]`` / ``[%eval #-3]`` (white POV) of the position *after* the move.

    white_to_move: side to move in that position. ``#n`` counts moves: the mating side needs
    2n−1 plies when it is to move, 2n otherwise. Returns (centipawns stm POV or None, is_mate).
    """
    m = _LICHESS.search(comment)
    if not m:
        return None, False
    if m.group(1) is not None:
        num = int(m.group(1))
        if num == 0:  # "#0": the side to move is mated (python-chess's reading)
            return -MATE, True
        white_mates = num > 0
        n = abs(num)
        plies = 2 * n - 1 if white_mates == white_to_move else 2 * n
        white_pov = _mate_cp(plies, white_mates)
    else:
        white_pov = round(float(m.group(2)) * 100)
    return (white_pov if white_to_move else -white_pov), True if m.group(1) is not None else False


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject]:
    """One Record per mainline position. Raises FormatError when the first game has neither
    tags nor a playable move (the file is not PGN)."""
    logging.getLogger("chess.pgn").setLevel(logging.CRITICAL)  # errors are rejects, not log lines
    counter = _LineCounter(stream)
    game_no = -1
    while True:
        start = counter.line + 1
        try:
            game = chess.pgn.read_game(counter)
        except (ValueError, IndexError) as e:
            yield Reject(f"line {start}", "unreadable PGN game", str(e))
            continue
        if game is None:
            return
        game_no += 1
        if game_no == 0 and game.errors and not game.variations and not _has_tags(game):
            raise FormatError(f"line {start}: expected PGN tags or moves, found unreadable text "
                              f"({game.errors[0]})")
        result = _RESULTS.get(game.headers.get("Result", "*"))
        try:
            board = game.board()
        except ValueError as e:
            yield Reject(f"line {start}", "bad FEN", f"FEN header: {e}", game.headers.get("FEN", ""))
            continue
        after = (None, False)  # a lichess eval on the previous move: this position's score
        after_bad = None       # ... or the text of one that does not parse
        for node in game.mainline():
            move = node.move
            loc = f"line {start} game {game_no} ply {board.ply()}"
            white = board.turn == chess.WHITE
            score, mate = parse_cutechess(node.comment, white, options.pgn_pov)
            bad = _bad_cutechess(node.comment)       # a cutechess-like eval of this position
            if score is None:
                score, mate = after                  # the previous move's %eval scores this one
                bad = bad or after_bad
            after = parse_lichess(node.comment, not white)
            after_bad = _bad_lichess(node.comment)   # a %eval-like note of the next position
            fen = board.fen()
            if result is None:
                yield Reject(loc, "unknown game result", "Result tag is '*'", fen)
            elif bad:
                yield Reject(loc, BAD_EVAL, f"comment {bad!r}", fen)
            else:
                yield Record(
                    fen=fen, score=score, result=result if white else -result,
                    ply=board.ply(), move=move.uci(), location=loc, game=game_no,
                    score_is_mate=mate, board=board.copy(stack=False),
                )
            board.push(move)
        for err in game.errors:
            yield Reject(f"line {start} game {game_no}", "PGN error, rest of game dropped", str(err))


def _has_tags(game) -> bool:
    """Does a parsed game carry any tag other than the seven-tag roster's defaults?"""
    defaults = {"Event": "?", "Site": "?", "Date": "????.??.??", "Round": "?", "White": "?",
                "Black": "?", "Result": "*"}
    return any(defaults.get(k) != v for k, v in game.headers.items())


def sniff(head: str) -> bool:
    return head.lstrip().startswith("[")


SPEC = FormatSpec("pgn", read, sniff, score_pov="mover (cutechess) or white (--pgn-pov white)",
                  result_pov="white (Result tag)", doc="PGN with eval comments")
