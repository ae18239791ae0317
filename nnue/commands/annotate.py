"""``nnue annotate``: the parser; the work is in :mod:`nnue.commands.annotate_run`, imported when the command runs."""
from __future__ import annotations

from nnue.commands.common import path


def add_parser(sub) -> None:
    """Add ``nnue annotate`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("annotate", help="add base_eval / teacher_eval columns (material, Stockfish static evals)",
                       description="Add int16 columns (centipawns, side-to-move POV) to every part of a "
                       "dataset, atomically: base_eval (--base) and teacher_eval (--teacher). Positions in "
                       "check get a null from Stockfish. A rerun skips the parts already done.")
    s.add_argument("dataset")
    s.add_argument("--base", choices=["material", "stockfish-classical"],
                   help="material: P N B R Q = 100 300 300 500 900; stockfish-classical: Stockfish 15.1's classical eval")
    s.add_argument("--teacher", metavar="TEACHER",
                   help="stockfish-nnue (Stockfish's NNUE static eval over UCI), or the path of a net (NETDIR, "
                        "net.safetensors, a Stockfish 15.1 .nnue or a Stockfish 19 .nnue: evaluated in batches by our integer inference, "
                        "no engine needed) as teacher_eval")
    s.add_argument("--engine", metavar="PATH", help="Stockfish 15.1 binary (default: stockfish on PATH, "
                   "else /usr/games/stockfish)")
    s.add_argument("--jobs", type=int, default=1, metavar="N", help="engine processes in parallel")
    s.add_argument("--batch", type=int, default=4096, metavar="N", help="positions per engine batch")
    s.add_argument("--json", action="store_true")
    s.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import annotate_run  # the work and its heavy imports, only when the command runs

    return annotate_run.run(args)
