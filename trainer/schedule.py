"""Learning-rate and λ (WDL weight) schedules whose unit is the optimiser step.

A schedule is a pure function of the global step and the run's total length in steps (derived
from how the run stops, :func:`total_steps`), so it can never disagree with the run's length.

LR kinds (``conf/scheduler/*.yaml``), each with a linear warm-up over ``warmup_steps`` from 0 and
a floor ``final_lr``:

- ``cosine``: base lr → final_lr along half a cosine over the steps after the warm-up;
- ``linear``: base lr → final_lr in a straight line;
- ``step``: base lr · gamma^k after k superbatches (``step_superbatches`` epochs of
  ``steps_per_epoch`` steps each), never below final_lr (nnue-pytorch's and bullet's StepLR);
- ``constant``: base lr (after the warm-up);
- ``cosine_restarts``: explicit warm restarts: a cosine from base lr to final_lr over
  ``period_steps``, then again, each period ``period_mult`` times the previous one.

**Resuming with another length.** A checkpoint stores the schedule in force (its total and, after
an earlier rebuild, its segment start). When the resumed run's total differs, :meth:`Schedule.rebuilt`
makes a segment that starts at the resumed step with the value in force there and runs to the
floor over the remaining steps in the same shape: the lr continues, then decays, it never jumps
up. ``step`` and ``constant`` do not depend on the total and continue unchanged, and so do warm
restarts (a schedule of their own, chosen explicitly).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

LR_KINDS = ("cosine", "linear", "step", "constant", "cosine_restarts")
SHAPES = ("linear", "cosine", "constant")


def _ramp(shape: str, start: float, end: float, p: float) -> float:
    """start → end at progress p in [0, 1]."""
    p = min(max(p, 0.0), 1.0)
    if shape == "constant":
        return start
    if shape == "cosine":
        return end + (start - end) * 0.5 * (1.0 + math.cos(math.pi * p))
    return start + (end - start) * p


@dataclass
class Schedule:
    """The lr (or any value) at a step. kind: one of :data:`LR_KINDS`; base: the peak value;
    final: the floor; total: the run's length in optimiser steps; warmup_steps: linear warm-up
    from 0; gamma / step_steps: the ``step`` kind's factor and interval in steps; period_steps /
    period_mult: warm restarts. seg_start / seg_value: after a rebuild on resume, the segment
    starts at step seg_start with value seg_value and ramps to final at total."""

    kind: str = "cosine"
    base: float = 1e-3
    final: float = 0.0
    total: int = 1
    warmup_steps: int = 0
    gamma: float = 0.3
    step_steps: int = 1
    period_steps: int = 1
    period_mult: float = 1.0
    seg_start: int | None = None
    seg_value: float | None = None

    def __post_init__(self):
        if self.kind not in LR_KINDS:
            raise ValueError(f"scheduler.kind={self.kind}: one of {', '.join(LR_KINDS)}")

    def _shape(self) -> str:
        return {"cosine": "cosine", "linear": "linear"}.get(self.kind, "constant")

    def __call__(self, step: int) -> float:
        if self.seg_start is not None and step >= self.seg_start:
            span = max(self.total - self.seg_start, 1)
            return _ramp(self._shape(), self.seg_value, self.final, (step - self.seg_start) / span)
        if step < self.warmup_steps:
            return self.base * (step + 1) / self.warmup_steps
        s = step - self.warmup_steps
        if self.kind == "constant":
            return self.base
        if self.kind == "step":
            return max(self.base * self.gamma ** (s // max(self.step_steps, 1)), self.final)
        if self.kind == "cosine_restarts":
            period = float(max(self.period_steps, 1))
            while s >= period:
                s -= period
                period *= max(self.period_mult, 1e-9)
            return _ramp("cosine", self.base, self.final, s / period)
        span = max(self.total - self.warmup_steps, 1)
        return _ramp(self._shape(), self.base, self.final, s / span)

    def rebuilt(self, step: int, total: int) -> Schedule:
        """The schedule for a run resumed at ``step`` whose length is now ``total`` steps."""
        if total == self.total or self.kind in ("step", "constant", "cosine_restarts"):
            return Schedule(**{**asdict(self), "total": total})
        if step < self.warmup_steps and self.seg_start is None:
            return Schedule(**{**asdict(self), "total": total})  # the warm-up does not depend on the total
        return Schedule(**{**asdict(self), "total": total, "seg_start": step, "seg_value": self(step)})

    def state(self) -> dict:
        return asdict(self)


@dataclass
class Ramp:
    """A value going start → end over the run (shape linear | cosine | constant), in steps; used
    for λ. seg_start/seg_value: as :class:`Schedule`."""

    start: float = 0.1
    end: float = 0.1
    shape: str = "linear"
    total: int = 1
    seg_start: int | None = None
    seg_value: float | None = None

    def __post_init__(self):
        if self.shape not in SHAPES:
            raise ValueError(f"wdl_lambda.shape={self.shape}: one of {', '.join(SHAPES)}")

    def __call__(self, step: int) -> float:
        if self.seg_start is not None and step >= self.seg_start:
            span = max(self.total - self.seg_start, 1)
            return _ramp(self.shape, self.seg_value, self.end, (step - self.seg_start) / span)
        return _ramp(self.shape, self.start, self.end, step / max(self.total, 1))

    def rebuilt(self, step: int, total: int) -> Ramp:
        if total == self.total or self.start == self.end:
            return Ramp(**{**asdict(self), "total": total})
        return Ramp(**{**asdict(self), "total": total, "seg_start": step, "seg_value": self(step)})

    def state(self) -> dict:
        return asdict(self)


def lr_schedule(cfg: dict | None, base_lr: float, total: int, steps_per_epoch: int | None) -> Schedule:
    """Build the lr schedule from ``conf/scheduler`` (a dict: kind, warmup_steps, final_lr, gamma,
    step_superbatches, period_steps, period_mult) for a run of ``total`` steps."""
    cfg = dict(cfg or {"kind": "constant"})
    spe = steps_per_epoch or 1
    return Schedule(kind=str(cfg.get("kind", "cosine")), base=float(base_lr),
                    final=float(cfg.get("final_lr", 0.0) or 0.0), total=int(total),
                    warmup_steps=int(cfg.get("warmup_steps", 0) or 0), gamma=float(cfg.get("gamma", 0.3)),
                    step_steps=int(cfg.get("step_superbatches", 1)) * spe,
                    period_steps=int(cfg.get("period_steps") or spe), period_mult=float(cfg.get("period_mult", 1.0)))


def check_scheduler_cfg(cfg: dict | None) -> None:
    """Raise ValueError naming the first bad ``scheduler.*`` value."""
    if not cfg:
        return
    known = {"kind", "warmup_steps", "final_lr", "gamma", "step_superbatches", "period_steps", "period_mult"}
    for k in cfg:
        if k not in known:
            raise ValueError(f"scheduler.{k}: unknown key; known: {', '.join(sorted(known))}")
    if cfg.get("kind", "cosine") not in LR_KINDS:
        raise ValueError(f"scheduler.kind={cfg.get('kind')}: one of {', '.join(LR_KINDS)}")
    for k, lo in (("warmup_steps", 0), ("step_superbatches", 1)):
        v = cfg.get(k, lo)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"scheduler.{k}={v}: an integer ≥ {lo}")
    v = cfg.get("period_steps")
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
        raise ValueError(f"scheduler.period_steps={v}: an integer ≥ 1 (or null: one epoch)")
    for k, lo, hi in (("final_lr", 0.0, None), ("gamma", 0.0, 1.0), ("period_mult", 1.0, None)):
        v = cfg.get(k)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < lo or (hi is not None and v > hi):
            raise ValueError(f"scheduler.{k}={v}: a number in {lo}..{hi if hi is not None else '∞'}")


def total_steps(trainer_cfg: dict, steps_per_epoch: int) -> int:
    """The run's length in optimiser steps, from how Lightning will stop it: the smaller of
    ``max_steps`` and ``max_epochs`` × steps per epoch (``limit_train_batches`` and
    ``accumulate_grad_batches`` applied; ``fast_dev_run``: its batch count). Raises ValueError
    when neither is finite (``max_epochs`` -1/null and ``max_steps`` -1/null)."""
    t = dict(trainer_cfg or {})
    spe = int(steps_per_epoch)
    limit = t.get("limit_train_batches")
    if isinstance(limit, bool):
        limit = None
    if isinstance(limit, int):
        spe = min(spe, limit)
    elif isinstance(limit, float):
        spe = int(spe * limit) if limit <= 1.0 else min(spe, int(limit))
    acc = int(t.get("accumulate_grad_batches") or 1)
    spe = math.ceil(spe / acc)
    fdr = t.get("fast_dev_run")
    if fdr:
        return max(min(spe, 1 if fdr is True else int(fdr)), 1)
    candidates = []
    ms, me = t.get("max_steps"), t.get("max_epochs")
    if ms not in (None, -1):
        candidates.append(int(ms))
    if me not in (None, -1):
        candidates.append(int(me) * spe)
    if not candidates:
        raise ValueError("the run has no finite stop: set trainer.max_epochs (≥ 1) or +trainer.max_steps "
                         "(≥ 1); the schedules need the run's length")
    return max(min(candidates), 1)
