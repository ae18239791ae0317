"""``nnue train``: the parser entry and the help; the work is :mod:`nnue.commands.train_run`, imported when
the command runs. Its arguments are Hydra overrides (and Hydra's own flags), so argparse only lists the
command. ``nnue train --help`` is Hydra's help of conf/train.yaml (its config groups and the composed
config), printed by a Hydra entry point with the same config as :func:`nnue.trainer.train.main` that
imports no torch: Hydra and OmegaConf only."""
from __future__ import annotations

import sys

#: Hydra's flags that print something and exit without calling the task function: answered here, light
HELP_FLAGS = ("-h", "--help", "--hydra-help")


def add_parser(sub) -> None:
    """Add ``nnue train`` to the ``nnue`` sub-command parsers ``sub``."""
    sub.add_parser("train", help="train a net (Hydra overrides; 'nnue train --help' for Hydra's help)",
                   add_help=False).set_defaults(run_argv=run_argv)


def _print_help(argv: list[str]) -> int:
    """Hydra's ``--help`` / ``--hydra-help`` for conf/train.yaml. The task name in Hydra's help comes from
    the file of the decorated function: this module is ``train.py``, as :mod:`nnue.trainer.train` is."""
    import warnings

    import hydra

    # Hydra 1.3's deprecation notice for the launcher plugins' schema (filtered as in nnue.trainer.runs)
    warnings.filterwarnings("ignore", message=r"\s*'hydra/launcher/\w+' is validated against ConfigStore schema")

    @hydra.main(version_base="1.3", config_path="pkg://nnue.conf", config_name="train")
    def train(cfg) -> None:  # never called: Hydra prints the help and exits
        raise AssertionError("nnue train --help: Hydra called the task function")

    old = sys.argv
    sys.argv = ["nnue train", *argv]
    try:
        train()
    finally:
        sys.argv = old
    return 0


def run_argv(argv: list[str]) -> int:
    """``nnue train [OVERRIDES]``: Hydra's help, or check the overrides and train."""
    if any(a in HELP_FLAGS for a in argv):
        return _print_help(argv)
    from nnue.commands import train_run  # torch, Lightning, Hydra: only when the command runs

    return train_run.run_argv(argv)
