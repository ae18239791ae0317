"""``nnue datagen``: the parser; the work is in :mod:`nnue.commands.datagen_run`, imported when the command runs."""
from __future__ import annotations

from nnue.selfplay.limits import MOVE_TIMEOUT, START_TIMEOUT


def add_parser(sub) -> None:
    """Add ``nnue datagen`` to the ``nnue`` sub-command parsers ``sub``."""
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
    s.add_argument("--start-timeout", type=float, default=START_TIMEOUT, metavar="SECONDS",
                   help="an engine must answer uci, take its options (isready: a net loads here) and play its first "
                   "'go nodes 1' within this many seconds each, in the check before the games and at every "
                   "(re)start; raise it for a slow engine (a WASM build, a big net, a loaded machine) "
                   "(default %(default)g)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar (default: a bar on a terminal)")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import datagen_run  # the work and its heavy imports, only when the command runs

    return datagen_run.run(args)
