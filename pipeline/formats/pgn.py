"""Engine-match PGN reader: one record per position before each mainline move.

Scores come from move comments (FORMATS.md). Engine-runner comments ``{score/depth ...}`` come in
two dialects, told apart by how the score is written (``parse_engine_eval``):

* cutechess-cli / fastchess ``{+0.35/12 0.500s}``: pawns with a decimal point; ``+M16``/``-M16``
  are mates, the number counting plies (the selfplay PGNs and their ``.plain`` twins agree on
  ±(32000 − 16));
* c-chess-cli ``{38/21}``, ``{-24/20 15ms}``: integer centipawns (no ``+`` sign, no decimal point);
  ``M2``/``-M2``: mate in 2 *moves* (the mover mates in 3 plies, or is mated in 4).

Both are the mover's POV (``ReaderOptions.pgn_pov`` "mover", the default; "white" for files
written white-POV, like our self-play PGNs). ``-M<n>`` is written by both runners: it takes the
dialect its time unit names (seconds ``0.5s``: cutechess/fastchess; ``15ms``: c-chess-cli), else
that of the game's earlier evals; with none (or both), and for an integer with a
``+`` sign (``{+38/21}``: neither runner writes it), the position is rejected as ``ambiguous eval
comment`` with the reason, never scaled by a guess. ``{book}`` and moves without a comment carry
no score.

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

import io
import logging
import re
from pathlib import Path
from typing import Iterator

import chess
import chess.pgn
import numpy as np

from ..records import (LATIN1_ERRORS, MATE, UTF8_BOM, FormatError, FormatSpec, PackedRows, ReaderOptions, Record,
                       Reject, read_exact)

# an engine runner's eval: sign, mate mark, integer part, fraction, "/depth", then a time whose unit
# names the runner: seconds "0.500s" (cutechess, fastchess) or milliseconds "15ms" (c-chess-cli)
_ENGINE = re.compile(r"^\s*([+-]?)(M?)(\d+)(\.\d+)?/\d+(?:\s+\d+(?:\.\d+)?(ms|s))?")
# a comment that starts like an engine runner's eval: a sign, a mate mark or a decimal point
_CUTECHESS_LIKE = re.compile(r"^\s*(?:[+-]?M[\d/]|[+-]\d|[+-]?\d*\.\d)")
# the %eval grammar of python-chess's reader (chess.pgn.EVAL_REGEX, python-chess 1.11): one
# space, then #mate or centipawn pawns with at most two decimals, then an optional ",depth"
_LICHESS = re.compile(r"\[%eval\s(?:#([+-]?\d+)|([+-]?(?:\d{0,10}\.\d{1,2}|\d{1,10}\.?)))(?:,\d+)?\]")
BAD_EVAL = "eval comment not understood"  # reject reason: looks like an eval, does not parse
AMBIGUOUS_EVAL = "ambiguous eval comment"  # reject reason: parses in two dialects that read it differently
# the dialects of engine-runner comments seen so far in a game (bits)
PAWNS, CENTIPAWNS = 1, 2  # cutechess/fastchess (pawns, +M plies); c-chess-cli (centipawns, M moves)


LONG_NUMBER = 300  # digits: an eval number this long is not an eval (a float of it overflows at ~309)


def _too_long(number: str | None) -> bool:
    return number is not None and len(number) - number.count(".") - number.startswith(("+", "-")) >= LONG_NUMBER


def _bad_lichess(comment: str) -> str | None:
    """The ``[%eval ...`` text of a comment when python-chess's grammar does not parse it or its
    mate count has LONG_NUMBER digits or more, else None."""
    m = _LICHESS.search(comment) if "%eval" in comment else None
    if "%eval" in comment and (m is None or _too_long(m.group(1))):
        i = comment.index("%eval")
        return comment[max(0, i - 1):i + 40].split("]")[0] + "]"
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


def parse_engine_eval(comment: str, white_to_move: bool, pov: str, dialect: int = 0):
    """An engine runner's comment of the position *before* the move: cutechess/fastchess
    ``{+0.35/12 0.5s}`` (pawns; ``±M<n>`` mate in n plies) or c-chess-cli ``{38/21}`` (centipawns;
    ``M<n>``/``-M<n>`` mate in n moves). ``pov``: "mover" or "white". ``dialect``: the bits
    (PAWNS, CENTIPAWNS) of the game's earlier comments; ``-M<n>`` is read in that dialect.

    Returns (centipawns side-to-move POV or None, is_mate, dialect with this comment's,
    problem): problem None, or (reject reason, detail) for a comment that looks like an eval but
    does not parse (BAD_EVAL) or reads differently in the two dialects (AMBIGUOUS_EVAL)."""
    m = _ENGINE.match(comment)
    text = comment.strip()[:60]
    if m is None:
        return None, False, dialect, ((BAD_EVAL, f"comment {text!r}") if _CUTECHESS_LIKE.match(comment) else None)
    sign, is_mate, whole, frac, unit = m.groups()
    own = {"s": PAWNS, "ms": CENTIPAWNS}.get(unit, 0)  # the runner this comment's time unit names
    if _too_long(whole + (frac or "")) or is_mate and frac:
        return None, False, dialect, (BAD_EVAL, f"comment {text!r}")
    neg = sign == "-"
    if is_mate:
        n = int(whole)
        if sign == "+":
            plies, dialect = n, dialect | PAWNS
        elif not neg:
            plies, dialect = max(0, 2 * n - 1), dialect | CENTIPAWNS
        elif (own or dialect) in (PAWNS, CENTIPAWNS):
            plies = n if (own or dialect) == PAWNS else 2 * n
        else:
            why = "and this game's earlier evals say both" if dialect else "and no earlier eval of this game says which"
            return None, False, dialect, (AMBIGUOUS_EVAL, f"comment {text!r}: a mate count in plies (cutechess, "
                                                          f"fastchess) or in moves (c-chess-cli), {why}")
        score = _mate_cp(plies, not neg)
    elif frac:
        score, dialect = round(float(whole + frac) * 100), dialect | PAWNS
        score = -score if neg else score
    elif sign == "+":
        return None, False, dialect, (AMBIGUOUS_EVAL, f"comment {text!r}: an integer with a '+' sign is neither "
                                                      f"cutechess/fastchess pawns (written with decimals) nor "
                                                      f"c-chess-cli centipawns (written without '+')")
    else:
        score, dialect = (-int(whole) if neg else int(whole)), dialect | CENTIPAWNS
    if pov == "white" and not white_to_move:
        score = -score
    return score, bool(is_mate), dialect | own, None


def parse_lichess(comment: str, white_to_move: bool) -> tuple[int | None, bool]:
    """lichess ``[%eval 0.20]`` / ``[%eval #-3]`` (white POV) of the position *after* the move.

    white_to_move: side to move in that position. ``#n`` counts moves: the mating side needs
    2n−1 plies when it is to move, 2n otherwise. Returns (centipawns stm POV or None, is_mate).
    """
    m = _LICHESS.search(comment)
    if not m or _too_long(m.group(1)):  # _bad_lichess rejects it
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


def read(stream, options: ReaderOptions) -> Iterator[Record | Reject | PackedRows]:
    """One Record per mainline position. Raises FormatError when the first game has neither
    tags nor a playable move (the file is not PGN).

    With ``options.fast`` (the default) the compiled reader (:mod:`nnue.pipeline.compiled.pgn`)
    tokenizes, plays and validates whole games and yields runs of positions as PackedRows; the
    games it does not settle exactly are read here by python-chess, as on the reference path
    (``fast=False``), with the same locations, game ordinals and rejects."""
    logging.getLogger("chess.pgn").setLevel(logging.CRITICAL)  # errors are rejects, not log lines
    if options.fast:
        src = _Source.of(stream)
        if src is not None:
            yield from _read_compiled(src, options)
            return
    counter = _LineCounter(stream)
    game_no = options.first_game - 1
    while True:
        game_no, done = yield from _one_game(counter, options, game_no)
        if done:
            return


def _one_game(counter, options: ReaderOptions, game_no: int):
    """Read one game with python-chess from ``counter`` (a readline source with a ``line``
    count) and yield its items; return (last game ordinal, end of file reached)."""
    start = counter.line + 1
    try:
        game = chess.pgn.read_game(counter)
    except Exception as e:  # noqa: BLE001 - it reads untrusted text (see below)
        # python-chess 1.11's read_game was seen to raise on malformed movetext, stopping mid-game
        # (the reader goes on from there): IndexError (a ")" after a move that does not parse),
        # ValueError (a NAG too long for int()), AssertionError ("begin_variation called, but root
        # node on top of stack": variations around moves that do not parse)
        yield Reject(f"line {start}", "unreadable PGN game", f"{type(e).__name__}: {e}")
        return game_no, False
    if game is None:
        return game_no, True
    game_no += 1
    if game_no == 0 and game.errors and not game.variations and not _has_tags(game):
        raise FormatError(f"line {start}: expected PGN tags or moves, found unreadable text "
                          f"({game.errors[0]})")
    result = _RESULTS.get(game.headers.get("Result", "*"))
    try:
        board = game.board()
    except ValueError as e:
        yield Reject(f"line {start}", "bad FEN", f"FEN header: {e}", game.headers.get("FEN", ""))
        return game_no, False
    after = (None, False)  # a lichess eval on the previous move: this position's score
    after_bad = None       # ... or the text of one that does not parse
    dialect = 0            # engine-runner dialects of this game's comments so far
    for node in game.mainline():
        move = node.move
        loc = f"line {start} game {game_no} ply {board.ply()}"
        white = board.turn == chess.WHITE
        score, mate, dialect, bad = parse_engine_eval(node.comment, white, options.pgn_pov, dialect)
        if score is None:
            score, mate = after                  # the previous move's %eval scores this one
            if bad is None and after_bad:
                bad = (BAD_EVAL, f"comment {after_bad!r}")
        after = parse_lichess(node.comment, not white)
        after_bad = _bad_lichess(node.comment)   # a %eval-like note of the next position
        fen = board.fen()
        if result is None:
            yield Reject(loc, "unknown game result", "Result tag is '*'", fen)
        elif bad:
            yield Reject(loc, bad[0], bad[1], fen)
        else:
            yield Record(
                fen=fen, score=score, result=result if white else -result,
                ply=board.ply(), move=move.uci(), location=loc, game=game_no,
                score_is_mate=mate, board=board.copy(stack=False),
            )
        board.push(move)
    for err in game.errors:
        yield Reject(f"line {start} game {game_no}", "PGN error, rest of game dropped", str(err))
    return game_no, False


# ------------------------------------------------------------------ compiled path
CHUNK = 1 << 22  # bytes read at a time
CAP = 1 << 16    # rows per run of PackedRows
_EOL = re.compile(rb"\r\n|\r|\n")


class _Source:
    """The bytes of a text input, read in chunks, with the readline() of the text stream that
    ``formats.open_text`` makes for PGN (UTF-8, bytes that are not UTF-8 read as Latin-1, universal newlines: ``\\n``,
    ``\\r\\n`` and ``\\r`` end a line, read as ``\\n``) and a count of the lines read (``line``),
    so that python-chess and the compiled reader take turns on one input."""

    def __init__(self, raw, data: bytes = b""):
        self.raw, self.data, self.pos, self.line = raw, data, 0, 0
        self.eof = raw is None

    @classmethod
    def of(cls, stream):
        """A source over ``stream``'s bytes (its binary buffer, from the start; one leading BOM
        dropped as utf-8-sig does: ``formats.open_text`` and the first byte range of a file; a
        later range is utf-8), or None when the compiled reader cannot read it exactly."""

        raw = getattr(stream, "buffer", None)
        if raw is not None and isinstance(stream, io.TextIOWrapper) and stream.encoding in ("utf-8-sig", "utf-8"):
            src = cls(raw)
            src.more()
            if stream.encoding == "utf-8-sig" and src.data.startswith(UTF8_BOM):
                src.pos = len(UTF8_BOM)
            return src
        if isinstance(stream, io.StringIO):  # tests: text with no CR (StringIO splits lines at LF only)
            text = stream.read()
            stream.seek(0)
            if "\r" in text:
                return None
            try:
                return cls(None, text.encode("utf-8"))
            except UnicodeEncodeError:
                return None
        return None

    def more(self) -> bool:
        """Append the next chunk (dropping what was read); False when the end was already reached."""
        if self.eof:
            return False
        chunk = read_exact(self.raw, CHUNK)
        self.eof = len(chunk) < CHUNK
        self.data = self.data[self.pos:] + chunk
        self.pos = 0
        return True

    def readline(self) -> str:
        while True:
            m = _EOL.search(self.data, self.pos)
            if m is not None and (m.end() < len(self.data) or m.group() != b"\r" or self.eof):
                s = self.data[self.pos:m.start()].decode("utf-8", LATIN1_ERRORS) + "\n"
                self.pos = m.end()
                self.line += 1
                return s
            if m is None and self.eof:
                if self.pos >= len(self.data):
                    return ""
                s = self.data[self.pos:].decode("utf-8", LATIN1_ERRORS)
                self.pos = len(self.data)
                self.line += 1
                return s
            self.more()


class _Locations:
    """Lazy "line L game G ply P" locations of a run of rows (no string per row until asked)."""

    def __init__(self, line, game, ply):
        self.line, self.game, self.ply = line, game, ply

    def __len__(self):
        return len(self.line)

    def __getitem__(self, i):
        return f"line {int(self.line[i])} game {int(self.game[i])} ply {int(self.ply[i])}"


_START: dict = {}


def _start_board(data: bytes, info, bb, pc, st) -> bool | None:
    """Fill bb/pc/st with the start board python-chess makes from a game's FEN/Variant tags
    (``Headers.board``); return its Chess960 mode, or None when python-chess reads the game
    (a variant other than standard/Chess960, a FEN it rejects, castling rights it does not keep,
    huge counters)."""
    cp = _compiled()
    fen = data[info[cp.I_FEN_A]:info[cp.I_FEN_B]].decode("ascii") if info[cp.I_FEN_A] >= 0 else None
    var = data[info[cp.I_VAR_A]:info[cp.I_VAR_B]].decode("ascii") if info[cp.I_VAR_A] >= 0 else None
    key = (fen, var)
    hit = _START.get(key)
    if hit is None:
        hit = _START[key] = _board_arrays(fen, var)
        if len(_START) > 4096:
            _START.clear()
    if hit[0] is None:
        return None
    bb[:], pc[:], st[:] = hit[1], hit[2], hit[3]
    return hit[0]


def _board_arrays(fen, var):
    headers = chess.pgn.Headers()
    if fen is not None:
        headers["FEN"] = fen
    if var is not None:
        headers["Variant"] = var
    try:
        if headers.variant() is not chess.Board:
            return (None,)
        board = headers.board()
    except ValueError:
        return (None,)
    if type(board) is not chess.Board or board.castling_rights != board.clean_castling_rights():
        return (None,)
    if not (0 <= board.halfmove_clock < 1 << 30 and 0 <= board.fullmove_number < 1 << 30):
        return (None,)
    bb = np.zeros(16, np.uint64)
    pc = np.full(64, -1, np.int8)
    for c, color in ((0, chess.WHITE), (1, chess.BLACK)):
        for t in range(6):
            m = board.pieces_mask(t + 1, color)
            bb[t + 8 * c] = m
            for sq in chess.scan_forward(m):
                pc[sq] = t + 8 * c
        bb[14 + c] = board.occupied_co[color]
    bb[6] = board.castling_rights
    st = np.array([0 if board.turn == chess.WHITE else 1, -1 if board.ep_square is None else board.ep_square,
                   board.halfmove_clock, board.fullmove_number], np.int64)
    return bool(board.chess960), bb, pc, st


def _compiled():
    """The numba game reader (:mod:`nnue.pipeline.compiled.pgn`), imported when first used: importing
    it loads numba (0.3 CPU s), which the CLI's parser, importing this registry, must not."""
    from ..compiled import pgn

    return pgn


def _read_compiled(src: _Source, options: ReaderOptions):
    cp = _compiled()
    b = cp.buffers(CAP)
    outs = [b[k] for k in cp.OUT]
    info = np.zeros(16, np.int64)
    t_cur = np.zeros(cp.SCRATCH, np.uint8)
    bb0, pc0, st0 = np.zeros(16, np.uint64), np.full(64, -1, np.int8), np.zeros(4, np.int64)
    have, c960, game, rows = False, False, options.first_game - 1, 0
    pov_white = options.pgn_pov == "white"
    while True:
        data = np.frombuffer(src.data, np.uint8)
        cp.scan(data, src.pos, len(data), src.eof, src.line, game, have, bb0, pc0, st0, c960, pov_white, info,
                t_cur, rows, *outs)
        status = int(info[cp.I_STATUS])
        src.pos, src.line, rows, game = int(info[cp.I_POS]), int(info[cp.I_LINE]), int(info[cp.I_ROWS]), \
            int(info[cp.I_GAME])
        have = False
        if status == cp.BOARD:
            mode = _start_board(src.data, info, bb0, pc0, st0)
            if mode is not None:
                have, c960 = True, mode
                continue
            status = cp.HAND
        if status == cp.NEED:
            if not src.more():
                raise AssertionError("compiled PGN reader asked for more input at the end of the file")
            continue
        if rows:
            yield _rows(b, rows)
            rows = 0
        if status == cp.END:
            return
        if status == cp.HAND:
            game, done = yield from _one_game(src, options, game)
            if done:
                return


def _rows(b: dict, n: int) -> PackedRows:
    sl = slice(0, n)
    c = {k: b[k][sl].copy() for k in ("board", "score", "result", "ply", "piece_count", "in_check", "game", "flags",
                                      "best_move", "capture", "has_move", "line")}
    locs = _Locations(c["line"], c["game"], c["ply"])
    return PackedRows(board=c["board"], score=c["score"], result=c["result"], ply=c["ply"],
                      piece_count=c["piece_count"], in_check=c["in_check"], game=c["game"], flags=c["flags"],
                      first=locs[0], locations=locs, best_move=c["best_move"], best_move_is_capture=c["capture"],
                      has_move=c["has_move"])


def _has_tags(game) -> bool:
    """Does a parsed game carry any tag other than the seven-tag roster's defaults?"""
    defaults = {"Event": "?", "Site": "?", "Date": "????.??.??", "Round": "?", "White": "?",
                "Black": "?", "Result": "*"}
    return any(defaults.get(k) != v for k, v in game.headers.items())


def sniff(head: str) -> bool:
    return head.lstrip().startswith("[")


PGN_CHECK_GAMES = 1000  # most suspect games (a ")", a long NAG) read by python-chess before a PGN file is split


def find_ranges(path: Path, size: int):
    """Range boundaries: a game's start as ``chess.pgn.read_game`` reaches it from the start of the
    file, found by the compiled walk :func:`nnue.pipeline.compiled.ranges.pgn_game_starts`
    (imported here: it loads numba), see :mod:`nnue.pipeline.ranges`; ``find.games(offset)`` the
    games before it, ``find.why_whole()`` None when the walk is python-chess's splitting up to the
    last range, else why the file must be one range."""
    from ..compiled.ranges import NAG_DIGITS, pgn_game_starts

    data = np.memmap(path, dtype=np.uint8, mode="r", shape=(size,)) if size else np.zeros(0, np.uint8)
    starts, suspect = pgn_game_starts(data)
    used = [0]  # the last start a range was given

    def find(lo: int, hi: int):
        k = int(np.searchsorted(starts, lo))
        if k < len(starts) and starts[k] < hi:
            used[0] = max(used[0], k)
            return int(starts[k])
        return None

    def games(offset: int) -> int:
        return int(np.searchsorted(starts, offset))

    def why_whole() -> str | None:
        """None when no game before the last range's start makes read_game raise (each suspect
        game is read by python-chess from its start to the next game's, as in the whole file),
        else why the file must be one range."""
        flagged = np.flatnonzero(suspect[:used[0]])
        if len(flagged) > PGN_CHECK_GAMES:
            return (f"{len(flagged)} games with a ')' or a NAG of {NAG_DIGITS}+ digits, more than the "
                    f"{PGN_CHECK_GAMES} that are read with python-chess before a file is split")
        logging.getLogger("chess.pgn").setLevel(logging.CRITICAL)
        for k in flagged:
            src = _Source(None, bytes(data[starts[k]:starts[k + 1]]))
            try:
                chess.pgn.read_game(src)
            except Exception as e:  # noqa: BLE001 - as _one_game catches it
                return (f"python-chess's read_game raises {type(e).__name__} on the game at byte {int(starts[k])} "
                        f"and then reads on mid-game, so where the later games start is known only by reading "
                        f"the file in order")
        return None

    find.games, find.why_whole = games, why_whole
    return find


SPEC = FormatSpec("pgn", read, sniff, score_pov="mover (cutechess, fastchess, c-chess-cli) or white (--pgn-pov white); lichess %eval: white",
                  result_pov="white (Result tag)", doc="PGN with eval comments", extensions=(".pgn",),
                  errors=LATIN1_ERRORS, find_ranges=find_ranges, compiled=_compiled)
