"""Resuming a run whose settings changed (issue 20 item 9): exact, or refused in one line.

Every checkpoint records the run's shape (:func:`run_shape`, ``nnue_forge.run``): positions per
optimiser step (``data.batch_size`` × world size × ``trainer.accumulate_grad_batches``), the
batches trained in the epoch it was saved in, and that epoch's part files (sorted, and in the stream's order). The schedules, the
run's length and the mid-epoch replay (``data.ResumableLoader``: skip the batches already
trained) are all counted in steps and batches of that shape, so :func:`check_resume` refuses a
resume that changes it. A mid-epoch resume whose data grew since (``pack --watch`` kept packing)
replays the interrupted epoch on the parts it had (the datamodule restricts its stream to them)
and the new parts join at the next epoch, as in a run never interrupted; a part of the epoch
that is gone is refused (the replay would skip batches of another shuffle). A checkpoint whose step
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
            "parts": sorted(str(p) for p, _ in ds.parts) if ds is not None and hasattr(ds, "parts") else None,
            # the epoch's parts in the stream's order: a mid-epoch resume replays the epoch from them
            "listing": [list(x) for x in ds.known_parts()] if ds is not None and hasattr(ds, "known_parts")
            else None}


class ResumeFinished(Exception):
    """The checkpoint already reaches the run's length: nothing to train (args: step, total)."""


def check_resume(ckpt_path, batch_size: int, world_size: int, accumulate: int, total: int,
                 parts: list[str] | None, steps_per_epoch: int) -> list | None:
    """Refuse (ValueError, one line) a resume from ``ckpt_path`` that changes the run's shape, or
    raise ResumeFinished when its step already reaches ``total``. parts: the training part files
    the resumed run would read now (sorted paths), None when unknown.

    Returns the part listing to replay the interrupted epoch from (``PackedStream.restrict_to``)
    when the checkpoint was saved mid-epoch and parts were packed since (``pack --watch``): the
    epoch is replayed on the parts it had, and the new ones join at the next epoch, as they would
    have in a run never interrupted. None when there is nothing to replay. A part of the epoch
    that is gone, or an older checkpoint without the listing, is refused as before."""
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
            if not gone and run.get("listing"):
                if step >= total:
                    raise ResumeFinished(step, total)
                return run["listing"]  # replay the epoch on its own parts; the new ones join at the next
            raise ValueError(f"ckpt_path={ckpt_path}: saved {run['batches_done']:,} batches into epoch "
                             f"{run['epoch'] + 1}, and the training data changed since ({new} part file(s) new, "
                             f"{gone} gone): " + ("a part file the epoch read is gone, so its replay would skip "
                             "batches of another shuffle; resume with the data as it was, or" if gone else
                             "this checkpoint (from an older version) does not list the epoch's parts in order, "
                             "so the epoch cannot be replayed; resume with the data as it was, or") +
                             " from a checkpoint saved at the end of an epoch")
    if step >= total:
        raise ResumeFinished(step, total)
    return None
