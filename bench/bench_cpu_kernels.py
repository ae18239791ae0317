"""CPU training kernels against what they replaced, side by side in one process; prints JSON.

Two cases at the shapes of the README's sfnnv5 step (batch 16,384; each number the median of
--reps alternating runs after a warm-up, in milliseconds, with the numba and torch threads used):

- ``layer_stack``: the first layer stack (1,024 inputs to 8 buckets × 16 outputs), forward, input
  gradient and weight gradient. Before: one torch/BLAS product per bucket (the code
  :mod:`nnue.kernels.layer_stacks` ran until then, kept here as the baseline); after: its numba
  kernels, every bucket in one call.
- ``factor_grad``: the factoriser's gradient of U touched HalfKAv2_hm rows (13,350, what a real
  sfnnv5 batch touches) into its 704 virtual rows, 1,032 columns. Before: a split over 64-column
  blocks, each reading every (U, H) row in 256-byte pieces (kept here as the baseline); after:
  :func:`nnue.kernels.sparse_ft_numba._factor_grad`, by virtual row. Both give the same bits,
  checked before timing.

Inputs are random values at those shapes (rows in bucket order, buckets of real-game sizes
given by --bucket-shares); the kernels' cost does not depend on the values.

    nnue bench cpu_kernels [--batch N] [--reps N] [--out FILE]
"""
from __future__ import annotations

import os
import platform
import statistics
import time

import numba
import numpy as np
import torch
from numba import njit, prange

from nnue.bench import emit, parser
from nnue.kernels import layer_stacks as ls
from nnue.kernels import sparse_ft_numba as ft
from nnue.trainer.model import factor_map

#: the output-bucket shares of four 16,384-position batches of small.binpack (SFPieceCount<8>,
#: fewest pieces first), measured through nnue train's data module
BUCKET_SHARES = (0.055, 0.109, 0.134, 0.12, 0.108, 0.111, 0.132, 0.231)


@njit(parallel=True, cache=True, nogil=True)
def _factor_grad_by_column(values, rows, fmap, gfac, block):
    """The baseline: gfac[fmap[rows[u]]] += values[u], split over column blocks of ``block``."""
    U, H = values.shape
    for c in prange((H + block - 1) // block):
        j0, j1 = c * block, min(H, (c + 1) * block)
        for u in range(U):
            v = fmap[rows[u]]
            if v < 0:
                continue
            for j in range(j0, j1):
                gfac[v, j] += values[u, j]


def _torch_stack(x, w, b, g, offsets, n):
    """The baseline's three products, one torch call per bucket: (forward, grad x, grad w)."""
    y, gx, gw = torch.empty(x.shape[0], n), torch.empty_like(x), torch.empty_like(w)

    def fwd():
        for s in range(len(offsets) - 1):
            a, c = offsets[s], offsets[s + 1]
            torch.addmm(b[s * n:(s + 1) * n], x[a:c], w[s * n:(s + 1) * n].t(), out=y[a:c])

    def grad_x():
        for s in range(len(offsets) - 1):
            a, c = offsets[s], offsets[s + 1]
            torch.mm(g[a:c], w[s * n:(s + 1) * n], out=gx[a:c])

    def grad_w():
        for s in range(len(offsets) - 1):
            a, c = offsets[s], offsets[s + 1]
            torch.mm(g[a:c].t(), x[a:c], out=gw[s * n:(s + 1) * n])
    return fwd, grad_x, grad_w


def _numba_stack(x, w, b, g, offsets, n):
    xn, wn, bn, gn = x.numpy(), w.numpy(), b.numpy(), g.numpy()
    seg, off = ls._segments(offsets, x.shape[0]), np.asarray(offsets, np.int64)
    y, gx = np.empty((x.shape[0], n), np.float32), np.empty_like(xn)
    S = len(offsets) - 1
    parts = np.empty((S * ls._GW_SLICES, n, x.shape[1]), np.float32)
    bparts = np.empty((S * ls._GW_SLICES, n), np.float32)
    return (lambda: ls._stack_fwd(xn, wn, bn, seg, y), lambda: ls._stack_grad_x(gn, wn, seg, gx),
            lambda: ls._stack_grad_w(gn, xn, off, parts, bparts))


def _time(cases: dict, reps: int) -> dict:
    """{name: median ms}, the cases run in turn (order reversed every other repetition)."""
    for f in cases.values():
        f()
    times = {k: [] for k in cases}
    names = list(cases)
    for r in range(reps):
        for k in (names if r % 2 == 0 else names[::-1]):
            t = time.perf_counter()
            cases[k]()
            times[k].append(time.perf_counter() - t)
    return {k: round(statistics.median(v) * 1e3, 3) for k, v in times.items()}


def layer_stack_case(batch: int, reps: int, K: int = 1024, n: int = 16) -> dict:
    gen = torch.Generator().manual_seed(1)
    counts = [int(batch * s) for s in BUCKET_SHARES]
    counts[-1] += batch - sum(counts)
    offsets = [0]
    for c in counts:
        offsets.append(offsets[-1] + c)
    S = len(counts)
    x = torch.rand(batch, K, generator=gen)
    w = torch.randn(S * n, K, generator=gen) * 0.02
    b = torch.randn(S * n, generator=gen) * 0.1
    g = torch.randn(batch, n, generator=gen)
    before = dict(zip(("forward", "grad_x", "grad_w"), _torch_stack(x, w, b, g, offsets, n)))
    after = dict(zip(("forward", "grad_x", "grad_w"), _numba_stack(x, w, b, g, offsets, n)))
    t = _time({**{f"before_{k}": f for k, f in before.items()}, **{f"after_{k}": f for k, f in after.items()}},
              reps)
    out = {"shape": {"batch": batch, "inputs": K, "buckets": S, "outputs_per_bucket": n, "bucket_rows": counts}}
    for k in before:
        out[k] = {"before_ms": t[f"before_{k}"], "after_ms": t[f"after_{k}"],
                  "speedup": round(t[f"before_{k}"] / t[f"after_{k}"], 2)}
    tb = sum(t[f"before_{k}"] for k in before)
    ta = sum(t[f"after_{k}"] for k in before)
    out["total"] = {"before_ms": round(tb, 3), "after_ms": round(ta, 3), "speedup": round(tb / ta, 2)}
    return out


def factor_grad_case(reps: int, U: int = 13350, H: int = 1032) -> dict:
    rng = np.random.default_rng(2)
    fmap = factor_map("halfkav2_hm", 22528).numpy()
    V = int(fmap.max()) + 1
    rows = np.sort(rng.choice(fmap.shape[0], U, replace=False)).astype(np.int64)
    values = rng.standard_normal((U, H)).astype(np.float32)
    gfac = np.zeros((V, H), np.float32)

    def before():
        gfac[:] = 0.0
        _factor_grad_by_column(values, rows, fmap, gfac, 64)

    before()
    same = bool(np.array_equal(gfac, ft._factor_grad(values, rows, fmap, V)))
    t = _time({"before": before, "after": lambda: ft._factor_grad(values, rows, fmap, V)}, reps)
    return {"shape": {"touched_rows": U, "virtual_rows": V, "columns": H}, "same_bits": same,
            "before_ms": t["before"], "after_ms": t["after"], "speedup": round(t["before"] / t["after"], 2)}


def main(argv=None):
    p = parser("nnue bench cpu_kernels", __doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=16384, help="positions of the layer-stack case")
    p.add_argument("--reps", type=int, default=15, help="timed repetitions of each variant")
    p.add_argument("--out", help="also write the JSON here")
    a = p.parse_args(argv)
    load = os.getloadavg()
    report = {
        "benchmark": "cpu_kernels: CPU training kernels against what they replaced, in one process",
        "environment": {"machine": platform.machine(), "cpu_count": os.cpu_count(), "numba_threads":
                        numba.get_num_threads(), "torch_threads": torch.get_num_threads(),
                        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"), "torch": torch.__version__},
        "load_average_1_5_15min_before": [round(x, 2) for x in load],
        "layer_stack": layer_stack_case(a.batch, a.reps),
        "factor_grad": factor_grad_case(a.reps),
    }
    report["load_average_1_5_15min_after"] = [round(x, 2) for x in os.getloadavg()]
    emit(report, a.out)
    return report
