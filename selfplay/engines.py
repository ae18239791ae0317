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

from nnue.pipeline.constants import MATE, VALUE_NONE

from .limits import MOVE_TIMEOUT, START_TIMEOUT
from .mcts import SearchConfig
from .play import Adjudication, Game, Player


class EngineCrash(Exception):
    """The engine died or broke the protocol during a game (``side``: chess.WHITE/BLACK).
    ``kind``: "crash" (it exited, or sent an illegal or no move) or "timeout" (no ``bestmove``
    within the move timeout: hung)."""

    kind = "crash"

    def __init__(self, side: bool, detail: str, game: "Game | None" = None):
        super().__init__(detail)
        self.side = side
        self.game = game  # the game so far (its moves are kept in the PGN of the forfeit)


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


def parse_engine_option(text: str) -> tuple[str, str]:
    """``NAME=VALUE`` (the name may hold spaces: ``Use NNUE=false``) -> (name, value);
    ValueError otherwise."""
    name, eq, value = text.partition("=")
    if not eq or not name.strip():
        raise ValueError(f"--engine-option {text!r}: NAME=VALUE, e.g. EvalFile=/path/net.nnue or 'Use NNUE=false'")
    return name.strip(), value.strip()


def _uci_options(lines: list[str]) -> dict[str, dict]:
    """The ``option name N type T [default D] [min a max b] [var v]*`` lines of a ``uci``
    answer -> {lower-case name: {"name", "type", "min", "max", "var"}} (UCI names are not
    case-sensitive)."""
    out = {}
    for ln in lines:
        tok = ln.split()
        if len(tok) < 5 or tok[0] != "option" or tok[1] != "name" or "type" not in tok[2:]:
            continue
        t = tok.index("type", 2)
        name = " ".join(tok[2:t])
        rest, cur, vals = tok[t + 1:], None, {"var": []}
        typ = rest[0] if rest else ""
        for w in rest[1:]:
            if w in ("default", "min", "max", "var"):
                cur = w
                if w == "var":
                    vals["var"].append("")
            elif cur == "var":
                vals["var"][-1] = (vals["var"][-1] + " " + w).strip()
            elif cur:
                vals[cur] = (vals.get(cur, "") + " " + w).strip()
        out[name.lower()] = {"name": name, "type": typ, **vals}
    return out


#: what python-chess, which plays every game, does with the options it manages itself: one that
#: names them is refused before the match (python-chess would refuse it when a game starts)
MANAGED = {"uci_chess960": "set from --chess960 for every game", "uci_variant": "always standard chess here",
           "multipv": "one principal variation: a game needs one move", "ponder": "no pondering: engines move in turn"}


def _check_option(cmd: str, spec: dict, value) -> object:
    """An option value as the engine's declared type wants it, checked as python-chess will check
    it when a game starts (:meth:`chess.engine.Option.parse`, managed options); ValueError naming
    the option and why."""
    name, typ = spec["name"], spec["type"]
    if name.lower() in MANAGED:
        raise ValueError(f"engine {cmd!r}: option {name!r} cannot be set: python-chess, which plays the games, "
                         f"manages it ({MANAGED[name.lower()]})")
    if typ == "check":
        v = str(value).strip().lower()
        if v not in ("true", "false"):
            raise ValueError(f"engine {cmd!r}: option {name!r} is a check: true or false, not {value!r}")
        out = v == "true"
    elif typ == "spin":
        try:
            out = int(str(value))
            lo, hi = int(spec.get("min", out)), int(spec.get("max", out))
        except ValueError:
            raise ValueError(f"engine {cmd!r}: option {name!r} is a spin: an integer, not {value!r}") from None
        if not lo <= out <= hi:
            raise ValueError(f"engine {cmd!r}: option {name!r} is {out}, outside its range {lo}..{hi}")
    elif typ == "combo" and str(value) not in spec["var"]:
        raise ValueError(f"engine {cmd!r}: option {name!r} is {value!r}, not one of {', '.join(spec['var'])}")
    elif typ == "button":
        out = None  # pressed: "setoption name N", no value
    else:
        out = str(value)
    try:  # exactly what python-chess's configure will do with it at every game's start
        chess.engine.Option(name, typ, None, None, None, spec["var"] or None).parse(out)
    except chess.engine.EngineError as e:
        raise ValueError(f"engine {cmd!r}: option {name!r}: python-chess, which plays the games, refuses "
                         f"{value!r} ({e})") from None
    return out


def _setoption(name: str, value) -> str:
    """The ``setoption`` line python-chess sends for ``value`` (a checked value of the option's type)."""
    if value is None:
        return f"setoption name {name}"
    return f"setoption name {name} value {str(value).lower() if isinstance(value, bool) else value}"


def _net_files(cmd: str, argv: list[str], user: dict) -> dict[str, dict]:
    """Check every ``EvalFile*`` value the user gave that names a ``.nnue`` file with our own
    reader, before the engine starts: the net kind whose engine reader takes the file's version
    (:func:`nnue.inference.kinds.engine_reader_of`) reads it whole, with every check it makes. A
    relative path is looked up where the engine will look first: the working folder, then the
    engine program's folder. Returns {value: {"version": int, "reader": EngineFile or None (a
    version no kind reads: passed on to the engine, which may read it)}}; ValueError, one line,
    for a missing or unreadable file or one our reader refuses (truncated, damaged: the byte and
    field)."""
    from nnue.inference import kinds
    from nnue.inference.net import NetFormatError

    out = {}
    for k, v in user.items():
        value = str(v)
        if not k.lower().startswith("evalfile") or not value.lower().endswith(".nnue"):
            continue
        p = Path(value)
        prog = Path(shutil.which(argv[0]) or argv[0])
        where = [p] if p.is_absolute() else [p, prog.resolve().parent / p]
        found = next((c for c in where if c.exists()), None)
        if found is None:
            looked = "" if p.is_absolute() else f" (looked in {Path.cwd()} and in the engine's folder {where[1].parent})"
            raise ValueError(f"engine {cmd!r}: option {k}={value}: no such file{looked}")
        try:
            if found.is_dir():
                raise NetFormatError(f"{found}: a folder, not a .nnue file")
            try:
                data = found.read_bytes()
            except OSError as e:
                raise NetFormatError(f"{found}: cannot read: {e.strerror or e}") from None
            if len(data) < 4:
                raise NetFormatError(f"{found}: {len(data)} byte(s), too short for a .nnue file (a 4-byte version "
                                     f"first; we read {kinds.engine_versions('.nnue')})")
            reader = kinds.engine_reader_of(found, data)
            if reader is not None:
                reader.read(found, data)
        except NetFormatError as e:
            raise ValueError(f"engine {cmd!r}: option {k}={value}: not a net we can read: {e}") from None
        out[value] = {"version": int.from_bytes(data[:4], "little"), "reader": reader}
    return out


#: Stockfish's fixed lines around a net it could not load (``Network::verify``): they say nothing
#: of the file, so a refusal quotes the lines between them (the file, and the reason where the
#: engine gives one)
_BOILERPLATE = ("compatible with the engine must be available", "might need to specify the full path",
                "can be downloaded from", "will be terminated now")


def _reason(lines: list[str], values: list[str]) -> list[str]:
    """An engine's error lines cut to the reason: Stockfish's fixed lines left out (all of them
    kept when nothing else is left), the lines that name one of the option ``values`` (a net
    file) first, at most two lines of at most 300 characters."""
    cut = [x.strip() for x in lines if x.strip()]
    kept = [x for x in cut if not any(b in x for b in _BOILERPLATE)] or cut
    named = [x for x in kept if any(v and v in x for v in values)]
    picked = list(dict.fromkeys(named or kept))[:2]
    return [x if len(x) <= 300 else x[:297] + "..." for x in picked]


def probe_engine(cmd: str, options: dict | None = None, user: dict | None = None,
                 timeout: float = START_TIMEOUT, chess960: bool = False) -> dict:
    """Start ``cmd`` once as a raw UCI process and check it before a match, as the games will
    use it: every ``EvalFile`` naming a ``.nnue`` file is read with our own reader first; the
    engine answers ``uci`` with ``uciok``; every option in ``user`` (the ones the user asked for)
    is one it declares, not one python-chess manages, with a value of its type; with
    ``chess960`` it declares ``UCI_Chess960``; with ``options`` and ``user`` set it answers
    ``isready`` and plays ``go nodes 1`` from the start position without exiting and without an
    ``info string ERROR`` line (how Stockfish 15.1 says it could not load its EvalFile, before it
    exits). ``timeout``: seconds for each of ``uciok``, ``readyok`` and ``bestmove`` (the same
    limit :func:`open_engine` gives every game's start).

    Returns {"id": the engine's ``id name``, "options": ``options`` and ``user`` merged under
    the engine's own option names (values of its types; options it lacks among ``options``
    dropped), "info": its ``info string`` lines (Stockfish: "NNUE evaluation using FILE
    enabled" or "classical evaluation enabled")}. Raises FileNotFoundError (no such program),
    ValueError "does not speak UCI", a timeout naming the limit, or the engine's reason for
    refusing its settings (its error lines cut to the reason)."""
    import queue as queue_mod
    import subprocess
    import threading
    import time

    argv = engine_argv(cmd)
    nets = _net_files(cmd, argv, user or {})
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", bufsize=1, start_new_session=True)
    except OSError as e:
        raise ValueError(f"engine {cmd!r} does not speak UCI ({type(e).__name__}: {e})") from None
    lines: queue_mod.Queue = queue_mod.Queue()

    def pump():
        for ln in proc.stdout:
            lines.put(ln.rstrip("\r\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []

    def send(text: str) -> None:
        try:
            proc.stdin.write(text + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def until(word: str) -> bool:
        end = time.monotonic() + timeout
        while True:
            try:
                ln = lines.get(timeout=max(0.0, end - time.monotonic()))
            except queue_mod.Empty:
                return False
            if ln is None:
                return False
            seen.append(ln)
            if ln.split()[:1] == [word]:
                return True

    def quote(picked: list[str]) -> str:
        return " | ".join(repr(x) for x in picked)

    try:
        send("uci")
        if not until("uciok"):
            said = [x for x in seen if x.strip()][:2]
            try:
                code = proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                code = None
            if code is None:
                raise ValueError(f"engine {cmd!r} sent no uciok within {timeout:g} s (the start-up limit, "
                                 f"--start-timeout)" + (f"; it printed {quote(said)}" if said else ""))
            raise ValueError(f"engine {cmd!r} does not speak UCI (it exited (status {code}) without uciok"
                             + (f"; it printed {quote(said)}" if said else "") + ")")
        declared = _uci_options(seen)
        name = next((x.split(None, 2)[2] for x in seen if x.startswith("id name ")), argv[0])
        merged = {}
        for k, v in (options or {}).items():
            if k.lower() in declared:
                merged[declared[k.lower()]["name"]] = _check_option(cmd, declared[k.lower()], v)
        for k, v in (user or {}).items():
            if k.lower() not in declared:
                raise ValueError(f"engine {cmd!r} has no option {k!r} (it has: "
                                 f"{', '.join(d['name'] for d in declared.values()) or 'none'})")
            merged[declared[k.lower()]["name"]] = _check_option(cmd, declared[k.lower()], v)
        if chess960 and "uci_chess960" not in declared:
            raise ValueError(f"engine {cmd!r} has no option UCI_Chess960: it does not play Chess960 (--chess960)")
        start = len(seen)
        for k, v in merged.items():
            send(_setoption(k, v))
        send("isready")
        ready = until("readyok")
        if ready:
            send("ucinewgame")
            send("position startpos")
            send("go nodes 1")
            ready = until("bestmove")
        said = seen[start:]
        errors = [x for x in said if "error" in x.lower() or x.lower().startswith("no such option")]
        if errors or not ready:
            try:  # an engine that prints errors may be on its way out (Stockfish exits at the next go)
                code = proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
            if not errors and code is None:
                waited = "bestmove to 'go nodes 1'" if "readyok" in said else "readyok after its options"
                raise ValueError(f"engine {cmd!r} sent no {waited} within {timeout:g} s (the start-up limit, "
                                 f"--start-timeout)")
            values = [v for v in merged.values() if isinstance(v, str) and len(v) > 3]  # paths, not "16"
            what = _reason(errors, values) if errors else \
                [x for x in said if x.strip() and not x.startswith("info depth")][-2:]
            gone = f"exited (status {code})" if code is not None else ""
            how = ("reported errors" + (f" and {gone}" if gone else "")) if errors else gone
            note = "".join(f"; {v} is a .nnue of version 0x{r['version']:08X}, none we read (we read "
                           f"{_versions()})" if r["reader"] is None else f"; {v} is a {r['reader'].name} (our reader reads it whole)"
                           for v, r in nets.items())
            shown = {k: v for k, v in merged.items() if k not in ("Threads", "Hash")}
            raise ValueError(f"engine {cmd!r} refused its settings {shown or merged}: it {how}"
                             + (f": {quote(what)}" if what else "") + note)
        info = [x.split(None, 2)[2] for x in said if x.startswith("info string ") and len(x.split(None, 2)) > 2]
        return {"id": name, "options": merged, "info": info}
    finally:
        send("quit")
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdin:
            try:
                proc.stdin.close()
            except OSError:
                pass


def _versions() -> str:
    from nnue.inference.kinds import engine_versions

    return engine_versions(".nnue")


def open_engine(cmd: str, options: dict | None = None, timeout: float = START_TIMEOUT) -> chess.engine.SimpleEngine:
    """Start a UCI engine for games and configure ``options`` (values checked by
    :func:`probe_engine`), then wait for ``readyok`` (Stockfish loads its net there).
    ``timeout``: seconds for ``uciok`` and for ``readyok``, the limit the probe used.
    FileNotFoundError: no such program; ValueError: it does not speak UCI (it exits), it sent
    no ``uciok``/``readyok`` within ``timeout`` (naming the limit), or an option was refused."""
    argv = engine_argv(cmd)
    limit = f"within {timeout:g} s (the start-up limit, --start-timeout)"
    try:
        # its own process group: a Ctrl-C at the terminal stops the match, which then quits its engines
        eng = chess.engine.SimpleEngine.popen_uci(argv, timeout=timeout, setpgrp=True,
                                                  stderr=__import__("subprocess").DEVNULL)
    except TimeoutError:
        raise ValueError(f"engine {cmd!r} sent no uciok {limit}") from None
    except (chess.engine.EngineError, chess.engine.EngineTerminatedError, OSError) as e:
        raise ValueError(f"engine {cmd!r} does not speak UCI ({type(e).__name__}: {e or 'no uciok'})") from None
    try:
        for k, v in (options or {}).items():
            if k in eng.options:
                eng.configure({k: v})
        eng.ping()
    except TimeoutError:
        close_engine(eng, kill=True)
        raise ValueError(f"engine {cmd!r} sent no readyok after its options {limit}") from None
    except (chess.engine.EngineError, chess.engine.EngineTerminatedError) as e:
        close_engine(eng, kill=True)
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
    :class:`EngineCrash` naming the side whose engine failed (with the game so far), :class:`EngineTimeout` (a
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
            raise EngineTimeout(side, f"hung at ply {b.ply()}: {e}", game) from None
        except (chess.engine.EngineError, chess.engine.EngineTerminatedError) as e:
            raise EngineCrash(side, f"{type(e).__name__}: {e}", game) from None
        move = res.move
        if move is None or move not in b.legal_moves:
            raise EngineCrash(side, f"illegal or missing move {move}", game)
        cp = uci_score(res.info.get("score"), side)
        record_cp = cp if cp is not None else VALUE_NONE
        game.records.append((b.fen(), b.uci(move), record_cp, b.ply(), side == chess.WHITE))
        game.push(move, None if cp is None else (cp if side == chess.WHITE else -cp))
    return game
