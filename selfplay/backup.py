"""Backup operators of the MCTS: a node's value from its children's values and visits.

One interface, :class:`Backup`: ``value(q, n, visits) -> float``, where ``q`` are the visited
children's values **from the parent's side-to-move POV** (each in [−1, 1]), ``n`` their visit
counts (≥ 1) and ``visits`` the parent's own visit count (which drives the power-mean schedule).
The search (:mod:`nnue.selfplay.mcts`) recomputes every node on a simulation's path from its
children after each leaf evaluation, so the operator, not a running sum, defines Q.

Operators (``make_backup(name, …)``):

* ``mean``: the visit-weighted mean Σ n_i q_i / Σ n_i (classic MCTS averaging, except that
  the node's own first evaluation is not part of the average once it has children);
* ``max``: max_i q_i (minimax over the visited children);
* ``power_mean`` (seed 002): with q_max = max_i q_i and t_i = (q_i + 1)/(q_max + 1) ∈ [0, 1],
  ``value = (Σ n_i t_i^p / Σ n_i)^(1/p) · (q_max + 1) − 1``, p = ``schedule(visits)``,
  by default p = 1 + visits/100. **Weighting**: each child's t_i^p is weighted by its visit
  count n_i, so a child seen once counts once and a child seen 50 times counts 50 times; with
  equal visits this is seed 002's plain mean of t_i^p. p = 1 is then exactly ``mean``, and as
  p → ∞ the weighted power mean tends to max t_i = 1, i.e. ``max``.

Bounds: every t_i lies in [0, 1], so the power mean lies in [min t_i, 1] and the value in
[min q_i, q_max] ⊂ [−1, 1]. Special cases: q_max = −1 (every child lost) gives −1 without
dividing by zero; all-equal children give that common value; a single child gives its value.
Large p is computed as t_max · (Σ n_i (t_i/t_max)^p / Σ n_i)^(1/p) with t_max = 1, so t_i^p
underflows to 0 harmlessly and never overflows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence


class Backup(Protocol):
    name: str

    def value(self, q: Sequence[float], n: Sequence[int], visits: int) -> float:
        """The parent's value (its side-to-move POV, in [−1, 1]) from its visited children's
        values ``q`` (already negated to the parent's POV) and visit counts ``n``."""


def _check(q: Sequence[float], n: Sequence[int]) -> None:
    if len(q) == 0 or len(q) != len(n):
        raise ValueError(f"backup needs one visit count per child value and at least one child "
                         f"({len(q)} values, {len(n)} counts)")


@dataclass(frozen=True)
class MeanBackup:
    name: str = "mean"

    def value(self, q, n, visits):
        _check(q, n)
        tot = sum(n)
        return max(-1.0, min(1.0, sum(qi * ni for qi, ni in zip(q, n)) / tot))


@dataclass(frozen=True)
class MaxBackup:
    name: str = "max"

    def value(self, q, n, visits):
        _check(q, n)
        return max(q)


def linear_schedule(base: float = 1.0, per_visit: float = 0.01) -> Callable[[int], float]:
    """p(visits) = base + per_visit · visits (seed 002: 1 + n/100)."""
    if base < 1.0 or per_visit < 0:
        raise ValueError(f"power-mean schedule p = {base} + {per_visit}·n: need base ≥ 1 and per_visit ≥ 0")
    return lambda visits: base + per_visit * visits


@dataclass(frozen=True)
class PowerMeanBackup:
    """Seed 002's power-mean backup, visit-weighted (see the module docstring). ``schedule``:
    visits -> p ≥ 1 (default 1 + n/100); ``p`` fixes p instead when given."""

    schedule: Callable[[int], float] = linear_schedule()
    p: float | None = None
    name: str = "power_mean"

    def value(self, q, n, visits):
        _check(q, n)
        p = self.p if self.p is not None else self.schedule(visits)
        if not p >= 1.0:
            raise ValueError(f"power-mean exponent p={p}: need p ≥ 1")
        q_max = max(q)
        denom = q_max + 1.0
        if denom <= 0.0:  # q_max = −1: every child is lost
            return -1.0
        tot = 0.0
        acc = 0.0
        for qi, ni in zip(q, n):
            t = (qi + 1.0) / denom  # in [0, 1]
            acc += ni * (t ** p if t > 0.0 else 0.0)
            tot += ni
        if math.isinf(p):
            m = 1.0
        else:
            m = (acc / tot) ** (1.0 / p)
        v = m * denom - 1.0
        return max(-1.0, min(q_max, v))


BACKUPS = ("mean", "max", "power_mean")


def make_backup(name: str, p_base: float = 1.0, p_per_visit: float = 0.01, p: float | None = None) -> Backup:
    """A backup operator by name: ``mean``, ``max`` or ``power_mean`` (p = p_base +
    p_per_visit·visits, or a fixed ``p``). ValueError for an unknown name or a bad schedule."""
    if name == "mean":
        return MeanBackup()
    if name == "max":
        return MaxBackup()
    if name == "power_mean":
        if p is not None and not p >= 1.0:
            raise ValueError(f"power-mean exponent p={p}: need p ≥ 1")
        return PowerMeanBackup(linear_schedule(p_base, p_per_visit), p)
    raise ValueError(f"backup {name!r}: one of {', '.join(BACKUPS)}")
