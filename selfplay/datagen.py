"""``nnue datagen``: training data from any UCI engine playing itself, as Stockfish ``.plain``
dumps, made the way ../shared/data/selfplay was: each game from the start position (or a random
Chess960 start) plus ``random_plies`` random legal plies (8), ``nodes`` per move, engine options
Threads=1 and Hash=16, UCI centipawns with mates as ±(32000 − plies)
(:func:`nnue.selfplay.engines.uci_score`), and the same adjudication (win after 8 plies at
|cp| ≥ 2500, draw after 12 plies at |cp| ≤ 8 past ply 80, draw at ply 400; the result written as
if the game had ended there).

Files, resumption and atomicity as :mod:`nnue.selfplay.generate` (``datagen-NNNNN.plain``,
``run.json``). A game whose engine crashes or sends an illegal move is dropped (its positions
are not written), counted in ``crashed_games``, and the engine is restarted; the run goes on. A
game whose engine sends no move within ``move_timeout`` seconds (a hung engine) is dropped the
same way, counted in ``timed_out_games``, and the engine killed and restarted. A
move without a score is written as ``score 32002`` (VALUE_NONE: the packer flags it).
"""
from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path

from nnue.pipeline.atomic import atomic_write_bytes

from .engines import MOVE_TIMEOUT, START_TIMEOUT, EngineCrash, close_engine, open_engine, play_engine_game, probe_engine
from .generate import _game_seed, _plan
from .play import Adjudication, make_opening

FILE_PATTERN = "datagen-{:05d}.plain"


def datagen(engine: str, out_dir: str | Path, *, games: int, nodes: int = 5000, threads: int = 1,
            random_plies: int = 8, chess960: bool = False, adjudication: Adjudication | None = None,
            games_per_file: int = 25, seed: int = 0, options: dict | None = None, progress: bool = True,
            move_timeout: float | None = MOVE_TIMEOUT, start_timeout: float = START_TIMEOUT) -> dict:
    """Play ``games`` games of ``engine`` (a command line) against itself into ``out_dir``.
    threads: games at once, each thread with its own engine process. start_timeout: seconds for
    the engine's ``uciok``, ``readyok`` and first ``go nodes 1``, in the check before the run
    (:func:`~nnue.selfplay.engines.probe_engine`) and at every (re)start. Returns a summary (games,
    positions, crashed_games, timed_out_games, files written, seconds, games/s, positions/s). Raises
    FileNotFoundError / ValueError (engine missing or not UCI; bad settings; a folder holding
    another run) before any game."""
    import chess.engine

    out_dir = Path(out_dir)
    if games < 1 or threads < 1 or games_per_file < 1 or nodes < 1 or random_plies < 0:
        raise ValueError("games, threads, games per file and nodes must be ≥ 1, random plies ≥ 0")
    if move_timeout is not None and not move_timeout > 0:
        raise ValueError(f"--move-timeout {move_timeout}: seconds > 0")
    if not start_timeout > 0:
        raise ValueError(f"--start-timeout {start_timeout}: seconds > 0")
    # checked as the games will use it, before anything is written
    probe = probe_engine(engine, {"Threads": 1, "Hash": 16}, options or {}, timeout=start_timeout, chess960=chess960)
    opts, engine_name = probe["options"], probe["id"]
    asked = {"Threads": 1, "Hash": 16, **(options or {})}  # run.json's record (resume compares it)
    adj = adjudication or Adjudication()
    settings = {"engine": engine, "engine_name": engine_name, "nodes": nodes, "games": games,
                "games_per_file": games_per_file, "random_plies": random_plies, "chess960": chess960, "seed": seed,
                "adjudication": adj.to_dict(), "engine_options": asked}
    files = _plan(settings, out_dir, FILE_PATTERN)
    gpf = games_per_file
    todo = [(f, g) for f in files for g in range(f * gpf, min(games, (f + 1) * gpf))]
    remaining = {f: sum(1 for ff, _ in todo if ff == f) for f in files}
    texts: dict[int, dict[int, str]] = {f: {} for f in files}
    limit = chess.engine.Limit(nodes=nodes)
    lock = threading.Lock()
    counts = {"games": 0, "positions": 0, "crashed_games": 0, "timed_out_games": 0}
    errors: list[BaseException] = []
    it = iter(todo)
    t0 = time.monotonic()
    bar = None
    if progress and sys.stderr.isatty() and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), unit="game", file=sys.stderr, dynamic_ncols=True)

    def finish(f, g, text):
        with lock:
            texts[f][g] = text
            remaining[f] -= 1
            counts["games"] += 1
            counts["positions"] += text.count("\ne\n")
            if remaining[f] == 0:
                done = texts.pop(f)
                atomic_write_bytes(out_dir / FILE_PATTERN.format(f), "".join(done[k] for k in sorted(done)).encode())
            if bar is not None:
                dt = max(time.monotonic() - t0, 1e-9)
                bar.update(1)
                bar.set_postfix_str(f"{counts['positions'] / dt:.0f} pos/s" +
                                    (f", {counts['crashed_games']} crashed" if counts["crashed_games"] else "") +
                                    (f", {counts['timed_out_games']} hung" if counts["timed_out_games"] else ""))

    def worker():
        eng = None
        try:
            eng = open_engine(engine, opts, start_timeout)
            while not errors:
                with lock:
                    nxt = next(it, None)
                if nxt is None:
                    return
                f, g = nxt
                rng = random.Random(_game_seed(seed, g))
                board = make_opening(rng, random_plies, chess960)
                try:
                    game = play_engine_game(board, eng, eng, limit, adj, names=(engine_name, engine_name),
                                            tag=g, nodes_label=nodes, move_timeout=move_timeout)
                    text = game.plain_text()
                except EngineCrash as e:
                    with lock:
                        counts["timed_out_games" if e.kind == "timeout" else "crashed_games"] += 1
                    close_engine(eng, kill=True)
                    eng = open_engine(engine, opts, start_timeout)
                    text = ""
                finish(f, g, text)
        except Exception as e:
            errors.append(e)
        finally:
            close_engine(eng)

    ts = [threading.Thread(target=worker, daemon=True) for _ in range(min(threads, max(1, len(todo))))]
    try:
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        if bar is not None:
            bar.close()
    if errors:
        e = errors[0]
        if isinstance(e, ValueError):  # the engine did not (re)start: its one line (status 2)
            raise ValueError(f"datagen stopped: {e} (finished files are complete; rerun to resume)") from None
        raise RuntimeError(f"datagen stopped: {type(e).__name__}: {e} (finished files are complete; rerun to resume)")
    dt = time.monotonic() - t0
    return {"games": counts["games"], "positions": counts["positions"], "crashed_games": counts["crashed_games"],
            "timed_out_games": counts["timed_out_games"],
            "files_written": len(files), "files_total": -(-games // gpf), "seconds": round(dt, 3),
            "games_per_s": round(counts["games"] / dt, 3) if dt else None,
            "positions_per_s": round(counts["positions"] / dt, 2) if dt else None, "output": str(out_dir)}
