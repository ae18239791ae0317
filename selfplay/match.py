"""Paired matches with SPRT stopping: our nets in our search (:func:`net_match`, and the retrain
gate :func:`gate_match`), or any two UCI engines through python-chess (:func:`engine_match`).

Every opening is played twice, the first player ("A", the candidate) once with each colour; the
two games form a pair, whose score (A's points / 2) is one pentanomial observation
(:mod:`nnue.selfplay.sprt`). After each finished pair the SPRT is updated; the match stops
issuing new pairs once the LLR crosses a bound (pairs already in flight are finished and
counted). Results: ``match.pgn`` (every game) and ``match.json`` (the SPRT report, W/D/L,
pentanomial counts, settings, players), both written atomically.
"""
from __future__ import annotations

import hashlib
import json
import math
import random
import sys
import time
from dataclasses import asdict
from pathlib import Path

import chess

from nnue.pipeline.atomic import atomic_write_bytes

from .mcts import SearchConfig, check_searchable
from .engines import MOVE_TIMEOUT, play_engine_game
from .play import Adjudication, Game, Player, make_opening, play_games, read_openings
from .sprt import sprt


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def make_openings(pairs: int, openings: str | Path | None = None, random_plies: int = 8, seed: int = 0,
                  chess960: bool = False) -> list[tuple[str, list[str], bool]]:
    """``pairs`` openings as (start FEN, random plies in UCI, Chess960?): the opening file's
    positions in order (cycled when there are fewer than pairs), or the start position (a random
    Chess960 start with ``chess960``), each followed by ``random_plies`` seeded random plies."""
    rng = random.Random(seed)
    fens = read_openings(openings, chess960) if openings is not None else None
    out = []
    for i in range(pairs):
        start = fens[i % len(fens)] if fens else None
        b = make_opening(rng, random_plies, chess960, start)
        moves = [m.uci() for m in b.move_stack]
        while b.move_stack:
            b.pop()
        out.append((b.fen(), moves, b.chess960))
    return out


def _board(opening: tuple[str, list[str], bool]) -> chess.Board:
    fen, moves, c960 = opening
    b = chess.Board(fen, chess960=c960)
    for u in moves:
        b.push_uci(u)
    return b


class Tally:
    """Running W/D/L (for player A), pentanomial counts and the SPRT, pair by pair."""

    def __init__(self, elo0, elo1, alpha, beta, model="normalized"):
        self.elo0, self.elo1, self.alpha, self.beta, self.model = elo0, elo1, alpha, beta, model
        self.w = self.d = self.l = 0
        self.penta = [0] * 5
        self.crashes = 0   # games an engine lost by crashing (or an illegal move)
        self.timeouts = 0  # games an engine lost by hanging past the move timeout
        self.stopped_at: dict | None = None  # the SPRT state when the LLR first crossed a bound
        self._half: dict[int, float] = {}

    def crossed(self) -> bool:
        """After a finished pair: True (and the state recorded once) when the LLR is at or past a
        bound. The match then starts no new pair; games already in flight are still counted."""
        r = self.result()
        if r.verdict == "inconclusive":
            return False
        if self.stopped_at is None:
            self.stopped_at = {"verdict": r.verdict, "llr": r.to_dict()["llr"], "games": r.games}
        return True

    def add(self, pair: int, score_a: float) -> bool:
        """Record one game (A's score 1, ½ or 0); True when it completed its pair."""
        if score_a == 1:
            self.w += 1
        elif score_a == 0:
            self.l += 1
        else:
            self.d += 1
        if pair in self._half:
            self.penta[int(round(2 * (self._half.pop(pair) + score_a)))] += 1
            return True
        self._half[pair] = score_a
        return False

    def result(self):
        return sprt(self.penta, self.elo0, self.elo1, self.alpha, self.beta, self.model, (self.w, self.d, self.l))

    def line(self) -> str:
        r = self.result()
        elo = f"{r.elo:+.1f} ± {r.elo_ci95:.1f}" if math.isfinite(r.elo) and math.isfinite(r.elo_ci95) else \
            f"{r.elo:+.1f} ± inf" if not math.isnan(r.elo) else "n/a"
        crash = (f"  crashes {self.crashes}" if self.crashes else "") + \
            (f"  timeouts {self.timeouts}" if self.timeouts else "")
        return (f"games {self.w + self.d + self.l}  W {self.w} D {self.d} L {self.l}  Elo {elo}  "
                f"LLR {r.llr:+.2f} ({r.lower:+.2f}, {r.upper:+.2f}){crash}")


class _Live:
    """The live line on stderr: rewritten in place on a terminal, every 10 pairs otherwise."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()
        self.n = 0

    def show(self, tally: Tally, final: bool = False):
        if not self.enabled:
            return
        self.n += 1
        if self.tty:
            print("\r" + tally.line() + ("\n" if final else ""), end="", file=sys.stderr, flush=True)
        elif final or self.n % 10 == 0:
            print(tally.line(), file=sys.stderr, flush=True)


def _write_results(out_dir: Path, pgns: list[tuple[int, int, str]], report: dict) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    pgn_path, json_path = out_dir / "match.pgn", out_dir / "match.json"
    atomic_write_bytes(pgn_path, "".join(p for _, _, p in sorted(pgns)).encode())
    report = dict(report, pgn=str(pgn_path), json=str(json_path))
    atomic_write_bytes(json_path, (json.dumps(report, indent=2) + "\n").encode())
    return pgn_path, json_path


def _report(tally: Tally, settings: dict, players: dict, elapsed: float, stopped_early: bool) -> dict:
    """The match's JSON. ``verdict``: the bound the LLR crossed first when the match stopped there
    (pairs that were in flight then are counted in the numbers but cannot undo it); otherwise the
    verdict at the end, "inconclusive" when the game budget (``settings["games"]``) ran out
    between the bounds. ``stop``: why it ended ("H1 bound", "H0 bound", "budget") with the
    budget, the games played, and the LLR at the stop."""
    r = tally.result()
    d = r.to_dict()
    budget = int(settings.get("pairs_planned", 0)) * 2
    at = tally.stopped_at if stopped_early else None
    verdict = at["verdict"] if at else r.verdict
    stop = {"reason": f"{at['verdict']} bound" if at else "budget", "max_games": budget, "games": r.games,
            "llr_at_stop": at["llr"] if at else d["llr"], "games_at_stop": at["games"] if at else r.games}
    lines = r.lines()
    if at and at["verdict"] != r.verdict:  # in-flight pairs moved the LLR back inside the bounds
        lines[0] = lines[0].rsplit(" ", 1)[0] + f" {verdict} (crossed at {at['games']} games, LLR {at['llr']:+.2f})"
    if at:
        lines.append(f"STOP: {verdict} bound after {at['games']} of at most {budget} games")
    elif r.verdict == "inconclusive":
        lean = ("H1" if d["llr"] > 0 else "H0") if d["llr"] else "neither"
        far = (d["llr"] / r.upper if d["llr"] > 0 else d["llr"] / r.lower) if d["llr"] else 0.0
        lines.append(f"STOP: budget of {budget} games spent, no bound reached: inconclusive, leaning {lean} "
                     f"(LLR {d['llr']:+.2f}, {100 * far:.0f}% of the way to its bound)")
        stop["leaning"] = lean
    else:
        lines.append(f"STOP: all {r.games} games played (--no-sprt-stop); {verdict} at the end")
    return {"verdict": verdict, "llr": d["llr"], "elo": d["elo"], "elo_ci95": d["elo_ci95"],
            "penta": list(tally.penta), "games": tally.w + tally.d + tally.l, "pairs": r.pairs,
            "wdl": [tally.w, tally.d, tally.l], "crashes": tally.crashes, "timeouts": tally.timeouts, "sprt": d,
            "sprt_stopped": bool(at), "stop": stop, "players": players, "settings": settings,
            "elapsed_s": round(elapsed, 3), "lines": lines}


# ------------------------------------------------------------------------------- nets, our search
def _net_games(nets: tuple, cfgs: tuple[SearchConfig, SearchConfig], names: tuple[str, str],
               openings: list, pair_ids: list[int], adjudication: Adjudication, in_flight: int, seed: int,
               stop=lambda: False):
    """Play the pairs ``pair_ids`` (game 2i: A white, 2i+1: A black); yields (pair, colour,
    A's score, pgn text) as games end."""
    queue = [(p, c) for p in pair_ids for c in (0, 1)]
    pos = [0]

    def new_game():
        if pos[0] >= len(queue) or stop():
            return None
        p, c = queue[pos[0]]
        pos[0] += 1
        a, b = Player(nets[0], cfgs[0], names[0]), Player(nets[1], cfgs[1], names[1])
        white, black = (a, b) if c == 0 else (b, a)
        return Game(_board(openings[p]), white, black, adjudication, tag=(p, c),
                    rng=random.Random(hash((seed, p, c)) & 0xFFFFFFFF))

    for g in play_games(new_game, in_flight):
        p, c = g.tag
        score_white = (g.result + 1) / 2
        yield p, c, score_white if c == 0 else 1 - score_white, g.pgn({"Round": f"{p + 1}.{c + 1}"})


def _worker(net_paths, cfgs, names, openings, pair_ids, adjudication, in_flight, seed, queue, stop_event):
    import torch

    from nnue.inference import load

    torch.set_num_threads(1)
    try:
        nets = tuple(load(p) for p in net_paths)
        for item in _net_games(nets, cfgs, names, openings, pair_ids, adjudication, in_flight, seed,
                               stop=stop_event.is_set):
            queue.put(("game", item))
    except BaseException as e:  # reported to the parent, which raises it
        queue.put(("error", f"{type(e).__name__}: {e}"))
    finally:
        queue.put(("done", None))


def net_match(net_a: str | Path, net_b: str | Path, out_dir: str | Path, *, games: int = 200, nodes: int = 64,
              nodes_b: int | None = None, elo0: float = 0.0, elo1: float = 5.0, alpha: float = 0.05,
              beta: float = 0.05, concurrency: int = 1, openings: str | Path | None = None,
              random_plies: int = 8, seed: int = 0, chess960: bool = False, in_flight: int = 64,
              adjudication: Adjudication | None = None, search: dict | None = None, sprt_stop: bool = True,
              live: bool = False, model: str = "normalized") -> dict:
    """A paired match between two integer nets (``net.safetensors`` paths; header checks raise
    NetFormatError), both in our MCTS at ``nodes`` simulations per move (``nodes_b`` for B).

    games: the game budget, at most this many (whole pairs: an odd budget plays one game fewer);
    the match stops earlier when the LLR crosses a bound (``sprt_stop``). concurrency: worker processes (each loads the
    nets and plays its share of the pairs, ``in_flight`` games at a time with batched leaf
    evals). search: extra :class:`SearchConfig` fields for both sides (backup, priors, …).
    Writes ``out_dir/match.pgn`` and ``out_dir/match.json`` atomically and returns the JSON's
    dict (verdict, llr, elo, elo_ci95, penta (LL..WW), games, wdl, pgn, json, …)."""
    import torch

    from nnue.inference import load

    t0 = time.monotonic()
    net_a, net_b, out_dir = Path(net_a), Path(net_b), Path(out_dir)
    if games < 2:
        raise ValueError(f"games={games}: at least 2 (one pair)")
    if concurrency < 1 or in_flight < 1:
        raise ValueError(f"concurrency={concurrency}, in_flight={in_flight}: at least 1")
    nets = (load(net_a), load(net_b))  # header checks, in this process first
    for net, path in zip(nets, (net_a, net_b)):
        check_searchable(net, path)
    extra = dict(search or {})
    cfgs = (SearchConfig(nodes=nodes, **extra), SearchConfig(nodes=nodes_b or nodes, **extra))
    pairs = games // 2  # the budget: at most `games` games, whole pairs
    ops = make_openings(pairs, openings, random_plies if openings is None else 0, seed, chess960)
    adj = adjudication or Adjudication()
    names = (f"A:{net_a.parent.name or net_a.name}", f"B:{net_b.parent.name or net_b.name}")
    tally = Tally(elo0, elo1, alpha, beta, model)
    pgns: list = []
    view = _Live(live)
    stopped = [False]

    def take(item) -> bool:
        p, c, score, pgn = item
        pgns.append((p, c, pgn))
        if tally.add(p, score):
            view.show(tally)
            if sprt_stop and tally.crossed():
                stopped[0] = True
        return stopped[0]

    if concurrency == 1:
        old = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            for item in _net_games(nets, cfgs, names, ops, list(range(pairs)), adj, in_flight, seed,
                                   stop=lambda: stopped[0]):
                take(item)
        finally:
            torch.set_num_threads(old)
    else:
        import multiprocessing as mp

        ctx = mp.get_context("spawn")
        queue, stop_event = ctx.Queue(), ctx.Event()
        procs = [ctx.Process(target=_worker, args=(
            (str(net_a), str(net_b)), cfgs, names, ops, list(range(w, pairs, concurrency)), adj,
            max(1, in_flight // concurrency), seed, queue, stop_event), daemon=True) for w in range(concurrency)]
        for pr in procs:
            pr.start()
        done, error = 0, None
        try:
            while done < len(procs):
                kind, item = queue.get()
                if kind == "done":
                    done += 1
                elif kind == "error":
                    error = error or item
                    stop_event.set()
                elif take(item):
                    stop_event.set()
        finally:
            stop_event.set()
            for pr in procs:
                pr.join(timeout=30)
                if pr.is_alive():
                    pr.terminate()
        if error:
            raise RuntimeError(f"match worker failed: {error}")
    view.show(tally, final=True)
    settings = {"games": games, "pairs_planned": pairs, "nodes": nodes, "nodes_b": nodes_b or nodes,
                "elo0": elo0, "elo1": elo1, "alpha": alpha, "beta": beta, "model": model,
                "concurrency": concurrency, "in_flight": in_flight, "openings": str(openings) if openings else None,
                "random_plies": random_plies if openings is None else 0, "seed": seed, "chess960": chess960,
                "adjudication": adj.to_dict(), "search": asdict(cfgs[0])}
    players = {"A": {"net": str(net_a), "sha256": _sha256(net_a)}, "B": {"net": str(net_b), "sha256": _sha256(net_b)}}
    report = _report(tally, settings, players, time.monotonic() - t0, stopped[0])
    pgn_path, json_path = _write_results(out_dir, pgns, report)
    return dict(report, pgn=str(pgn_path), json=str(json_path))


def gate_match(candidate: Path, champion: Path, out_dir: Path, *, games: int = 200, nodes: int = 64,
               elo0: float = 0.0, elo1: float = 5.0, alpha: float = 0.05, beta: float = 0.05,
               concurrency: int = 1, openings: Path | None = None, seed: int = 0) -> dict:
    """The retrain service's strength gate: a paired SPRT match, candidate (A) against champion
    (B), both ``net.safetensors`` paths, in our MCTS at ``nodes`` simulations per move, at most
    ``games`` games (pairs from ``openings``, or 8 seeded random plies from the start position),
    stopping early at the SPRT bounds for normalized-Elo bounds [elo0, elo1].

    Writes ``out_dir/match.pgn`` and ``out_dir/match.json`` atomically. Returns a dict with at
    least: verdict ("H1": the candidate is stronger by ≥ elo1 at confidence 1 − α; "H0": not
    stronger than elo0; "inconclusive": the games ran out first), llr, elo (logistic, candidate's
    POV), elo_ci95 (the ±), penta (LL..WW, candidate's POV), games, pgn, json (the two paths).
    Raises NetFormatError for a net failing its header checks, ValueError for bad settings,
    FileNotFoundError / ValueError (with the line) for a missing or bad opening file."""
    return net_match(candidate, champion, out_dir, games=games, nodes=nodes, elo0=elo0, elo1=elo1,
                     alpha=alpha, beta=beta, concurrency=concurrency, openings=openings, seed=seed)


# ------------------------------------------------------------------------------------ UCI engines
def engine_match(engine_a: str, engine_b: str, out_dir: str | Path, *, games: int = 200, nodes: int | None = None,
                 movetime: float | None = None, elo0: float = 0.0, elo1: float = 5.0, alpha: float = 0.05,
                 beta: float = 0.05, concurrency: int = 1, openings: str | Path | None = None, random_plies: int = 8,
                 seed: int = 0, chess960: bool = False, adjudication: Adjudication | None = None,
                 sprt_stop: bool = True, live: bool = False, model: str = "normalized",
                 options: dict | None = None, move_timeout: float | None = MOVE_TIMEOUT) -> dict:
    """A paired match between two UCI engines (command lines), ``nodes`` per move or
    ``movetime`` seconds per move, ``concurrency`` games at once (each worker thread runs its
    own pair of engine processes). An engine that crashes or sends an illegal move loses that
    game (counted in ``crashes``) and is restarted; one that sends no move within
    ``move_timeout`` s beyond ``movetime`` (None: wait forever) is hung: it loses the game on
    time (counted in ``timeouts``), is killed and restarted; the match goes on. Engines start with
    Threads=1, Hash=16 unless ``options`` says otherwise. Raises FileNotFoundError (no such
    program) or ValueError (not UCI) before any game. Writes and returns as :func:`net_match`."""
    import queue as queue_mod
    import threading

    import chess.engine

    from .engines import EngineCrash, EngineTimeout, close_engine, open_engine

    t0 = time.monotonic()
    out_dir = Path(out_dir)
    if (nodes is None) == (movetime is None):
        raise ValueError("give exactly one of --nodes and --movetime for an engine match")
    if games < 2 or concurrency < 1:
        raise ValueError(f"games={games}, concurrency={concurrency}: need games ≥ 2 and concurrency ≥ 1")
    if move_timeout is not None and not move_timeout > 0:
        raise ValueError(f"--move-timeout {move_timeout}: seconds > 0")
    limit = chess.engine.Limit(nodes=nodes) if nodes is not None else chess.engine.Limit(time=movetime)
    opts = {"Threads": 1, "Hash": 16, **(options or {})}
    for cmd in (engine_a, engine_b):  # fail fast, one line, before anything is written
        close_engine(open_engine(cmd, opts))
    pairs = games // 2  # the budget: at most `games` games, whole pairs
    ops = make_openings(pairs, openings, random_plies if openings is None else 0, seed, chess960)
    adj = adjudication or Adjudication()
    names = (f"A:{engine_a}", f"B:{engine_b}")
    tally = Tally(elo0, elo1, alpha, beta, model)
    pgns: list = []
    view = _Live(live)
    lock = threading.Lock()
    stop = threading.Event()
    work: queue_mod.Queue = queue_mod.Queue()
    for p in range(pairs):
        for c in (0, 1):
            work.put((p, c))
    errors: list[str] = []

    def worker():
        engines = {}
        try:
            engines = {"A": open_engine(engine_a, opts), "B": open_engine(engine_b, opts)}
            while not stop.is_set():
                try:
                    p, c = work.get_nowait()
                except queue_mod.Empty:
                    return
                wn, bn = ("A", "B") if c == 0 else ("B", "A")
                board = _board(ops[p])
                try:
                    g = play_engine_game(board, engines[wn], engines[bn], limit, adj,
                                         names=(names[0], names[1]) if c == 0 else (names[1], names[0]),
                                         tag=(p, c), nodes_label=nodes or 0, move_timeout=move_timeout)
                    score_white = (g.result + 1) / 2
                    pgn = g.pgn({"Round": f"{p + 1}.{c + 1}"})
                    crashed = False
                except EngineCrash as e:
                    who = wn if e.side == chess.WHITE else bn
                    score_white = 0.0 if e.side == chess.WHITE else 1.0
                    what = "timed out" if isinstance(e, EngineTimeout) else "crashed"
                    res = "0-1" if score_white == 0 else "1-0"
                    pgn = (f'[Round "{p + 1}.{c + 1}"]\n[White "{names[0] if c == 0 else names[1]}"]\n'
                           f'[Black "{names[1] if c == 0 else names[0]}"]\n[Result "{res}"]\n'
                           f'[Termination "engine {who} {what}: {e}"]\n\n{res}\n\n')
                    crashed = e.kind
                    close_engine(engines[who], kill=True)
                    engines[who] = open_engine(engine_a if who == "A" else engine_b, opts)
                score_a = score_white if c == 0 else 1 - score_white
                with lock:
                    if crashed == "timeout":
                        tally.timeouts += 1
                    elif crashed:
                        tally.crashes += 1
                    pgns.append((p, c, pgn))
                    if tally.add(p, score_a):
                        view.show(tally)
                        if sprt_stop and tally.crossed():
                            stop.set()
        except Exception as e:  # a restart that failed, or a bug: stop the match, report it
            errors.append(f"{type(e).__name__}: {e}")
            stop.set()
        finally:
            for eng in engines.values():
                close_engine(eng)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise RuntimeError(f"engine match stopped: {errors[0]}")
    view.show(tally, final=True)
    settings = {"games": games, "pairs_planned": pairs, "nodes": nodes, "movetime": movetime, "elo0": elo0,
                "elo1": elo1, "alpha": alpha, "beta": beta, "model": model, "concurrency": concurrency,
                "openings": str(openings) if openings else None,
                "random_plies": random_plies if openings is None else 0, "seed": seed, "chess960": chess960,
                "adjudication": adj.to_dict(), "engine_options": opts, "move_timeout": move_timeout}
    players = {"A": {"engine": engine_a}, "B": {"engine": engine_b}}
    report = _report(tally, settings, players, time.monotonic() - t0, tally.stopped_at is not None)
    pgn_path, json_path = _write_results(out_dir, pgns, report)
    return dict(report, pgn=str(pgn_path), json=str(json_path))
