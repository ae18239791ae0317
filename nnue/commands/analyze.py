"""``nnue analyze``: the parser; the work is in :mod:`nnue.commands.analyze_run`, imported when the command runs."""
from __future__ import annotations

from nnue.commands.common import add_base_engine_option, non_negative


def add_parser(sub) -> None:
    """Add ``nnue analyze`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("analyze", help="PNG histograms of what a net does on a dataset",
                       description="Write eval histograms per output bucket, eval vs score, L0 block "
                       "sparsity and dead neurons (PNGs + analysis.json) for an integer net on a dataset's "
                       "quiet positions.")
    s.add_argument("net", help="net.safetensors")
    s.add_argument("--dataset", required=True, metavar="DIR", help="a packed dataset (nnue pack)")
    s.add_argument("-o", "--output", required=True, metavar="DIR", help="folder for the PNGs and analysis.json")
    s.add_argument("--limit", type=non_negative, default=100_000, metavar="N", help="positions read (default 100,000)")
    add_base_engine_option(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import analyze_run  # the work and its heavy imports, only when the command runs

    return analyze_run.run(args)
