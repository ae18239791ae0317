"""Per-step clock of a training run (wall, process CPU, load average at each step's end), for the
side-by-side benchmarks against other trainers; no dependency beyond the standard library.

The same :class:`StepClock` times both trainers of ``nnue bench train_vs_npa``: ``nnue train``
through :func:`lightning_callback` (a Hydra ``+callbacks.…`` entry), nnue-pytorch's own ``train.py``
through ``bench/npa_timed_train.py``, which runs it unchanged under nnue-pytorch's interpreter with
one more callback. Either writes :meth:`StepClock.report` as JSON when training ends.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import time


class StepClock:
    """Stamps (wall s, process CPU s of every thread, 1-minute load average) at the start of the
    first step and at the end of every step; :meth:`report` summarises the steps after ``warmup``."""

    def __init__(self, out: str, warmup: int, batch: int):
        self.out, self.warmup, self.batch = out, int(warmup), int(batch)
        self.stamps: list[tuple[float, float, float]] = []

    @staticmethod
    def now() -> tuple[float, float, float]:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return time.perf_counter(), ru.ru_utime + ru.ru_stime, os.getloadavg()[0]

    def start(self) -> None:
        """At the start of training (before the first batch is read): the first step's start."""
        if not self.stamps:
            self.stamps.append(self.now())

    def step_end(self) -> None:
        self.stamps.append(self.now())

    def report(self) -> dict:
        """Steps after the warm-up: positions/s over the window (timed positions / timed wall
        seconds), positions per CPU-second, median step, the load average at each step's end,
        peak RSS of the process; also the warm-up's wall seconds (compilation, first reads)."""
        s = self.stamps
        n = len(s) - 1
        out = {"steps": n, "warmup_steps": self.warmup, "batch": self.batch,
               "warmup_wall_s": round(s[min(self.warmup, n)][0] - s[0][0], 3) if n > 0 else None,
               "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20, 3)}
        w = s[self.warmup:]
        if len(w) >= 2:
            steps = len(w) - 1
            wall, cpu = w[-1][0] - w[0][0], w[-1][1] - w[0][1]
            dts = [b[0] - a[0] for a, b in zip(w, w[1:])]
            cps = [b[1] - a[1] for a, b in zip(w, w[1:])]
            out.update(timed_steps=steps, timed_wall_s=round(wall, 3), timed_cpu_s=round(cpu, 3),
                       positions_per_s=round(steps * self.batch / wall, 1),
                       positions_per_cpu_s=round(steps * self.batch / cpu, 1),
                       median_step_s=round(statistics.median(dts), 4),
                       median_cpu_s_per_step=round(statistics.median(cps), 4),
                       cores_used=round(cpu / wall, 3),
                       step_s=[round(x, 3) for x in dts],
                       load1_at_step_end=[round(x[2], 2) for x in w[1:]])
        return out

    def write(self) -> None:
        tmp = f"{self.out}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self.report(), f, indent=1)
        os.replace(tmp, self.out)


def lightning_callback(out: str, warmup: int, batch: int):
    """A Lightning callback holding a :class:`StepClock`, for ``nnue train``:
    ``+callbacks.clock._target_=nnue.bench.step_timer.lightning_callback +callbacks.clock.out=FILE
    +callbacks.clock.warmup=W +callbacks.clock.batch=B``. Writes the report at the end of training."""
    import pytorch_lightning as pl

    class Clock(pl.Callback):
        def __init__(self):
            self.clock = StepClock(out, warmup, batch)

        def on_train_epoch_start(self, trainer, module):
            self.clock.start()

        def on_train_batch_end(self, trainer, module, outputs, batch_, batch_idx):
            self.clock.step_end()

        def on_train_end(self, trainer, module):
            self.clock.write()

    return Clock()
