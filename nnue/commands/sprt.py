"""``nnue sprt``: the parser; the work is in :mod:`nnue.commands.sprt_run`, imported when the command runs."""
from __future__ import annotations

from nnue.commands.search_args import sprt_args


def add_parser(sub) -> None:
    """Add ``nnue sprt`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("sprt", help="SPRT result (LLR, Elo ± CI) from pentanomial counts",
                       description="Compute the GSPRT LLR, logistic Elo with its 95%% interval and the verdict "
                       "from pentanomial pair counts (normalized-Elo bounds, as fishtest/OpenBench/fastchess; "
                       "see nnue.selfplay.sprt).")
    s.add_argument("--penta", required=True, metavar="LL,LD,DD,WD,WW",
                   help="pair counts, LL (both games lost) first (required)")
    sprt_args(s)
    s.add_argument("--model", default="normalized", choices=["normalized", "logistic"],
                   help="what the Elo bounds mean: normalized Elo or logistic Elo (default %(default)s)")
    s.add_argument("--wdl", metavar="W,D,L", help="game counts, printed beside GAMES when given (default: none)")
    s.add_argument("--json", action="store_true",
                   help="one JSON object: llr, elo, elo_ci95, verdict, … (default: text)")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import sprt_run  # the work and its heavy imports, only when the command runs

    return sprt_run.run(args)
