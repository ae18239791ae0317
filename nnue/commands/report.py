"""``nnue report``: the parser; the work is :func:`nnue.trainer.report.cmd_report`, imported when the command runs."""
from __future__ import annotations

from nnue.commands.common import add_base_engine_option


def add_parser(sub) -> None:
    """Add ``nnue report`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("report", help="a training run's metrics, and an exported net's quality on held-out games",
                       description="Final metrics of a run (OUT/metrics.json); with --net, the integer net's "
                       "Spearman with the dataset's scores on held-out games beside a material count.")
    s.add_argument("run", metavar="RUN", help="training output folder (paths.output_dir)")
    s.add_argument("--net", default=None, help="export folder (holds net.safetensors, export.json)")
    s.add_argument("--data", default=None, help="dataset to report on (default: the training data)")
    s.add_argument("--force", action="store_true", help="report a net exported from another run's checkpoint")
    add_base_engine_option(s)
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.trainer.report import cmd_report  # torch, pyarrow: only when the command runs

    return cmd_report(args)
