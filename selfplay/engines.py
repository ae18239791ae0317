"""UCI engines through python-chess's engine module: start and check an engine, and play one
game between two engines (or an engine and itself), recording each move's reported score.

Scores: the engine's ``info score`` for the position before its move, side to move's POV, UCI
centipawns; a mate in m moves is written as ±(32000 − d), d the distance in plies
(d = 2m − 1 when the side to move mates, 2m when it is mated), as in ../shared/data/selfplay.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import shlex
import shutil
from pathlib import Path

import chess
import chess.engine

from .mcts import SearchConfig
from .play import Adjudication, Game, Player

MATE = 32000


#: seconds an engine may take beyond its limit's own time (nodes limits have none) before it
#: counts as hung: the default of ``--move-timeout``
MOVE_TIMEOUT = 30.0


class EngineCrash(Exception):
    """The engine died or broke the protocol during a game (``side``: chess.WHITE/BLACK).
    ``kind``: "crash" (it exited, or sent an illegal or no move) or "timeout" (no ``bestmove``
    within the move timeout: hung)."""

    kind = "crash"

    def __init__(self, side: bool, detail: str):
        super().__init__(detail)
        self.side = side


class EngineTimeout(EngineCrash):
    """The engine sent no ``bestmove`` within the move timeout (a hung engine)."""

    kind = "timeout"


def engine_argv(cmd: str) -> list[str]:
    """Split an engine command line; FileNotFoundError when its program does not exist."""
    argv = shlex.split(cmd)
    if not argv:
        raise ValueError("empty engine command")
    prog = argv[0]
    if not (Path(prog).is_file() or shutil.which(prog)):
        raise FileNotFoundError(f"engine {prog!r}: no such file")
    return argv


def open_engine(cmd: str, options: dict | None = None, timeout: float = 10.0) -> chess.engine.SimpleEngine:
    """Start a UCI engine and configure ``options``. FileNotFoundError: no such program;
    ValueError: it does not speak UCI (no ``uciok`` within ``timeout`` s, or it exits)."""
    argv = engine_argv(cmd)
    try:
        eng = chess.engine.SimpleEngine.popen_uci(argv, timeout=timeout, stderr=__import__("subprocess").DEVNULL)
    except (chess.engine.EngineError, chess.engine.EngineTerminatedError, TimeoutError, OSError) as e:
        raise ValueError(f"engine {cmd!r} does not speak UCI ({type(e).__name__}: {e or 'no uciok'})") from None
    try:
        for k, v in (options or {}).items():
            if k in eng.options:
                eng.configure({k: v})
    except (chess.engine.EngineError, chess.engine.EngineTerminatedError) as e:
        eng.close()
        raise ValueError(f"engine {cmd!r}: setting options failed: {e}") from None
    return eng


def close_engine(eng, kill: bool = False) -> None:
    """Quit an engine politely; kill it when it does not go (a wrapper that ignores ``quit``).
    ``kill``: do not ask, kill its process at once (a hung engine would not answer ``quit``)."""
    if eng is None:
        return
    if not kill:
        try:
            eng.quit()
            return
        except Exception:
            pass
    try:
        eng.close()  # closes the transport: the process is killed if it still runs
    except Exception:
        pass


def engine_play(eng, board: chess.Board, limit: chess.engine.Limit, game: object,
                move_timeout: float | None = MOVE_TIMEOUT) -> chess.engine.PlayResult:
    """``eng.play`` with a per-move timeout: ``move_timeout`` seconds plus the limit's own time
    (``limit.time``; nodes and depth limits have none, and python-chess then waits forever).
    Raises TimeoutError when the engine sends no ``bestmove`` in time, and what ``play`` raises
    (EngineError, EngineTerminatedError). ``move_timeout`` None: wait as python-chess does."""
    if move_timeout is None:
        return eng.play(board, limit, info=chess.engine.INFO_SCORE, game=game)
    if move_timeout <= 0:
        raise ValueError(f"move timeout {move_timeout}: seconds > 0")
    if eng.returncode.done():
        raise chess.engine.EngineTerminatedError(f"engine process died (exit code {eng.returncode.result()})")
    budget = move_timeout + (limit.time or 0.0)
    coro = asyncio.wait_for(eng.protocol.play(board, limit, game=game, info=chess.engine.INFO_SCORE), budget)
    try:
        fut = asyncio.run_coroutine_threadsafe(coro, eng.protocol.loop)
    except RuntimeError as e:  # its event loop is gone: the engine was shut down
        coro.close()
        raise chess.engine.EngineTerminatedError(f"engine event loop dead ({e})") from None
    try:
        return fut.result(timeout=budget + 5.0)
    except (asyncio.TimeoutError, concurrent.futures.TimeoutError, TimeoutError):  # one class from 3.11
        fut.cancel()
        raise TimeoutError(f"no bestmove within {budget:g} s") from None


def uci_score(score: chess.engine.PovScore | None, turn: bool) -> int | None:
    """An engine's score as UCI centipawns for the side to move ``turn``; mates as
    ±(32000 − plies). None when the engine reported none."""
    if score is None:
        return None
    s = score.pov(turn)
    m = s.mate()
    if m is None:
        return int(s.score())
    if m > 0:
        return MATE - (2 * m - 1)
    return -(MATE - 2 * (-m)) if m < 0 else -MATE


def play_engine_game(board: chess.Board, white, black, limit: chess.engine.Limit,
                     adjudication: Adjudication, names=("white", "black"), tag=None, nodes_label: int = 0,
                     move_timeout: float | None = MOVE_TIMEOUT) -> Game:
    """Play from ``board`` (its move stack = the opening plies) until the game ends or is
    adjudicated; ``white``/``black`` are SimpleEngine objects (may be the same one). Returns the
    :class:`Game` (records hold fen, move, score, ply of every engine move). Raises
    :class:`EngineCrash` naming the side whose engine failed, :class:`EngineTimeout` (a
    subclass) when it sent no move within ``move_timeout`` s beyond the limit's time; the caller
    then kills that engine (``close_engine(eng, kill=True)``) and starts a new one."""
    pw = Player(None, SearchConfig(nodes=max(1, nodes_label)), names[0])
    pb = Player(None, SearchConfig(nodes=max(1, nodes_label)), names[1])
    game = Game(board, pw, pb, adjudication, tag=tag)
    key = object()  # one object per game: python-chess sends ucinewgame when it changes
    while not game.over:
        b = game.board
        side = b.turn
        eng = white if side == chess.WHITE else black
        try:
            res = engine_play(eng, b, limit, key, move_timeout)
        except TimeoutError as e:
            raise EngineTimeout(side, f"hung at ply {b.ply()}: {e}") from None
        except (chess.engine.EngineError, chess.engine.EngineTerminatedError) as e:
            raise EngineCrash(side, f"{type(e).__name__}: {e}") from None
        move = res.move
        if move is None or move not in b.legal_moves:
            raise EngineCrash(side, f"illegal or missing move {move}")
        cp = uci_score(res.info.get("score"), side)
        record_cp = cp if cp is not None else 32002
        game.records.append((b.fen(), b.uci(move), record_cp, b.ply(), side == chess.WHITE))
        game.push(move, None if cp is None else (cp if side == chess.WHITE else -cp))
    return game
