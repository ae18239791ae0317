"""Paired matches with SPRT stopping: our nets in our search (:func:`net_match`, and the retrain
gate :func:`gate_match`), or any two UCI engines through python-chess (:func:`engine_match`).

Every opening is played twice, the first player ("A", the candidate) once with each colour; the
two games form a pair, whose score (A's points / 2) is one pentanomial observation
(:mod:`nnue.selfplay.sprt`). After each finished pair the SPRT is updated; the match stops
issuing new pairs once the LLR crosses a bound (pairs already in flight are finished and
counted). Results (:class:`Recorder`): ``match.pgn`` gets every game appended as it ends,
``match.json`` (the SPRT report, W/D/L, pentanomial counts, how games ended, settings, players,
the game log) is rewritten atomically after it; Ctrl-C or SIGTERM leaves both consistent and a
rerun with the same settings resumes. Defaults that make a match measure something
(:data:`MATCH_NODES`, :data:`MATCH_FPU`, :data:`MATCH_CONTEMPT`,
:data:`~nnue.selfplay.play.MATCH_ADJUDICATION`, the shipped opening book) are in docs/selfplay.md,
"Matches that measure something".
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import random
import signal
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import chess

from nnue.pipeline.atomic import atomic_write_bytes

from .mcts import SearchConfig, check_searchable
from .engines import MOVE_TIMEOUT, START_TIMEOUT, play_engine_game
from .play import MATCH_ADJUDICATION, Adjudication, Game, Player, make_opening, play_games, read_openings
from .sprt import sprt


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _option_files(options: dict) -> dict[str, list[str]]:
    """The engine options whose value names an existing file (``EvalFile``): name -> [path,
    sha256 of its bytes], so that a resume notices a net re-exported under the same path."""
    return {name: [value, _sha256(Path(value))] for name, value in sorted(options.items())
            if isinstance(value, str) and value and Path(value).is_file()}


#: our search's default simulations per move in a match (``nnue match --net``): with the match's
#: first-play urgency (:data:`MATCH_FPU`) 15 of 16 games between a good and a poor net were
#: decided at 64 (docs/selfplay.md, "Matches that measure something")
MATCH_NODES = 64

#: the search's draw contempt in matches (:class:`~nnue.selfplay.mcts.SearchConfig`): without it,
#: a repetition (an exact 0 the search reaches without an eval) soaked up the visits of a side
#: that thought itself better, and most games between clearly different nets were repetitions
MATCH_CONTEMPT = 0.1

#: the first-play-urgency reduction in matches: self-play's 0.2 made the root values of both
#: sides 1.5-2 pawns too low at 64-256 simulations (the start of a balanced book line: -187 cp
#: at 64 nodes, +79 cp with 0; docs/selfplay.md "Matches that measure something"), so both sides took
#: repetitions as the lesser evil
MATCH_FPU = 0.0


def make_openings(pairs: int, openings: str | Path | None = None, random_plies: int | None = None, seed: int = 0,
                  chess960: bool = False, book: str | Path | None = None) -> list[tuple[str, list[str], bool]]:
    """``pairs`` openings as (start FEN, opening plies in UCI, Chess960?), from one source:
    ``openings`` (a FEN/EPD file, its positions in order, cycled); ``random_plies`` R (or
    ``chess960``: R defaults to 8): the start position (a random Chess960 start) and R seeded
    random plies; otherwise the opening book ``book`` (None: the shipped balanced book,
    :mod:`nnue.selfplay.book`), its lines in an order shuffled by ``seed``, cycled when there
    are fewer than pairs. ValueError for two sources at once or a bad file."""
    rng = random.Random(seed)
    if sum(x is not None for x in (openings, book, random_plies)) > 1:
        raise ValueError("--openings, --book and --random-plies exclude each other")
    if openings is None and random_plies is None and not chess960:
        from .book import read_book

        lines = read_book(book)
        order = list(range(len(lines)))
        rng.shuffle(order)
        return [(chess.STARTING_FEN, list(lines[order[i % len(lines)]][0]), False) for i in range(pairs)]
    if book is not None:
        raise ValueError("--book is for standard chess; give --openings or --random-plies with --chess960")
    plies = 0 if openings is not None else (8 if random_plies is None else random_plies)
    fens = read_openings(openings, chess960) if openings is not None else None
    out = []
    for i in range(pairs):
        start = fens[i % len(fens)] if fens else None
        b = make_opening(rng, plies, chess960, start)
        moves = [m.uci() for m in b.move_stack]
        while b.move_stack:
            b.pop()
        out.append((b.fen(), moves, b.chess960))
    return out


def opening_settings(openings, book, random_plies, chess960) -> dict:
    """What match.json records about the openings."""
    if openings is None and random_plies is None and not chess960:
        from .book import book_path

        return {"openings": None, "book": str(book) if book is not None else f"shipped:{book_path().name}",
                "random_plies": 0}
    return {"openings": str(openings) if openings else None, "book": None,
            "random_plies": 0 if openings is not None else (8 if random_plies is None else random_plies)}


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


#: settings a resumed match may change: they decide how games are scheduled, not how they are played
RESUME_FREE = ("concurrency", "in_flight", "move_timeout", "start_timeout")


class MatchInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a match; ``message``: one line naming what is on disk."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


@contextlib.contextmanager
def _sigterm_as_interrupt():
    """SIGTERM raises KeyboardInterrupt in the main thread (as Ctrl-C does) while the block runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


@contextlib.contextmanager
def _signals_held():
    """Ctrl-C and SIGTERM wait until the block ends (in the main thread): a game is recorded in
    the PGN, the tally and the JSON together or not at all."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held = {signal.SIGINT, signal.SIGTERM}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class Recorder:
    """A match's files while it runs: ``match.pgn`` gets each finished game appended (flushed
    and fsynced) as it ends, ``match.json`` is rewritten atomically after it, with every game's
    (pair, colour, A's score, forfeit kind) in ``game_log`` and the PGN's recorded length in
    ``pgn_bytes``. ``status``: "running" (a kill leaves this), "interrupted" (Ctrl-C, SIGTERM) or
    "finished". A rerun with the same settings (:data:`RESUME_FREE` aside) and players resumes:
    the PGN is cut back to ``pgn_bytes`` (a game appended after the last JSON write is played
    again), the tally rebuilt from ``game_log``, and only the games not in it are played.
    Other settings or other players in the same folder: ValueError naming the first difference."""

    def __init__(self, out_dir: Path, settings: dict, players: dict, tally: Tally, live: "_Live"):
        self.out_dir, self.settings, self.players, self.tally, self.view = out_dir, settings, players, tally, live
        self.pgn_path, self.json_path = out_dir / "match.pgn", out_dir / "match.json"
        self.log: list[list] = []  # [pair, colour, A's score, forfeit kind or None]
        self.pgn_bytes = 0
        self.prior_elapsed = 0.0
        self.t0 = time.monotonic()
        self.finished: dict | None = None  # the report of a match that was already finished
        self._pgn = None
        self.resumed_games = 0

    # ------------------------------------------------------------------ start or resume
    def open(self) -> None:
        """Start the files, or take up the ones a previous run of this match left."""
        if self.json_path.exists():
            self._resume()
        elif self.pgn_path.exists():
            raise ValueError(f"{self.pgn_path}: exists without match.json beside it (not a match this command "
                             f"started); remove it or choose another -o DIR")
        else:
            self.out_dir.mkdir(parents=True, exist_ok=True)
            self.write("running")
            self.pgn_path.write_bytes(b"")
        if self.finished is None:
            self._pgn = open(self.pgn_path, "r+b")
            self._pgn.truncate(self.pgn_bytes)
            self._pgn.seek(self.pgn_bytes)

    def _resume(self) -> None:
        try:
            old = json.loads(self.json_path.read_text())
            log, pgn_bytes = old["game_log"], int(old["pgn_bytes"])
            old_settings, old_players = old["settings"], old["players"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{self.json_path}: not a match.json this version can resume ({type(e).__name__}: "
                             f"{e}); remove it or choose another -o DIR") from None
        new_settings = json.loads(json.dumps(self.settings))
        for k in sorted(set(old_settings) | set(new_settings)):
            if k not in RESUME_FREE and old_settings.get(k) != new_settings.get(k):
                raise ValueError(f"{self.out_dir}: holds a match with other settings ({k}: {old_settings.get(k)!r} "
                                 f"there, {new_settings.get(k)!r} now); rerun with its settings to resume, or "
                                 f"choose another -o DIR")
        new_players = json.loads(json.dumps(self.players))
        for side, p in new_players.items():
            old_p = old_players.get(side) if isinstance(old_players, dict) else None
            if isinstance(old_p, dict) and "files" not in old_p:
                p.pop("files", None)  # a match.json written before option files were hashed
            old_files = (old_p.get("files") if isinstance(old_p, dict) else None) or {}
            changed = [f"{side}'s {name} {entry[0]}" for name, entry in p.get("files", {}).items()
                       if name in old_files and old_files[name] != entry]
            if changed:
                raise ValueError(f"{self.out_dir}: holds a match played with other contents of {', '.join(changed)} "
                                 f"(its sha256 differs); choose another -o DIR")
        if old_players != new_players:
            raise ValueError(f"{self.out_dir}: holds a match between other players ({old_players}); "
                             f"choose another -o DIR")
        size = self.pgn_path.stat().st_size if self.pgn_path.exists() else -1
        if size < pgn_bytes:
            raise ValueError(f"{self.pgn_path}: {max(size, 0)} bytes, match.json records {pgn_bytes}: the PGN was "
                             f"cut or removed; cannot resume")
        for p, c, score, kind, *_ in log:
            self._count(p, score, kind)
        self.tally.stopped_at = old.get("stopped_at")
        self.log, self.pgn_bytes = [list(g) for g in log], pgn_bytes
        self.prior_elapsed = float(old.get("elapsed_s", 0.0))
        self.resumed_games = len(log)
        if old.get("status") == "finished":
            self.finished = old

    def todo(self, pairs: int) -> list[tuple[int, int]]:
        """The games (pair, colour) still to play: every one not in the log, or, once the SPRT
        has stopped the match, only the other halves of pairs already begun."""
        done = {(p, c) for p, c, *_ in self.log}
        begun = {p for p, _ in done}
        ids = sorted(begun) if self.tally.stopped_at is not None else range(pairs)
        return [(p, c) for p in ids for c in (0, 1) if (p, c) not in done]

    # ------------------------------------------------------------------ games
    def _count(self, pair: int, score_a: float, kind: str | None) -> bool:
        if kind == "timeout":
            self.tally.timeouts += 1
        elif kind:
            self.tally.crashes += 1
        return self.tally.add(pair, score_a)

    def add(self, pair: int, colour: int, score_a: float, pgn: str, kind: str | None = None,
            sprt_stop: bool = True, reason: str = "") -> bool:
        """Record one finished game: PGN appended and flushed, tally, JSON. True when the SPRT
        has crossed a bound (start no new game). ``reason``: how it ended (checkmate, …)."""
        with _signals_held():
            data = pgn.encode()
            self._pgn.write(data)
            self._pgn.flush()
            os.fsync(self._pgn.fileno())
            self.pgn_bytes += len(data)
            self.log.append([pair, colour, score_a, kind or None, reason])
            stop = False
            if self._count(pair, score_a, kind):
                self.view.show(self.tally)
                stop = sprt_stop and self.tally.crossed()
            self.write("running")
        return stop

    def elapsed(self) -> float:
        return self.prior_elapsed + time.monotonic() - self.t0

    def report(self, status: str) -> dict:
        rep = _report(self.tally, self.settings, self.players, self.elapsed(), self.tally.stopped_at is not None,
                      self.log)
        return dict(rep, status=status, pgn=str(self.pgn_path), json=str(self.json_path),
                    stopped_at=self.tally.stopped_at, pgn_bytes=self.pgn_bytes, game_log=self.log)

    def write(self, status: str) -> dict:
        rep = self.report(status)
        atomic_write_bytes(self.json_path, (json.dumps(rep, indent=2) + "\n").encode())
        return rep

    def close(self, status: str) -> dict:
        """The last JSON write ("finished" or "interrupted"); the PGN cut to what it records."""
        if self.finished is not None:
            return dict(self.finished, resumed_finished=True)
        with _signals_held():
            if self._pgn is not None:
                self._pgn.truncate(self.pgn_bytes)
                self._pgn.close()
                self._pgn = None
            return self.write(status)

    def interrupted(self) -> MatchInterrupted:
        rep = self.close("interrupted")
        return MatchInterrupted(f"interrupted after {rep['games']} finished games ({rep['pairs']} whole pairs): "
                                f"{self.pgn_path} and match.json hold them; rerun the same command to resume")


def game_ends(log) -> dict:
    """How a match's games ended: {"draws": {reason: n}, "decisive": {reason: n}} from the
    game log's (pair, colour, A's score, forfeit kind, reason) entries, most frequent first."""
    out: dict = {"draws": {}, "decisive": {}}
    for _, _, score, _, *rest in log:
        reason = (rest[0] if rest else "") or "?"
        d = out["draws" if score == 0.5 else "decisive"]
        d[reason] = d.get(reason, 0) + 1
    return {k: dict(sorted(v.items(), key=lambda kv: -kv[1])) for k, v in out.items()}


def ends_line(ends: dict) -> str:
    """``ENDS: draws 12 (threefold repetition 5, …); decisive 8 (checkmate 3, …)``"""
    parts = []
    for k in ("draws", "decisive"):
        n = sum(ends[k].values())
        parts.append(f"{k} {n}" + (" (" + ", ".join(f"{r} {v}" for r, v in ends[k].items()) + ")" if n else ""))
    return "ENDS: " + "; ".join(parts)


def _who(p: dict) -> str:
    """A player as the summary names it: the net's path, or the engine with its options and what
    it said about its evaluation."""
    if "net" in p:
        return p["net"]
    extra = {k: v for k, v in p.get("options", {}).items() if k not in ("Threads", "Hash")}
    opts = " " + " ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in extra.items()) \
        if extra else ""
    said = f" ({'; '.join(p['info'])})" if p.get("info") else ""
    return f"{p.get('engine')}{opts}{said}"


def _report(tally: Tally, settings: dict, players: dict, elapsed: float, stopped_early: bool,
            log: list | None = None) -> dict:
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
    ends = game_ends(log or [])
    lines.append(ends_line(ends))
    if players:
        lines.append("PLAYERS: " + "; ".join(f"{k} {_who(v)}" for k, v in players.items()))
    return {"verdict": verdict, "llr": d["llr"], "elo": d["elo"], "elo_ci95": d["elo_ci95"], "ends": ends,
            "penta": list(tally.penta), "games": tally.w + tally.d + tally.l, "pairs": r.pairs,
            "wdl": [tally.w, tally.d, tally.l], "crashes": tally.crashes, "timeouts": tally.timeouts, "sprt": d,
            "sprt_stopped": bool(at), "stop": stop, "players": players, "settings": settings,
            "elapsed_s": round(elapsed, 3), "lines": lines}


# ------------------------------------------------------------------------------- nets, our search
def _net_games(nets: tuple, cfgs: tuple[SearchConfig, SearchConfig], names: tuple[str, str],
               openings: list, games: list[tuple[int, int]], adjudication: Adjudication, in_flight: int, seed: int,
               stop=lambda: False):
    """Play ``games``: (pair, colour) with colour 0: A white, 1: A black; yields (pair, colour,
    A's score, pgn text) as games end."""
    queue = list(games)
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
        yield p, c, score_white if c == 0 else 1 - score_white, g.pgn({"Round": f"{p + 1}.{c + 1}"}), g.reason


def _worker(net_paths, cfgs, names, openings, games, adjudication, in_flight, seed, queue, stop_event):
    import torch

    from nnue.inference import load

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and stops its workers
    torch.set_num_threads(1)
    try:
        nets = tuple(load(p) for p in net_paths)
        for item in _net_games(nets, cfgs, names, openings, games, adjudication, in_flight, seed,
                               stop=stop_event.is_set):
            queue.put(("game", item))
    except BaseException as e:  # reported to the parent, which raises it
        queue.put(("error", f"{type(e).__name__}: {e}"))
    finally:
        queue.put(("done", None))


def net_match(net_a: str | Path, net_b: str | Path, out_dir: str | Path, *, games: int = 200,
              nodes: int = MATCH_NODES, nodes_b: int | None = None, elo0: float = 0.0, elo1: float = 5.0,
              alpha: float = 0.05, beta: float = 0.05, concurrency: int = 1, openings: str | Path | None = None,
              random_plies: int | None = None, book: str | Path | None = None, seed: int = 0,
              chess960: bool = False, in_flight: int = 64,
              adjudication: Adjudication | None = None, search: dict | None = None, sprt_stop: bool = True,
              live: bool = False, model: str = "normalized") -> dict:
    """A paired match between two integer nets (``net.safetensors`` paths; header checks raise
    NetFormatError), both in our MCTS at ``nodes`` simulations per move (``nodes_b`` for B).

    games: the game budget, at most this many (whole pairs: an odd budget plays one game fewer);
    the match stops earlier when the LLR crosses a bound (``sprt_stop``). Openings: see
    :func:`make_openings` (default: the shipped balanced book). Adjudication: default
    :data:`~nnue.selfplay.play.MATCH_ADJUDICATION`. concurrency: worker processes (each loads the
    nets and plays its share of the pairs, ``in_flight`` games at a time with batched leaf
    evals). search: extra :class:`SearchConfig` fields for both sides (backup, priors, …).
    Files (:class:`Recorder`): ``out_dir/match.pgn`` grows by each game as it ends,
    ``out_dir/match.json`` is rewritten atomically after it; a rerun with the same settings
    resumes. Ctrl-C or SIGTERM: both files are left consistent and :class:`MatchInterrupted`
    is raised. Returns the JSON's dict (verdict, llr, elo, elo_ci95, penta (LL..WW), games, wdl,
    pgn, json, status, …)."""
    import torch

    from nnue.inference import load

    net_a, net_b, out_dir = Path(net_a), Path(net_b), Path(out_dir)
    if games < 2:
        raise ValueError(f"games={games}: at least 2 (one pair)")
    if concurrency < 1 or in_flight < 1:
        raise ValueError(f"concurrency={concurrency}, in_flight={in_flight}: at least 1")
    nets = (load(net_a), load(net_b))  # header checks, in this process first
    for net, path in zip(nets, (net_a, net_b)):
        check_searchable(net, path)
    extra = {"contempt": MATCH_CONTEMPT, "fpu": MATCH_FPU, **(search or {})}
    cfgs = (SearchConfig(nodes=nodes, **extra), SearchConfig(nodes=nodes_b or nodes, **extra))
    pairs = games // 2  # the budget: at most `games` games, whole pairs
    ops = make_openings(pairs, openings, random_plies, seed, chess960, book)
    adj = adjudication or MATCH_ADJUDICATION
    names = (f"A:{net_a.parent.name or net_a.name}", f"B:{net_b.parent.name or net_b.name}")
    settings = {"games": games, "pairs_planned": pairs, "nodes": nodes, "nodes_b": nodes_b or nodes,
                "elo0": elo0, "elo1": elo1, "alpha": alpha, "beta": beta, "model": model,
                "concurrency": concurrency, "in_flight": in_flight,
                **opening_settings(openings, book, random_plies, chess960), "seed": seed, "chess960": chess960,
                "adjudication": adj.to_dict(), "search": asdict(cfgs[0]), "sprt_stop": sprt_stop}
    players = {"A": {"net": str(net_a), "sha256": _sha256(net_a)}, "B": {"net": str(net_b), "sha256": _sha256(net_b)}}
    tally = Tally(elo0, elo1, alpha, beta, model)
    view = _Live(live)
    rec = Recorder(out_dir, settings, players, tally, view)
    rec.open()
    if rec.finished is not None:
        return rec.close("finished")
    todo = rec.todo(pairs)
    stopped = [False]  # a resumed match that had stopped plays only its begun pairs' other halves (todo)

    def take(item) -> bool:
        p, c, score, pgn, reason = item
        if rec.add(p, c, score, pgn, sprt_stop=sprt_stop, reason=reason):
            stopped[0] = True
        return stopped[0]

    with _sigterm_as_interrupt():
        try:
            if concurrency == 1:
                old = torch.get_num_threads()
                torch.set_num_threads(1)
                try:
                    for item in _net_games(nets, cfgs, names, ops, todo, adj, in_flight, seed,
                                           stop=lambda: stopped[0]):
                        take(item)
                finally:
                    torch.set_num_threads(old)
            else:
                _net_match_workers((net_a, net_b), cfgs, names, ops, todo, adj, in_flight, seed, concurrency, take)
        except KeyboardInterrupt:
            raise rec.interrupted() from None
        view.show(tally, final=True)
        return rec.close("finished")


def _net_match_workers(net_paths, cfgs, names, ops, todo, adj, in_flight, seed, concurrency, take) -> None:
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue, stop_event = ctx.Queue(), ctx.Event()
    shares = [[g for g in todo if g[0] % concurrency == w] for w in range(concurrency)]
    procs = [ctx.Process(target=_worker, args=(
        tuple(str(p) for p in net_paths), cfgs, names, ops, share, adj,
        max(1, in_flight // concurrency), seed, queue, stop_event), daemon=True) for share in shares]
    for pr in procs:
        pr.start()
    done, error, interrupted = 0, None, False
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
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        stop_event.set()
        for pr in procs:
            if interrupted:
                pr.terminate()
            pr.join(timeout=30)
            if pr.is_alive():
                pr.terminate()
    if error:
        raise RuntimeError(f"match worker failed: {error}")


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
                 beta: float = 0.05, concurrency: int = 1, openings: str | Path | None = None,
                 random_plies: int | None = None, book: str | Path | None = None,
                 seed: int = 0, chess960: bool = False, adjudication: Adjudication | None = None,
                 sprt_stop: bool = True, live: bool = False, model: str = "normalized",
                 options: dict | None = None, options_a: dict | None = None, options_b: dict | None = None,
                 move_timeout: float | None = MOVE_TIMEOUT, start_timeout: float = START_TIMEOUT) -> dict:
    """A paired match between two UCI engines (command lines), ``nodes`` per move or
    ``movetime`` seconds per move, ``concurrency`` games at once (each worker thread runs its
    own pair of engine processes). An engine that crashes or sends an illegal move loses that
    game (counted in ``crashes``; its PGN keeps the moves played) and is restarted; one that
    sends no move within ``move_timeout`` s beyond ``movetime`` (None: wait forever) is hung: it
    loses the game on time (counted in ``timeouts``), is killed and restarted; the match goes on.
    ``start_timeout``: seconds an engine may take for ``uciok``, for ``readyok`` after its options
    and for its first ``go nodes 1``, in the check before the match and at every (re)start.

    Engine options: Threads=1, Hash=16 where the engine has them, then ``options`` (both sides),
    then ``options_a`` / ``options_b`` (one side: e.g. {"EvalFile": "/path/net.nnue"} or
    {"Use NNUE": "false"}); an option the user names must be one the engine declares, with a
    value of its type. Before any game each engine is started once with its options and made
    to play one node (:func:`~nnue.selfplay.engines.probe_engine`): FileNotFoundError (no such
    program), ValueError (not UCI; or the engine rejected its options or net, its own error
    lines cut to the reason; an ``EvalFile`` naming a ``.nnue`` file is read with our own reader
    first, and python-chess's managed options are refused). Its ``info string`` lines (Stockfish: which net it uses) go into the
    players' entries. Writes, resumes and returns as :func:`net_match`."""
    import queue as queue_mod

    import chess.engine

    from .engines import EngineCrash, EngineTimeout, close_engine, open_engine, probe_engine

    out_dir = Path(out_dir)
    if (nodes is None) == (movetime is None):
        raise ValueError("give exactly one of --nodes and --movetime for an engine match")
    if games < 2 or concurrency < 1:
        raise ValueError(f"games={games}, concurrency={concurrency}: need games ≥ 2 and concurrency ≥ 1")
    if move_timeout is not None and not move_timeout > 0:
        raise ValueError(f"--move-timeout {move_timeout}: seconds > 0")
    if not start_timeout > 0:
        raise ValueError(f"--start-timeout {start_timeout}: seconds > 0")
    limit = chess.engine.Limit(nodes=nodes) if nodes is not None else chess.engine.Limit(time=movetime)
    base = {"Threads": 1, "Hash": 16}
    probes = {}  # fail fast, one line, before anything is written
    for side, cmd, own in (("A", engine_a, options_a), ("B", engine_b, options_b)):
        probes[side] = probe_engine(cmd, base, {**(options or {}), **(own or {})}, timeout=start_timeout,
                                    chess960=chess960)
    opts = {side: probes[side]["options"] for side in "AB"}
    cmds = {"A": engine_a, "B": engine_b}
    pairs = games // 2  # the budget: at most `games` games, whole pairs
    ops = make_openings(pairs, openings, random_plies, seed, chess960, book)
    adj = adjudication or MATCH_ADJUDICATION
    names = (f"A:{engine_a}", f"B:{engine_b}")
    settings = {"games": games, "pairs_planned": pairs, "nodes": nodes, "movetime": movetime, "elo0": elo0,
                "elo1": elo1, "alpha": alpha, "beta": beta, "model": model, "concurrency": concurrency,
                **opening_settings(openings, book, random_plies, chess960), "seed": seed, "chess960": chess960,
                "adjudication": adj.to_dict(), "engine_options": opts, "move_timeout": move_timeout,
                "start_timeout": start_timeout, "sprt_stop": sprt_stop}
    players = {s: {"engine": cmds[s], "id": probes[s]["id"], "options": opts[s], "info": probes[s]["info"],
                   "files": _option_files(opts[s])} for s in "AB"}
    tally = Tally(elo0, elo1, alpha, beta, model)
    view = _Live(live)
    rec = Recorder(out_dir, settings, players, tally, view)
    rec.open()
    if rec.finished is not None:
        return rec.close("finished")
    lock = threading.Lock()
    stop = threading.Event()
    halted = threading.Event()  # Ctrl-C or SIGTERM: record nothing more
    work: queue_mod.Queue = queue_mod.Queue()
    for g in rec.todo(pairs):
        work.put(g)
    errors: list[BaseException] = []
    running: list = []  # every engine a worker has open, for the interrupt to close

    def start(side):
        eng = open_engine(cmds[side], opts[side], start_timeout)
        with lock:
            running.append(eng)
        return eng

    def worker():
        engines = {}
        try:
            engines = {s: start(s) for s in "AB"}
            while not stop.is_set() and not halted.is_set():
                try:
                    p, c = work.get_nowait()
                except queue_mod.Empty:
                    return
                wn, bn = ("A", "B") if c == 0 else ("B", "A")
                board = _board(ops[p])
                crashed = None
                try:
                    g = play_engine_game(board, engines[wn], engines[bn], limit, adj,
                                         names=(names[0], names[1]) if c == 0 else (names[1], names[0]),
                                         tag=(p, c), nodes_label=nodes or 0, move_timeout=move_timeout)
                except EngineCrash as e:
                    if halted.is_set():
                        return
                    who = wn if e.side == chess.WHITE else bn
                    what = "timed out" if isinstance(e, EngineTimeout) else "crashed"
                    g = e.game
                    g.result, g.reason = (-1 if e.side == chess.WHITE else 1), f"engine {who} {what}: {e}"
                    crashed = e.kind
                    close_engine(engines[who], kill=True)
                    engines[who] = start(who)
                score_white = (g.result + 1) / 2
                score_a = score_white if c == 0 else 1 - score_white
                pgn = g.pgn({"Round": f"{p + 1}.{c + 1}"})
                with lock:
                    if halted.is_set():
                        return
                    if rec.add(p, c, score_a, pgn, crashed, sprt_stop=sprt_stop,
                               reason=f"engine {crashed}" if crashed else g.reason):
                        stop.set()
        except Exception as e:  # a (re)start that failed, or a bug: stop the match, report it
            if not halted.is_set():
                errors.append(e)
            stop.set()
        finally:
            for eng in engines.values():
                close_engine(eng)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    with _sigterm_as_interrupt():
        try:
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
        except KeyboardInterrupt:
            with lock:
                halted.set()
                err = rec.interrupted()
                engs = list(running)
            for eng in engs:  # stop the games in flight: their engines are killed and reaped
                close_engine(eng, kill=True)
            for t in threads:
                t.join(5)
            raise err from None
        if errors:
            rec.close("interrupted")
            e = errors[0]
            if isinstance(e, ValueError):  # an engine that did not (re)start: its one line (status 2)
                raise ValueError(f"engine match stopped after {tally.w + tally.d + tally.l} game(s): {e}; the games played "
                                 f"are kept in {out_dir}: rerun into it to resume") from None
            raise RuntimeError(f"engine match stopped: {type(e).__name__}: {e}")
        view.show(tally, final=True)
        return rec.close("finished")
