"""Backup operators: hand-computed values, bounds, special cases and the limits p = 1 → mean,
p → ∞ → max."""
from __future__ import annotations

import math
import random

import pytest

from nnue.selfplay.backup import MaxBackup, MeanBackup, PowerMeanBackup, make_backup


def test_hand_computed_values():
    mean, mx = MeanBackup(), MaxBackup()
    assert mean.value([0.5, -0.5], [3, 1], 5) == pytest.approx(0.25)
    assert mx.value([0.5, -0.5], [3, 1], 5) == 0.5
    pm2 = PowerMeanBackup(p=2.0)
    # q_max = 0.5: t = (1, 1/3); mean t² = (1 + 1/9)/2 = 5/9; √(5/9)·1.5 − 1
    assert pm2.value([0.5, -0.5], [1, 1], 3) == pytest.approx(math.sqrt(5 / 9) * 1.5 - 1, abs=1e-12)
    # visit-weighted: (1·1 + 3·1/9)/4 = 1/3
    assert pm2.value([0.5, -0.5], [1, 3], 5) == pytest.approx(math.sqrt(1 / 3) * 1.5 - 1, abs=1e-12)
    # default schedule p = 1 + n/100: n = 100 -> p = 2, the same value as above
    assert make_backup("power_mean").value([0.5, -0.5], [1, 1], 100) == pytest.approx(math.sqrt(5 / 9) * 1.5 - 1)
    # n = 200 -> p = 3: t = (1, 0.2 / 1.2); mean t³ = (1 + (1/6)³)/2
    q = [0.2, -0.8]
    assert make_backup("power_mean").value(q, [2, 2], 200) == pytest.approx(((1 + (1 / 6) ** 3) / 2) ** (1 / 3) * 1.2 - 1)
    # custom schedule
    assert make_backup("power_mean", p_base=2.0, p_per_visit=0.0).value([0.5, -0.5], [1, 1], 7) == \
        pytest.approx(math.sqrt(5 / 9) * 1.5 - 1)


@pytest.mark.parametrize("op", [MeanBackup(), MaxBackup(), PowerMeanBackup(), PowerMeanBackup(p=7.5),
                                PowerMeanBackup(p=math.inf)])
def test_special_cases(op):
    assert op.value([-1.0, -1.0, -1.0], [1, 4, 2], 8) == -1.0  # q_max = -1
    assert op.value([0.3, 0.3, 0.3], [1, 5, 2], 9) == pytest.approx(0.3)  # all equal
    assert op.value([-0.7], [4], 5) == pytest.approx(-0.7)  # one child
    assert op.value([1.0, -1.0], [1, 1], 3) <= 1.0
    with pytest.raises(ValueError):
        op.value([], [], 1)


def test_bounds_on_random_children():
    rng = random.Random(0)
    ops = [MeanBackup(), MaxBackup(), PowerMeanBackup(), PowerMeanBackup(p=50.0)]
    for _ in range(2000):
        k = rng.randint(1, 6)
        q = [rng.choice([-1.0, 1.0, 0.0, rng.uniform(-1, 1)]) for _ in range(k)]
        n = [rng.randint(1, 50) for _ in range(k)]
        for op in ops:
            v = op.value(q, n, sum(n) + 1)
            assert -1.0 <= v <= 1.0 and min(q) - 1e-12 <= v <= max(q) + 1e-12


def test_limits_p1_is_mean_and_large_p_is_max():
    rng = random.Random(1)
    for _ in range(300):
        k = rng.randint(1, 8)
        q = [rng.uniform(-1, 1) for _ in range(k)]
        n = [rng.randint(1, 20) for _ in range(k)]
        assert PowerMeanBackup(p=1.0).value(q, n, 9) == pytest.approx(MeanBackup().value(q, n, 9), abs=1e-12)
        assert PowerMeanBackup(p=1e7).value(q, n, 9) == pytest.approx(max(q), abs=1e-4)
        assert PowerMeanBackup(p=math.inf).value(q, n, 9) == pytest.approx(max(q), abs=1e-12)
        # monotone in p, from the mean up to the max
        vals = [PowerMeanBackup(p=p).value(q, n, 9) for p in (1, 1.5, 2, 4, 16, 256)]
        assert all(a <= b + 1e-12 for a, b in zip(vals, vals[1:]))
    # the schedule: visits -> p moves the value from mean (n small) to max (n large)
    q, n = [0.4, -0.6, 0.1], [3, 3, 3]
    pm = make_backup("power_mean")
    assert pm.value(q, n, 0) == pytest.approx(MeanBackup().value(q, n, 0))
    assert pm.value(q, n, 10 ** 8) == pytest.approx(0.4, abs=1e-5)


def test_bad_config():
    for bad in (dict(name="median"), dict(name="power_mean", p=0.5), dict(name="power_mean", p_base=0.5)):
        with pytest.raises(ValueError):
            make_backup(**bad)
