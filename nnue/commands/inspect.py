"""``nnue inspect``: the parser; the work is in :mod:`nnue.commands.inspect_run`, imported when the command runs."""
from __future__ import annotations

from nnue.commands.common import non_negative, path


def add_parser(sub) -> None:
    """Add ``nnue inspect`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("inspect", help="dataset counts and distributions, FENs back out")
    s.add_argument("dataset", type=path, help="dataset folder written by nnue pack")
    s.add_argument("--fens", type=non_negative, default=0, metavar="N",
                   help="print the first N positions as FEN (default 0)")
    s.add_argument("--json", action="store_true", help="print one JSON object instead of text (default: text)")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import inspect_run  # the work and its heavy imports, only when the command runs

    return inspect_run.run(args)
