"""Resuming a run whose settings changed (issue 20 item 9): exact, or refused in one line.

Every checkpoint records the run's shape (:func:`run_shape`, ``nnue_forge.run``): positions per
optimiser step (``data.batch_size`` × world size × ``trainer.accumulate_grad_batches``), the
batches trained in the epoch it was saved in, and that epoch's part files. The schedules, the
run's length and the mid-epoch replay (``data.ResumableLoader``: skip the batches already
trained) are all counted in steps and batches of that shape, so :func:`check_resume` refuses a
resume that changes it, and a mid-epoch resume whose data changed (the replay would skip batches
of another shuffle; new data joins at an epoch boundary, so resume from an epoch-end checkpoint,
e.g. ``checkpoints/weights-epochNNNN`` … or let the epoch finish first). A checkpoint whose step
already reaches the run's length is a finished run: nothing to train, and its ``metrics.json`` is
kept (it was rewritten without its validation metrics before).
"""
from __future__ import annotations


def run_shape(trainer) -> dict:
    """The shape of the run a checkpoint is saved in (see the module docstring)."""
    dm = getattr(trainer, "datamodule", None)
    ds = getattr(dm, "train_set", None)
    done = int(trainer.fit_loop.epoch_loop.batch_progress.current.processed)
    return {"batch_size": int(getattr(dm, "batch_size", 0) or 0), "world_size": int(trainer.world_size),
            "accumulate_grad_batches": int(trainer.accumulate_grad_batches), "epoch": int(trainer.current_epoch),
            "batches_done": done,
            "parts": sorted(str(p) for p, _ in ds.parts) if ds is not None and hasattr(ds, "parts") else None}


class ResumeFinished(Exception):
    """The checkpoint already reaches the run's length: nothing to train (args: step, total)."""


def check_resume(ckpt_path, batch_size: int, world_size: int, accumulate: int, total: int,
                 parts: list[str] | None, steps_per_epoch: int) -> None:
    """Refuse (ValueError, one line) a resume from ``ckpt_path`` that changes the run's shape, or
    raise ResumeFinished when its step already reaches ``total``. parts: the training part files
    the resumed run would read now (sorted paths), None when unknown."""
    from .checkpoint import load_ckpt

    ck = load_ckpt(ckpt_path)
    extra = (ck.get("nnue_forge") or {}) if isinstance(ck, dict) else {}
    run = extra.get("run")
    step = int(ck.get("global_step", 0)) if isinstance(ck, dict) else 0
    if run is not None:
        was = (run["batch_size"], run["world_size"], run["accumulate_grad_batches"])
        now = (batch_size, world_size, accumulate)
        if was != now:
            names = ("data.batch_size", "world size (trainer.devices × trainer.num_nodes)",
                     "trainer.accumulate_grad_batches")
            what = "; ".join(f"{n} {a} → {b}" for n, a, b in zip(names, was, now) if a != b)
            raise ValueError(f"ckpt_path={ckpt_path}: the run changed since this checkpoint ({what}): its schedule, "
                             f"length and epoch position are counted in optimiser steps of "
                             f"{was[0] * was[1] * was[2]:,} positions; resume with the old values, or start a "
                             f"new run from its weights with +init_weights={ckpt_path} (fresh schedule)")
        mid = 0 < run["batches_done"] < steps_per_epoch * accumulate
        if mid and parts is not None and run.get("parts") is not None and run["parts"] != parts:
            new = len(set(parts) - set(run["parts"]))
            gone = len(set(run["parts"]) - set(parts))
            raise ValueError(f"ckpt_path={ckpt_path}: saved {run['batches_done']:,} batches into epoch "
                             f"{run['epoch'] + 1}, and the training data changed since ({new} part file(s) new, "
                             f"{gone} gone): the epoch's replay would skip batches of another shuffle; new data "
                             f"joins at an epoch boundary, so resume from a checkpoint saved at the end of an "
                             f"epoch, or with the data as it was")
    if step >= total:
        raise ResumeFinished(step, total)
