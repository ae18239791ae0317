"""``nnue train``, the work: check the overrides as the run will compose them
(:func:`nnue.trainer.checks.check_train_args`: one line of error instead of a Hydra traceback and a half-made
output folder), then start the Hydra entry point :func:`nnue.trainer.train.main`. The parser entry and the help are :mod:`nnue.commands.train`."""
from __future__ import annotations

import importlib.util
import sys

import __main__

import nnue.ddp_child
from nnue.commands.common import EXIT_BAD_INPUT
from nnue.trainer.checks import check_train_args
from nnue.trainer import train as trainer_train


def run_argv(argv: list[str]) -> int:
    """``nnue train OVERRIDES``: refuse bad overrides in one line (status 2), else train."""
    err = check_train_args(argv)
    if err:
        print(f"nnue train: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    # what Lightning's DDP launcher re-runs for ranks 1..N-1 on one machine: "python -m
    # <__main__'s module>" or "python <argv[0]>" with argv[1:] (issue 20 item 10: it started
    # "python <cwd>/nnue train", or "python -m nnue.cli OVERRIDES" without "train"): both name
    # nnue.ddp_child, which runs this same Hydra entry point
    sys.argv = [nnue.ddp_child.__file__, *argv]
    __main__.__spec__ = importlib.util.find_spec("nnue.ddp_child")
    from nnue.trainer.callbacks import SweepInterrupted

    try:
        trainer_train.main()  # the Hydra entry point (looked up here, so that a test can stand in for it)
    except SweepInterrupted as e:  # one line, 130 / 143, whatever the launcher and the sweeper
        print(f"nnue train: {e.line()}", file=sys.stderr)
        return 128 + int(e.signum)
    return 0
