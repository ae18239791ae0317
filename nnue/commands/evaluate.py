"""``nnue eval``: the parser; the work is in :mod:`nnue.commands.eval_run`, imported when the command runs."""
from __future__ import annotations

from nnue.commands.common import non_negative, path


def add_parser(sub) -> None:
    """Add ``nnue eval`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("eval", help="evaluate positions with an integer net",
                       description="Print one integer per position: the eval in centipawns, side-to-move POV. "
                       "Positions are checked as nnue pack checks them; a bad one stops with FILE:LINE.")
    s.add_argument("net", type=path, help="net.safetensors, the NETDIR nnue export or import-net wrote it into, "
                   "or an engine's file: a Stockfish 15.1 .nnue or a Stockfish 19 .nnue (evals in UCI "
                   "centipawns, as the engine prints its NNUE evaluation)")
    g = s.add_mutually_exclusive_group(required=True)
    g.add_argument("--fens", metavar="FILE", type=path,
                   help="one position a line ('-' = stdin): a FEN, an EPD line (opcodes after the four "
                        "FEN fields) or 'FEN | score | result' (the FEN part)")
    g.add_argument("--fen", help="a single FEN")
    g.add_argument("--dataset", metavar="DIR", type=path,
                   help="a packed dataset (nnue pack): every row, in file order")
    s.add_argument("--limit", type=non_negative, metavar="N",
                   help="with --dataset: the first N rows only (default: all)")
    s.add_argument("--trace", action="store_true",
                   help="Stockfish nets (sfnnv5: Stockfish 15.1's NNUE eval trace; sfnnv16: Stockfish 19's eval "
                        "output): print what the engine prints for each position, character for character "
                        "(the bucket table, 'NNUE evaluation', 'Final evaluation'); default off")
    s.add_argument("--summary", action="store_true",
                   help="with --dataset: one JSON line (positions, evals/s, mean, Spearman with the score) "
                        "instead of the evals (default off)")
    s.add_argument("--engine", metavar="PATH", default=None,
                   help="residual nets on a Stockfish base: the Stockfish 15.1 binary that computes it "
                        "(default: stockfish on PATH, else /usr/games/stockfish; with --dataset, the "
                        "dataset's base_eval column when it holds that base). Positions without a base "
                        "(in check) print 'none'")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import eval_run  # the work and its heavy imports, only when the command runs

    return eval_run.run(args)
