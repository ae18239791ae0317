"""``nnue registry``: the parser; the work is :func:`nnue.trainer.registry.cli_registry`, imported when the
command runs."""
from __future__ import annotations


def add_parser(sub) -> None:
    """Add ``nnue registry`` to the ``nnue`` sub-command parsers ``sub``."""
    s = sub.add_parser("registry", help="list, show, promote or roll back the retrain's net versions",
                       description="Read and edit a registry written by 'nnue retrain'.")
    s.add_argument("action", choices=["list", "show", "promote", "rollback"])
    s.add_argument("version", nargs="?", help="NNNN (show: default the champion; promote: required; "
                   "rollback: default the previous champion)")
    s.add_argument("-r", "--registry", default="registry", help="registry folder (default: ./registry)")
    s.add_argument("--json", action="store_true", help="list: one JSON array (each version with its history events); "
                   "show: the version record and gate report as JSON (default: a readable table)")
    s.set_defaults(func=run)


def run(args) -> int:
    from nnue.trainer.registry import cli_registry  # the work, only when the command runs

    return cli_registry(args)
