"""The script Lightning's DDP launcher starts for ranks 1..N-1 of ``nnue train trainer.devices=N``
on one machine: ``python <this file> OVERRIDES... hydra.run.dir=... hydra.job.name=...``.

Lightning re-runs the main program for each further rank (``_SubprocessScriptLauncher``, with
Hydra: ``[sys.executable, "-m", __main__.__spec__.name]`` or ``[sys.executable, abspath(argv[0])]``,
then ``argv[1:]`` and Hydra overrides). ``nnue train`` is a sub-command of a console script (or of
``python -m nnue.cli``), which cannot be re-run that way, so :func:`nnue.commands.train_run.run_argv` names this
module in both (issue 20 item 10): each child runs the same Hydra entry point
(:func:`nnue.trainer.train.main`) with the same overrides; Lightning's ``LOCAL_RANK`` tells it
that it is a child.
"""
import os
import sys

if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0]) == here:
        sys.path.pop(0)  # run as a script: its folder is no import root
    from nnue.trainer.train import main

    main()
