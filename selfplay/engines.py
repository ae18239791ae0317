"""UCI engines through python-chess's engine module: start and check an engine, and play one
game between two engines (or an engine and itself), recording each move's reported score.

Scores: the engine's ``info score`` for the position before its move, side to move's POV, UCI
centipawns; a mate in m moves is written as ±(32000 − d), d the distance in plies
(d = 2m − 1 when the side to move mates, 2m when it is mated), as in ../shared/data/selfplay.
"""
from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import chess
import chess.engine

from .mcts import SearchConfig
from .play import Adjudication, Game, Player

MATE = 32000


class EngineCrash(Exception):
    """The engine died or broke the protocol during a game (``side``: chess.WHITE/BLACK)."""

    def __init__(self, side: bool, detail: str):
        super().__init__(detail)
        self.side = side


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


def close_engine(eng) -> None:
    """Quit an engine politely; kill it when it does not go (a wrapper that ignores ``quit``)."""
    if eng is None:
        return
    try:
        eng.quit()
    except Exception:
        try:
            eng.close()
        except Exception:
            pass


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
                     adjudication: Adjudication, names=("white", "black"), tag=None, nodes_label: int = 0) -> Game:
    """Play from ``board`` (its move stack = the opening plies) until the game ends or is
    adjudicated; ``white``/``black`` are SimpleEngine objects (may be the same one). Returns the
    :class:`Game` (records hold fen, move, score, ply of every engine move). Raises
    :class:`EngineCrash` naming the side whose engine failed."""
    pw = Player(None, SearchConfig(nodes=max(1, nodes_label)), names[0])
    pb = Player(None, SearchConfig(nodes=max(1, nodes_label)), names[1])
    game = Game(board, pw, pb, adjudication, tag=tag)
    key = object()  # one object per game: python-chess sends ucinewgame when it changes
    while not game.over:
        b = game.board
        side = b.turn
        eng = white if side == chess.WHITE else black
        try:
            res = eng.play(b, limit, info=chess.engine.INFO_SCORE, game=key)
        except (chess.engine.EngineError, chess.engine.EngineTerminatedError, TimeoutError) as e:
            raise EngineCrash(side, f"{type(e).__name__}: {e}") from None
        move = res.move
        if move is None or move not in b.legal_moves:
            raise EngineCrash(side, f"illegal or missing move {move}")
        cp = uci_score(res.info.get("score"), side)
        record_cp = cp if cp is not None else 32002
        game.records.append((b.fen(), b.uci(move), record_cp, b.ply(), side == chess.WHITE))
        game.push(move, None if cp is None else (cp if side == chess.WHITE else -cp))
    return game
