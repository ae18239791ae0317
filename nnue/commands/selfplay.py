"""``nnue selfplay``: the parser; the work is in :mod:`nnue.commands.selfplay_run`, imported when the command runs."""
from __future__ import annotations

from nnue.commands.search_args import search_args


def add_parser(sub) -> None:
    """Add ``nnue selfplay`` to the ``nnue`` sub-command parsers ``sub``."""
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
    search_args(s)
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import selfplay_run  # the work and its heavy imports, only when the command runs

    return selfplay_run.run(args)
