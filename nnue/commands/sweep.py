"""``nnue sweep report``: the parser; the work is :func:`nnue.trainer.sweep_report.main`, imported when the
command runs."""
from __future__ import annotations

from nnue.commands.common import OneLineParser


def add_parser(sub) -> None:
    """Add ``nnue sweep`` and its sub-command ``report`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("sweep", help="sweep tools: 'nnue sweep report SWEEP_DIR'")
    r = s.add_subparsers(dest="sweep_cmd", required=True, metavar="SUBCOMMAND", parser_class=OneLineParser)
    r = r.add_parser("report", help="one row per job, best first: overrides, val metrics, export audit, evals/s",
                     description="Write SWEEP_DIR's job table, best job first and marked, as Markdown, CSV, JSON "
                                 "and PNG (sweep_report.*); for an Optuna sweep also the best trial's folder and "
                                 "Optuna's own plots (sweep_optuna_*.png).")
    r.add_argument("sweep_dir", help="a sweep folder (hydra.sweep.dir): one sub-folder per job")
    r.add_argument("-o", "--output", metavar="DIR", help="where to write sweep_report.{md,csv,json,png} (default: SWEEP_DIR)")
    r.add_argument("--json", action="store_true", help="print the report (metric, best job, rows) as JSON instead of the table")
    r.add_argument("--metric", help="rank on this metrics.json key (default: the sweep's optimized_metric, else val_loss)")
    r.add_argument("--direction", choices=["minimize", "maximize"],
                   help="default: the Optuna sweeper's direction, else maximize for a Spearman and minimize otherwise")
    r.set_defaults(func=run)


def run(args) -> int:
    from nnue.trainer.sweep_report import main  # the work (matplotlib, optuna), only when the command runs

    return main(args)
