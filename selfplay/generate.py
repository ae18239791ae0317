"""``nnue selfplay``: training data from our net playing itself in our MCTS, as Stockfish
``.plain`` dumps that ``nnue pack`` (and ``pack --watch``) reads.

Output folder layout:

* ``run.json``: the run's settings (net sha256, nodes, seeds, …), written first. A rerun into
  the same folder with the same settings resumes; other settings are refused.
* ``selfplay-NNNNN.plain``: file N holds games N·G … N·G + G − 1 (G = ``games_per_file``), whole
  games in game order, each game's searched positions first, then its --sample-search
  positions. Each file is written to a hidden temporary name and renamed when complete, so a
  watcher never sees a partial file and a killed run leaves none; a rerun plays only the files
  that are missing (every game's opening and search are seeded by (seed, game number), so the
  files a rerun writes are the ones the first run would have written).

Each record: the position before the move, the move played (UCI; king-takes-rook castling in
Chess960), score = the root's search value mapped back to centipawns (side to move's POV,
:func:`nnue.selfplay.mcts.value_to_cp`), the game ply, and the game's result from the side to
move's POV (as adjudicated, see :mod:`nnue.selfplay.play`).
"""
from __future__ import annotations

import json
import random
import sys
import time
from dataclasses import asdict
from pathlib import Path

from nnue.pipeline.atomic import atomic_write_bytes

from .match import _sha256
from .mcts import BatchSearch, SearchConfig, check_searchable
from .play import Adjudication, Game, Player, make_opening, play_games, read_openings

FILE_PATTERN = "selfplay-{:05d}.plain"


def _game_seed(seed: int, game: int) -> int:
    return (seed * 1_000_003 + game) & 0xFFFFFFFFFFFF


def _plan(settings: dict, out_dir: Path, pattern: str = FILE_PATTERN) -> list[int]:
    """Check or write run.json; the file indices still to play."""
    out_dir.mkdir(parents=True, exist_ok=True)
    run = out_dir / "run.json"
    if run.exists():
        try:
            old = json.loads(run.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{run}: unreadable ({e}); remove it or use another output folder") from None
        if old != settings:
            diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
            raise ValueError(f"{out_dir} holds a run with other settings ({', '.join(diff)}); "
                             f"use another output folder to start a new run")
    else:
        atomic_write_bytes(run, (json.dumps(settings, indent=2, sort_keys=True) + "\n").encode())
    n_files = -(-settings["games"] // settings["games_per_file"])
    stem = pattern.split("{")[0]
    for tmp in out_dir.glob(f".{stem}*.tmp"):  # a killed run's unfinished file
        tmp.unlink(missing_ok=True)
    return [i for i in range(n_files) if not (out_dir / pattern.format(i)).exists()]


def _play_files(net, settings: dict, files: list[int], out_dir: Path, report, leaf_eval: str = "auto"):
    """Play the games of ``files`` with ``settings["in_flight"]`` games batched; write each
    file when its last game ends; ``report(games, positions, evals, result, reason)`` after each
    game (result: white's POV 1/0/−1; reason: how it ended). leaf_eval: see
    :class:`~nnue.selfplay.mcts.BatchSearch`."""
    cfg = SearchConfig(**settings["search"])
    adj = Adjudication(**settings["adjudication"])
    gpf, total = settings["games_per_file"], settings["games"]
    fens = read_openings(settings["openings"], settings["chess960"]) if settings["openings"] else None
    todo = [(f, g) for f in files for g in range(f * gpf, min(total, (f + 1) * gpf))]
    remaining = {f: len([1 for ff, _ in todo if ff == f]) for f in files}
    done: dict[int, dict[int, str]] = {f: {} for f in files}
    pos = [0]
    search = BatchSearch(leaf_eval)

    def new_game():
        if pos[0] >= len(todo):
            return None
        f, g = todo[pos[0]]
        pos[0] += 1
        rng = random.Random(_game_seed(settings["seed"], g))
        start = fens[g % len(fens)] if fens else None
        board = make_opening(rng, settings["random_plies"], settings["chess960"], start)
        player = Player(net, cfg, "selfplay")
        return Game(board, player, player, adj, tag=(f, g), rng=rng)

    for game in play_games(new_game, settings["in_flight"], search):
        f, g = game.tag
        text = game.plain_text()
        done[f][g] = text
        remaining[f] -= 1
        if remaining[f] == 0:
            texts = done.pop(f)
            body = "".join(texts[k] for k in sorted(texts))
            atomic_write_bytes(out_dir / FILE_PATTERN.format(f), body.encode())
        report(1, text.count("\ne\n"), search.stats.evals, game.result, game.reason)
        search.stats.evals = 0


def _worker(net_path, settings, files, out_dir, queue, leaf_eval="auto"):
    import torch

    from nnue.inference import load

    torch.set_num_threads(1)
    try:
        net = load(net_path)
        _play_files(net, settings, files, Path(out_dir), lambda *item: queue.put(("game", item)), leaf_eval)
    except BaseException as e:
        queue.put(("error", f"{type(e).__name__}: {e}"))
    finally:
        queue.put(("done", None))


def selfplay(net: str | Path, out_dir: str | Path, *, games: int, nodes: int = 64, threads: int = 1,
             openings: str | Path | None = None, random_plies: int = 8, chess960: bool = False,
             adjudication: Adjudication | None = None, sample_rate: float = 0.0, games_per_file: int = 25,
             in_flight: int = 64, seed: int = 0, search: dict | None = None, progress: bool = True,
             leaf_eval: str = "auto") -> dict:
    """Play ``games`` self-play games of ``net`` (net.safetensors) at ``nodes`` simulations per
    move into ``out_dir`` (see the module docstring). threads: worker processes (one core each,
    each with ``in_flight`` games batched). openings: a FEN/EPD file (each game takes the next
    position, then ``random_plies`` random plies); sample_rate: --sample-search probability.
    leaf_eval: how the search evaluates its leaves (:class:`~nnue.selfplay.mcts.BatchSearch`:
    ``"auto"`` incremental where the net allows it); it does not change the games, so it is not
    one of the run's settings.
    Returns a summary: games, positions, files written, seconds, games/s, positions/s.
    Raises NetFormatError (bad net), ValueError (bad settings, or a folder holding another run)."""
    import torch

    from nnue.inference import load

    net, out_dir = Path(net), Path(out_dir)
    if games < 1 or threads < 1 or games_per_file < 1 or in_flight < 1 or random_plies < 0:
        raise ValueError("games, threads, games per file and games in flight must be ≥ 1, random plies ≥ 0")
    loaded = load(net)
    check_searchable(loaded, net)  # before the folder is made
    if openings is not None:
        read_openings(openings, chess960)  # refuse a bad file before anything is written
    cfg = SearchConfig(nodes=nodes, sample_rate=sample_rate, **(search or {}))
    settings = {"net": str(net.resolve()), "net_sha256": _sha256(net), "games": games, "games_per_file": games_per_file,
                "openings": str(Path(openings).resolve()) if openings else None, "random_plies": random_plies,
                "chess960": chess960, "seed": seed, "adjudication": (adjudication or Adjudication()).to_dict(),
                "search": asdict(cfg), "in_flight": in_flight}
    files = _plan(settings, out_dir)
    gpf = games_per_file
    todo_games = sum(min(games, (f + 1) * gpf) - f * gpf for f in files)
    t0 = time.monotonic()
    counts = {"games": 0, "positions": 0, "evals": 0}
    wdl, ends = [0, 0, 0], {}
    bar = None
    if progress and sys.stderr.isatty() and todo_games:
        from tqdm import tqdm

        bar = tqdm(total=todo_games, unit="game", file=sys.stderr, dynamic_ncols=True)

    def report(g, p, e, result=None, reason=""):
        if result is not None:
            wdl[1 - result] += 1
            ends[reason] = ends.get(reason, 0) + 1
        counts["games"] += g
        counts["positions"] += p
        counts["evals"] += e
        if bar is not None:
            dt = max(time.monotonic() - t0, 1e-9)
            bar.update(g)
            bar.set_postfix_str(f"{counts['positions'] / dt:.0f} pos/s, {counts['evals'] / dt:.0f} nodes/s")

    try:
        if threads == 1 or len(files) <= 1:
            old = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                _play_files(loaded, settings, files, out_dir, report, leaf_eval)
            finally:
                torch.set_num_threads(old)
        else:
            import multiprocessing as mp

            ctx = mp.get_context("spawn")
            queue = ctx.Queue()
            procs = [ctx.Process(target=_worker, args=(str(net), settings, files[w::threads], str(out_dir), queue,
                                                       leaf_eval),
                                 daemon=True) for w in range(min(threads, len(files)))]
            for p in procs:
                p.start()
            done, error = 0, None
            try:
                while done < len(procs):
                    kind, item = queue.get()
                    if kind == "done":
                        done += 1
                    elif kind == "error":
                        error = error or item
                    else:
                        report(*item)
            finally:
                for p in procs:
                    p.join(timeout=5)
                    if p.is_alive():
                        p.terminate()
            if error:
                raise RuntimeError(f"self-play worker failed: {error}")
    finally:
        if bar is not None:
            bar.close()
    dt = time.monotonic() - t0
    return {"games": counts["games"], "positions": counts["positions"], "evals": counts["evals"],
            "files_written": len(files), "files_total": -(-games // gpf), "seconds": round(dt, 3),
            "games_per_s": round(counts["games"] / dt, 3) if dt else None,
            "positions_per_s": round(counts["positions"] / dt, 2) if dt else None,
            "nodes_per_s": round(counts["evals"] / dt, 1) if dt else None, "output": str(out_dir),
            "wdl_white": wdl, "ends": dict(sorted(ends.items(), key=lambda kv: -kv[1]))}


def summary_lines(s: dict) -> list[str]:
    """A person's reading of :func:`selfplay`'s result: games, results from white's view, how the
    games ended, speed; a warning when every game was drawn."""
    w, d, l = s["wdl_white"]
    n = w + d + l
    out = [f"selfplay: {s['games']} games played in this run, {s['positions']} positions, "
           f"{s['files_written']} of {s['files_total']} files written to {s['output']}"]
    if n:
        out.append(f"results (white's view): 1-0 {w} / draw {d} / 0-1 {l} ({100 * d / n:.0f}% draws)")
        out.append("ended by: " + ", ".join(f"{reason} {k}" for reason, k in s["ends"].items()))
        if d == n and n > 1:
            out.append(f"WARNING: all {n} games were drawn; the dumps' results teach nothing (try more --nodes "
                       f"or --adjudicate)")
    if s["games"]:
        out.append(f"speed: {s['games_per_s']} games/s, {s['positions_per_s']} positions/s, {s['nodes_per_s']} "
                   f"nodes/s over {s['seconds']} s")
    else:
        out.append("nothing to play: every file of this run is already there")
    return out
