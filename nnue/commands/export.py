"""``nnue export``: the parser; the work is in :mod:`nnue.commands.export_run`, imported when the command runs."""
from __future__ import annotations

from nnue.commands.common import non_negative, path


def add_parser(sub) -> None:
    """Add ``nnue export`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("export", help="quantise a checkpoint into an integer net",
                       description="Write NETDIR/net.safetensors, NETDIR/net.bin and NETDIR/export.json.")
    s.add_argument("checkpoint", type=path, help="OUT/checkpoints/last.ckpt or a weights-*.safetensors file")
    s.add_argument("-o", "--output", required=True, metavar="NETDIR", type=path,
                   help="output folder (created; its files are written atomically)")
    s.add_argument("--clip", action="store_true",
                   help="clip values that would overflow, and report them (default: refuse such a net)")
    s.add_argument("--data", default=None, type=path, help="dataset for the float-vs-int cross-check "
                   "(default: the checkpoint's training data)")
    s.add_argument("--positions", type=non_negative, default=20000, metavar="N",
                   help="validation positions read: half calibrate the L1 bias correction, half "
                        "cross-check (default 20000; 0: neither)")
    s.add_argument("--no-bias-correction", action="store_true",
                   help="round L1's bias as is, without folding in the mean rounding error of L1's "
                        "weights (default: corrected)")
    s.add_argument("--alpha", type=float, default=None, help="residual nets: α of eval = base + α·net, "
                   "a multiple of 1/256 (default: the run's model.alpha, 0.5)")
    s.add_argument("--base", choices=["material", "stockfish-classical"], default=None,
                   help="residual nets: the base (default: the training data's base_eval annotation)")
    s.add_argument("--max-bytes", type=non_negative, default=None, metavar="N",
                   help="refuse a net.safetensors over N bytes (default: the run's model.max_bytes; none)")
    s.add_argument("--json", action="store_true", help="print one JSON object (default: text)")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.commands import export_run  # the work and its heavy imports, only when the command runs

    return export_run.run(args)
