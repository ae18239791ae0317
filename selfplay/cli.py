"""The self-play sub-commands of ``nnue``: sprt, selfplay, match, datagen (registered by
:func:`add_parsers`; bad input raises ValueError/FileNotFoundError, which ``nnue`` turns into
one line with status 2)."""
from __future__ import annotations

import argparse
import json
import sys

from .engines import MOVE_TIMEOUT


class _InOrder(argparse.Action):
    """Append (option name, value) to one list, so that ``--engine-option`` is tied to the
    ``--engine`` before it."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, self.dest, None) or [])
        items.append((self.const, values))
        setattr(namespace, self.dest, items)


def _engines(events) -> tuple[list[str], list[dict]]:
    """The ``--engine`` commands in order and each one's ``--engine-option`` settings."""
    from .engines import parse_engine_option

    cmds, opts = [], []
    for kind, value in events or []:
        if kind == "engine":
            cmds.append(value)
            opts.append({})
        elif not cmds:
            raise ValueError(f"--engine-option {value!r}: give it after the --engine it is for")
        else:
            k, v = parse_engine_option(value)
            opts[-1][k] = v
    return cmds, opts


def _penta(text: str) -> list[int]:
    from .sprt import check_penta

    return [int(v) for v in check_penta(text.replace(" ", "").split(","))]


def cmd_sprt(args) -> int:
    from .sprt import sprt

    wdl = tuple(int(v) for v in args.wdl.split(",")) if args.wdl else None
    if wdl is not None and len(wdl) != 3:
        raise ValueError(f"--wdl {args.wdl!r}: three counts W,D,L")
    r = sprt(_penta(args.penta), args.elo0, args.elo1, args.alpha, args.beta, args.model, wdl)
    print(json.dumps(r.to_dict()) if args.json else "\n".join(r.lines()))
    return 0


def _rate(text: str) -> float:
    """'1/8192', '0.001' -> a probability."""
    try:
        if "/" in text:
            a, b = text.split("/")
            v = float(a) / float(b)
        else:
            v = float(text)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"--sample-search {text!r}: a probability such as 1/8192 or 0.0001") from None
    if not 0 <= v <= 1:
        raise ValueError(f"--sample-search {text!r}: a probability in [0, 1]")
    return v


def _search_args(s, contempt: float = 0.0, fpu: float = 0.2) -> None:
    s.add_argument("--backup", default="mean", choices=["mean", "max", "power_mean"],
                   help="MCTS backup operator (power_mean: seed 002, p = 1 + n/100 unless --power-p) "
                   "(default %(default)s)")
    s.add_argument("--power-p", type=float, default=None, metavar="P",
                   help="fixed power-mean exponent (default: none, p = 1 + n/100)")
    s.add_argument("--priors", default="captures", choices=["uniform", "captures", "checks"],
                   help="move priors: uniform, captures and promotions first, or also checks (default %(default)s)")
    s.add_argument("--cpuct", type=float, default=1.5, help="PUCT exploration constant (default %(default)s)")
    s.add_argument("--fpu", type=float, default=fpu, metavar="F",
                   help="first-play urgency reduction: an unvisited move starts at its parent's value minus F "
                   "(default %(default)s)")
    s.add_argument("--contempt", type=float, default=contempt, metavar="C",
                   help="a draw inside the search is worth -C to the side to move at the root, +C to the other "
                   "(value units, v = 2*sigmoid(cp/SCALE) - 1) (default %(default)s)")


def _search(args) -> dict:
    return {"backup": args.backup, "p_fixed": args.power_p, "priors": args.priors, "c_puct": args.cpuct,
            "contempt": args.contempt, "fpu": args.fpu}


def cmd_selfplay(args) -> int:
    from .generate import selfplay
    from .play import parse_adjudication

    if args.openings and args.random_plies is not None:
        raise ValueError("--openings and --random-plies exclude each other (openings are played as given)")
    out = selfplay(args.net, args.output, games=args.games, nodes=args.nodes, threads=args.threads,
                   openings=args.openings, random_plies=0 if args.openings else (8 if args.random_plies is None
                                                                                 else args.random_plies),
                   chess960=args.chess960, adjudication=parse_adjudication(args.adjudicate),
                   sample_rate=_rate(args.sample_search) if args.sample_search else 0.0,
                   games_per_file=args.games_per_file, in_flight=args.in_flight, seed=args.seed,
                   search=_search(args), progress=not args.no_progress)
    if args.json:
        print(json.dumps(out))
    else:
        from .generate import summary_lines

        print("\n".join(summary_lines(out)))
    return 0


def cmd_match(args) -> int:
    from .play import parse_adjudication

    nets = args.net or []
    engines, engine_opts = _engines(args.engine_events)
    if len(nets) + len(engines) != 2 or (nets and engines):
        raise ValueError("give two --net or two --engine")
    from .play import MATCH_ADJUDICATION

    adj = parse_adjudication(args.adjudicate, MATCH_ADJUDICATION)
    common = dict(games=args.games, elo0=args.elo0, elo1=args.elo1, alpha=args.alpha, beta=args.beta,
                  concurrency=args.concurrency, openings=args.openings, book=args.book,
                  random_plies=args.random_plies, seed=args.seed, chess960=args.chess960,
                  adjudication=adj, sprt_stop=not args.no_sprt_stop, live=not args.quiet)
    from .match import MATCH_NODES, MatchInterrupted

    try:
        if nets:
            from .match import net_match

            if args.movetime is not None:
                raise ValueError("--movetime is for --engine matches; our search runs --nodes per move")
            r = net_match(nets[0], nets[1], args.output, nodes=args.nodes or MATCH_NODES, search=_search(args),
                          in_flight=args.in_flight, **common)
        else:
            from .match import engine_match

            r = engine_match(engines[0], engines[1], args.output, nodes=args.nodes, movetime=args.movetime,
                             move_timeout=args.move_timeout or None, options_a=engine_opts[0], options_b=engine_opts[1],
                             **common)
    except MatchInterrupted as e:
        print(f"nnue match: {e.message}", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps({k: v for k, v in r.items() if k not in ("lines", "game_log")}))
    else:
        print("\n".join(r["lines"]))
        print(f"PGN: {r['pgn']}\nJSON: {r['json']}")
    return 0


def cmd_datagen(args) -> int:
    from .datagen import datagen
    from .play import parse_adjudication

    out = datagen(args.engine, args.output, games=args.games, nodes=args.nodes, threads=args.threads,
                  random_plies=args.random_plies, chess960=args.chess960,
                  adjudication=parse_adjudication(args.adjudicate), games_per_file=args.games_per_file,
                  seed=args.seed, progress=not args.no_progress, move_timeout=args.move_timeout or None)
    print(json.dumps(out))
    return 0


def _sprt_args(s) -> None:
    s.add_argument("--elo0", type=float, default=0.0, help="SPRT H0 bound, normalized Elo (default %(default)s)")
    s.add_argument("--elo1", type=float, default=5.0, help="SPRT H1 bound, normalized Elo (default %(default)s)")
    s.add_argument("--alpha", type=float, default=0.05, help="SPRT false-positive rate (default %(default)s)")
    s.add_argument("--beta", type=float, default=0.05, help="SPRT false-negative rate (default %(default)s)")


def add_parsers(sub) -> None:
    """Add sprt, selfplay, match and datagen to the ``nnue`` sub-parsers ``sub``."""
    s = sub.add_parser("sprt", help="SPRT result (LLR, Elo ± CI) from pentanomial counts",
                       description="Compute the GSPRT LLR, logistic Elo with its 95%% interval and the verdict "
                       "from pentanomial pair counts (normalized-Elo bounds, as fishtest/OpenBench/fastchess; "
                       "see nnue.selfplay.sprt).")
    s.add_argument("--penta", required=True, metavar="LL,LD,DD,WD,WW",
                   help="pair counts, LL (both games lost) first (required)")
    _sprt_args(s)
    s.add_argument("--model", default="normalized", choices=["normalized", "logistic"],
                   help="what the Elo bounds mean: normalized Elo or logistic Elo (default %(default)s)")
    s.add_argument("--wdl", metavar="W,D,L", help="game counts, printed beside GAMES when given (default: none)")
    s.add_argument("--json", action="store_true",
                   help="one JSON object: llr, elo, elo_ci95, verdict, … (default: text)")
    s.set_defaults(func=cmd_sprt)

    s = sub.add_parser("selfplay", help="self-play games of a net in our MCTS, as .plain dumps",
                       description="Play NET against itself in our MCTS and write Stockfish .plain dumps "
                       "(complete files only: temporary name, then rename; a rerun resumes).")
    s.add_argument("net", help="net.safetensors (required)")
    s.add_argument("-o", "--output", required=True, metavar="DIR", help="folder of the dumps and run.json (required)")
    s.add_argument("--games", type=int, required=True, metavar="N", help="games to play (required)")
    s.add_argument("--nodes", type=int, default=64, metavar="K", help="MCTS simulations per move (default %(default)s)")
    s.add_argument("--threads", type=int, default=1, metavar="T",
                   help="worker processes (one core each) (default %(default)s)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--openings", metavar="FILE", help="FEN/EPD start positions, one a line (default: none)")
    g.add_argument("--random-plies", type=int, default=None, metavar="R",
                   help="random legal plies from the start position (default 8)")
    s.add_argument("--chess960", action="store_true", help="random Chess960 start positions (default: off)")
    s.add_argument("--adjudicate", metavar="SPEC", help="win=CP/PLIES,draw=CP/PLIES/MINPLY,maxply=N or none "
                   "(default win=2500/8,draw=8/12/80,maxply=400: our Stockfish self-play's rules)")
    s.add_argument("--sample-search", metavar="RATE", help="also keep visited non-root positions at this rate "
                   "(e.g. 1/8192), scored by their subtree values (default: off)")
    s.add_argument("--games-per-file", type=int, default=25, metavar="G",
                   help="whole games per .plain dump; each file appears (renamed into place) when its last game "
                   "ends (default %(default)s)")
    s.add_argument("--in-flight", type=int, default=64,
                   help="games per worker whose leaves are batched together (default %(default)s)")
    s.add_argument("--seed", type=int, default=0, help="seed of the openings and the search (default %(default)s)")
    s.add_argument("--json", action="store_true", help="print the summary as one JSON object (default: text)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar (default: a bar on a terminal)")
    _search_args(s)
    s.set_defaults(func=cmd_selfplay)

    s = sub.add_parser("match", help="paired match with SPRT: two nets in our search, or two UCI engines",
                       description="Play paired games (each opening with both colours) between two of our nets "
                       "(--net A --net B) or two UCI engines (--engine CMD --engine CMD); live line on stderr; "
                       "stops at the SPRT bounds or when --max-games are played; writes DIR/match.pgn and "
                       "DIR/match.json.")
    s.add_argument("--net", action="append", metavar="NET",
                   help="net.safetensors (twice: A, then B; or give two --engine) (default: none)")
    s.add_argument("--engine", action=_InOrder, const="engine", dest="engine_events", metavar="CMD",
                   help="UCI engine command (twice: A, then B; or give two --net) (default: none)")
    s.add_argument("--engine-option", action=_InOrder, const="option", dest="engine_events", metavar="NAME=VALUE",
                   help="a UCI option for the --engine before it (repeatable), e.g. EvalFile=/path/net.nnue or "
                   "'Use NNUE=false'; both engines start with Threads=1, Hash=16 (default: none)")
    s.add_argument("-o", "--output", default="match-out", metavar="DIR",
                   help="where match.pgn and match.json go; a rerun into it resumes (default %(default)s)")
    s.add_argument("--max-games", "--games", dest="games", type=int, default=200, metavar="N",
                   help="the game budget: stop at an SPRT bound, else after N games (whole pairs) with the "
                   "unfinished verdict (inconclusive, and which way the LLR leans) (default %(default)s)")
    s.add_argument("--nodes", type=int, default=None,
                   help="nodes per move (nets: MCTS simulations, default 64; engines: give --nodes or --movetime)")
    s.add_argument("--movetime", type=float, default=None, metavar="SECONDS",
                   help="engines: time per move (default: none)")
    s.add_argument("--move-timeout", type=float, default=MOVE_TIMEOUT, metavar="SECONDS",
                   help="engines: an engine with no move this long beyond --movetime is hung: it loses the game, "
                   "is killed and restarted (default %(default)g; 0: wait forever)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--book", metavar="FILE", help="an opening book in the shipped book's format (default: the "
                   "shipped book, selfplay/books/balanced.txt: 220 balanced 8-ply lines)")
    g.add_argument("--openings", metavar="FILE", help="FEN/EPD openings instead of the book (default: none)")
    g.add_argument("--random-plies", type=int, default=None, metavar="R",
                   help="random openings of R plies instead of the book (default: none; 8 with --chess960)")
    s.add_argument("--chess960", action="store_true", help="random Chess960 starts (default: off)")
    _sprt_args(s)
    s.add_argument("--no-sprt-stop", action="store_true",
                   help="play every game even past the SPRT bounds (default: stop at a bound)")
    s.add_argument("--concurrency", type=int, default=1,
                   help="nets: worker processes; engines: games at once (default %(default)s)")
    s.add_argument("--in-flight", type=int, default=64,
                   help="nets: games per worker batched together (default %(default)s)")
    s.add_argument("--adjudicate", metavar="SPEC", help="win=CP/PLIES,draw=CP/PLIES/MINPLY,maxply=N or none "
                   "(default win=1000/6,draw=10/8/40,maxply=300 for matches)")
    s.add_argument("--seed", type=int, default=0,
                   help="seed of the book order or random openings (default %(default)s)")
    s.add_argument("--quiet", action="store_true", help="no live line (default: a live line on stderr)")
    s.add_argument("--json", action="store_true", help="print the result as one JSON object (default: text)")
    _search_args(s, 0.1, 0.0)  # nnue.selfplay.match.MATCH_CONTEMPT, MATCH_FPU
    s.set_defaults(func=cmd_match)

    s = sub.add_parser("datagen", help="self-play data from any UCI engine, as .plain dumps",
                       description="Play a UCI engine against itself (Threads=1, Hash=16) at a fixed node count "
                       "and write Stockfish .plain dumps with UCI centipawns (complete files only; a rerun resumes).")
    s.add_argument("--engine", required=True, metavar="PATH",
                   help="engine command, e.g. /usr/games/stockfish (required)")
    s.add_argument("--nodes", type=int, required=True, metavar="N", help="engine nodes per move (required)")
    s.add_argument("--games", type=int, required=True, metavar="G", help="games to play (required)")
    s.add_argument("-o", "--output", required=True, metavar="DIR", help="folder of the dumps and run.json (required)")
    s.add_argument("--threads", type=int, default=1, metavar="T",
                   help="games at once (one engine process each) (default %(default)s)")
    s.add_argument("--random-plies", type=int, default=8, metavar="R",
                   help="random plies from the start position (default %(default)s)")
    s.add_argument("--chess960", action="store_true", help="random Chess960 starts (default: off)")
    s.add_argument("--adjudicate", metavar="SPEC", help="as for selfplay (default win=2500/8,draw=8/12/80,maxply=400)")
    s.add_argument("--games-per-file", type=int, default=25, metavar="G",
                   help="whole games per .plain dump (default %(default)s)")
    s.add_argument("--seed", type=int, default=0, help="seed of the random openings (default %(default)s)")
    s.add_argument("--move-timeout", type=float, default=MOVE_TIMEOUT, metavar="SECONDS",
                   help="an engine with no move this long is hung: its game is dropped and counted, the engine "
                   "killed and restarted (default %(default)g; 0: wait forever)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar (default: a bar on a terminal)")
    s.set_defaults(func=cmd_datagen)
