"""Before/after of the CPU training-speed changes of issue 23 (round 2), side by side in one
process: the plain training loop of ``nnue bench train`` (:func:`nnue.bench.bench_train.run_plain`,
phase by phase) with today's code ("after") and with the code paths it replaced ("before"), in
rotating order; prints JSON.

"before" forces the paths that still exist for other cases, nothing resurrected:

* layer stacks computing every bucket's rows, then a gather (the path off the CPU), instead of
  one product per bucket in bucket order (:mod:`nnue.kernels.layer_stacks`);
* sfnnv5: the raw (B, 2·(L1 + 8)) accumulators and the pairwise product in torch (the path under
  QAT), instead of the fused kernel pass (``sparse_ft_pair_passthrough``);
* glibc malloc in the steady state of its default dynamic policy (mmap threshold 32 MiB, trim
  threshold 64 MiB: allocations above 32 MiB mapped and unmapped every time), instead of
  :func:`nnue.kernels.host_memory.retain_freed_memory` (no mmap, 2 GiB trim threshold).

    python -m nnue.bench.train_before_after [--cases deep256,chess768,deep1024,sfnnv5] [--out FILE]
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import os
import statistics
import tempfile

import torch

from nnue.bench import bench_train as bt
from nnue.bench import emit, parser

# bench_train.SUITE_CPU's cases, by short name
CASES = dict(zip(("deep256", "chess768", "deep1024", "sfnnv5"), bt.SUITE_CPU))


def _mallopt(retain: bool) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    if retain:
        libc.mallopt(-4, 0)                  # M_MMAP_MAX
        libc.mallopt(-1, (1 << 31) - 1)      # M_TRIM_THRESHOLD
    else:
        libc.mallopt(-4, 65536)              # glibc's DEFAULT_MMAP_MAX
        libc.mallopt(-3, 32 << 20)           # M_MMAP_THRESHOLD: the dynamic policy's ceiling
        libc.mallopt(-1, 64 << 20)           # M_TRIM_THRESHOLD: 2x it, as the dynamic policy sets


@contextlib.contextmanager
def before():
    """The replaced code paths (module docstring), for the duration of the block."""
    from nnue.kernels import layer_stacks, sparse_ft_numba

    def unfused(weight, bias, stm, nstm, activation, passthrough, factor=None, factor_map=None, sparse_grad=False):
        acc = sparse_ft_numba.sparse_ft_pair(weight, bias, stm, nstm, "none", factor, factor_map, sparse_grad)
        W, L = weight.shape[1], weight.shape[1] - passthrough
        halves = []
        for a in (acc[:, :L], acc[:, W:W + L]):
            c = a.clamp(0.0, 1.0)
            halves.append(c[:, :L // 2] * c[:, L // 2:])
        return torch.cat(halves, 1), torch.cat([acc[:, L:W], acc[:, W + L:]], 1)

    saved = (layer_stacks.use_for, sparse_ft_numba.sparse_ft_pair_passthrough)
    layer_stacks.use_for = lambda x: False
    sparse_ft_numba.sparse_ft_pair_passthrough = unfused
    _mallopt(False)
    try:
        yield
    finally:
        layer_stacks.use_for, sparse_ft_numba.sparse_ft_pair_passthrough = saved
        _mallopt(True)


def main(argv=None) -> int:
    p = parser("nnue bench train_before_after", __doc__.splitlines()[0])
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    p.add_argument("--data", help="a packed dataset (default: the bundled sample)")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out")
    a = p.parse_args(argv)
    names = [c for c in a.cases.split(",") if c]
    for c in names:
        if c not in CASES:
            p.error(f"unknown case {c!r}; known: {', '.join(CASES)}")
    _mallopt(True)
    dev = torch.device("cpu")
    result = {"benchmark": "train before/after (issue 23 round 2): plain loop, same process, rotating order",
              "environment": bt.environment(dev), "timing": {"steps": a.steps, "warmup": a.warmup,
                                                             "rounds": a.rounds}, "runs": []}
    result["environment"]["malloc"] = "after: retain; before: glibc default (steady state)"
    with tempfile.TemporaryDirectory() as tmp:
        data = a.data or bt.sample_dataset(tmp)
        for name in names:
            case = CASES[name]
            cfg = bt.compose(case["overrides"] + bt.FAST, data, bt.BATCH, "cpu")
            load = [round(x, 2) for x in os.getloadavg()]
            rows = {"before": ([], [], []), "after": ([], [], [])}
            for r in range(a.rounds):
                for v in (["before", "after"] if r % 2 == 0 else ["after", "before"]):
                    ctx = before() if v == "before" else contextlib.nullcontext()
                    with ctx:
                        w, c, ph = bt.run_plain(cfg, dev, a.steps, a.warmup)
                    rows[v][0].extend(w)
                    rows[v][1].extend(c)
                    rows[v][2].append(ph)
                    gc.collect()
            run = {"name": case["name"], "overrides": case["overrides"] + bt.FAST,
                   "load_average_1_5_15min_before": load,
                   "load_average_1_5_15min_after": [round(x, 2) for x in os.getloadavg()], "variants": {}}
            for v, (w, c, ph) in rows.items():
                row = bt.summarise(w, c, bt.BATCH)
                row["phases_cpu_ms_median"] = {k: statistics.median(x[k][1] for x in ph) for k in ph[0]}
                row["positions_per_s_2_idle_cores_estimate"] = bt.BATCH / (row["cpu_s_per_step_median"] / 2)
                run["variants"][v] = row
            run["after_vs_before_cpu_s_per_step"] = (run["variants"]["before"]["cpu_s_per_step_median"]
                                                     / run["variants"]["after"]["cpu_s_per_step_median"])
            result["runs"].append(run)
    emit(result, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
