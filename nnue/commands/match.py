"""``nnue match``: the parser; the work is in :mod:`nnue.commands.match_run`, imported when the command runs."""
from __future__ import annotations

from nnue.commands.search_args import InOrder, search_args, sprt_args
from nnue.selfplay.limits import MOVE_TIMEOUT, START_TIMEOUT


def add_parser(sub) -> None:
    """Add ``nnue match`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("match", help="paired match with SPRT: two nets in our search, or two UCI engines",
                       description="Play paired games (each opening with both colours) between two of our nets "
                       "(--net A --net B) or two UCI engines (--engine CMD --engine CMD); live line on stderr; "
                       "stops at the SPRT bounds or when --max-games are played; writes DIR/match.pgn and "
                       "DIR/match.json.")
    s.add_argument("--net", action="append", metavar="NET",
                   help="net.safetensors (twice: A, then B; or give two --engine) (default: none)")
    s.add_argument("--engine", action=InOrder, const="engine", dest="engine_events", metavar="CMD",
                   help="UCI engine command (twice: A, then B; or give two --net) (default: none)")
    s.add_argument("--engine-option", action=InOrder, const="option", dest="engine_events", metavar="NAME=VALUE",
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
    s.add_argument("--start-timeout", type=float, default=START_TIMEOUT, metavar="SECONDS",
                   help="an engine must answer uci, take its options (isready: a net loads here) and play its first "
                   "'go nodes 1' within this many seconds each, in the check before the games and at every "
                   "(re)start; raise it for a slow engine (a WASM build, a big net, a loaded machine) "
                   "(default %(default)g)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--book", metavar="FILE", help="an opening book in the shipped book's format (default: the "
                   "shipped book, selfplay/books/balanced.txt: 220 balanced 8-ply lines)")
    g.add_argument("--openings", metavar="FILE", help="FEN/EPD openings instead of the book (default: none)")
    g.add_argument("--random-plies", type=int, default=None, metavar="R",
                   help="random openings of R plies instead of the book (default: none; 8 with --chess960)")
    s.add_argument("--chess960", action="store_true", help="random Chess960 starts (default: off)")
    sprt_args(s)
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
    search_args(s, 0.1, 0.0)  # nnue.selfplay.match.MATCH_CONTEMPT, MATCH_FPU
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import match_run  # the work and its heavy imports, only when the command runs

    return match_run.run(args)
