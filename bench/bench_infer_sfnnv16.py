"""Batch evaluation of Stockfish 19's net (sfnnv16) on one CPU thread: the compiled evaluator against the torch path, from feature indices; prints JSON.

Both compute the engine's internal values of the same positions
(:func:`nnue.inference.kinds.sfnnv16.value_from_indices` with ``backend="compiled"`` and
``backend="torch"``; the bench checks that they are equal), side by side in one process, in
alternating order over ``--reps`` repetitions, one torch thread (the compiled kernel is serial).
Reported: median wall and CPU seconds per call (on a loaded machine the CPU seconds are the
work, the wall seconds include waiting for a core), evaluations per second of each, the ratios,
and the load average.

The net is random at L1 ``--hidden`` with the magnitudes of a trained one (accumulators around
0..255 so that the pairwise products are neither all zero nor all saturated, layer sums around
their shifts); the density of nonzero input pairs of fc_0, which the compiled path skips, is
reported, since it sets part of the compiled path's speed. The positions are random ``sfnnv16``
indices with realistic counts (:func:`nnue.bench.bench_train_sfnnv16.random_indices`: about 32
HalfKAv2_hm features of one king bucket, 60 threats and 20 pawn pairs per perspective), in two
cases: spread uniformly over the rows (``rows_from_memory``: nearly every row read from memory)
and folded onto 1/64 of them (``rows_in_cache``, :func:`hot`); real positions repeat rows (king
buckets, common threats) and lie between the two. The feature encoding from boards is not timed
(it is the feature set's, the same for both paths).

    nnue bench infer_sfnnv16 [--positions 4096] [--hidden 1024] [--reps 5] [--out FILE]
"""
from __future__ import annotations

import os
import statistics
import time

import torch

from nnue.bench import emit, parser


def random_net(hidden: int, seed: int = 0):
    """An :class:`~nnue.inference.kinds.sfnnv16.SFNNv16IntegerNet` of L1 ``hidden`` with trained-like
    magnitudes (module docstring)."""
    from nnue.inference.kinds.sfnnv16 import net as sf

    gen = torch.Generator().manual_seed(seed)
    S = sf.LAYER_STACKS

    def normal(shape, std, mean=0.0, lim=127, dtype=torch.int8):
        return (torch.randn(shape, generator=gen) * std + mean).round().clamp(-lim, lim).to(dtype)

    arch = {"kind": "sfnnv16", "feature_set": sf.FEATURE_SET, "feature_hash": "0", "num_inputs": sf.NUM_INPUTS,
            "hidden": hidden, "output_buckets": sf.OUTPUT_BUCKETS, "num_buckets": S, "l1_outputs": sf.FC0_OUTPUTS,
            "l2_outputs": sf.FC1_OUTPUTS, "psqt_buckets": sf.PSQT_BUCKETS, "description": "random (bench)"}
    return sf.SFNNv16IntegerNet(
        arch, sf.SCHEME, ft_bias=normal((hidden,), 60, 90, 32767, torch.int16),
        threat_weight=normal((sf.INT8_INPUTS, hidden), 12),
        threat_psqt=normal((sf.INT8_INPUTS, sf.PSQT_BUCKETS), 3000, 0, 2 ** 31 - 1, torch.int32),
        ft_weight=normal((sf.PSQ_INPUTS, hidden), 40, 0, 32767, torch.int16),
        psqt=normal((sf.PSQ_INPUTS, sf.PSQT_BUCKETS), 3000, 0, 2 ** 31 - 1, torch.int32),
        fc0_bias=normal((S, sf.FC0_OUTPUTS), 3000, 0, 2 ** 31 - 1, torch.int32),
        fc0_weight=normal((S, sf.FC0_OUTPUTS, hidden), 128 / hidden ** 0.5),
        fc1_bias=normal((S, sf.FC1_OUTPUTS), 2000, 0, 2 ** 31 - 1, torch.int32),
        fc1_weight=normal((S, sf.FC1_OUTPUTS, sf.FC1_INPUTS), 10),
        fc2_bias=normal((S, 1), 1000, 0, 2 ** 31 - 1, torch.int32),
        fc2_weight=normal((S, 1, sf.FC2_INPUTS), 20))


def hot(t: torch.Tensor) -> torch.Tensor:
    """The same indices folded onto 1/64 of each range's rows (threats, pawn pairs, one king
    bucket of HalfKAv2_hm), whose weights stay in cache: the other end from uniform rows."""
    from nnue.inference.kinds.sfnnv16 import INT8_INPUTS, THREAT_INPUTS

    t = t.clone()
    for lo, hi, keep in ((0, THREAT_INPUTS, THREAT_INPUTS // 64), (THREAT_INPUTS, INT8_INPUTS, 70),
                         (INT8_INPUTS, None, 704)):
        sel = (t >= lo) & ((t < hi) if hi else True)
        t[sel] = lo + (t[sel] - lo) % keep
    return t


def time_case(net, stm, nstm, bucket, reps: int) -> dict:
    """Both paths on one set of positions, alternating, after a warm-up call that also checks
    that they agree: per path median wall and CPU seconds and evaluations per second of each."""
    from nnue.inference.kinds.sfnnv16 import net as sf

    paths = ("compiled", "torch")
    first = {k: sf.value_from_indices(net, stm, nstm, bucket, backend=k) for k in paths}
    if not torch.equal(first["compiled"], first["torch"]):
        raise SystemExit("bench infer_sfnnv16: the compiled and torch values differ")
    x0 = sf.transform(*(sf.accumulate(net, t)[0] for t in (stm, nstm)))
    times = {k: [] for k in paths}
    cpus = {k: [] for k in paths}
    for r in range(reps):
        for k in (paths if r % 2 == 0 else paths[::-1]):
            t0, c0 = time.perf_counter(), time.process_time()
            sf.value_from_indices(net, stm, nstm, bucket, backend=k)
            times[k].append(time.perf_counter() - t0)
            cpus[k].append(time.process_time() - c0)
    n = stm.shape[0]
    res = {k: {"median_s": round(statistics.median(v), 5), "evals_per_s": round(n / statistics.median(v)),
               "median_cpu_s": round(statistics.median(cpus[k]), 5),
               "evals_per_cpu_s": round(n / statistics.median(cpus[k])),
               "times_s": [round(x, 5) for x in v]} for k, v in times.items()}
    return {"paths": res,
            "speedup_compiled_vs_torch": round(res["torch"]["median_s"] / res["compiled"]["median_s"], 2),
            "cpu_ratio_torch_over_compiled": round(res["torch"]["median_cpu_s"] / res["compiled"]["median_cpu_s"], 2),
            "fc0_nonzero_input_pairs": round(float(((x0[:, 0::2] != 0) | (x0[:, 1::2] != 0)).float().mean()), 3)}


def run(argv=None) -> dict:
    """The benchmark (module docstring); returns the report it prints."""
    p = parser("nnue bench infer_sfnnv16", __doc__.splitlines()[0])
    p.add_argument("--positions", type=int, default=4096, help="positions per call")
    p.add_argument("--hidden", type=int, default=1024, help="L1 (Stockfish 19 loads 1,024)")
    p.add_argument("--reps", type=int, default=5, help="timed calls per path")
    p.add_argument("--out", help="also write the JSON here")
    a = p.parse_args(argv)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return _run(a)
    finally:
        torch.set_num_threads(threads)


def _run(a) -> dict:
    from nnue.inference.kinds.sfnnv16 import net as sf

    from .bench_train_sfnnv16 import COUNTS, random_indices

    net = random_net(a.hidden)
    gen = torch.Generator().manual_seed(1)
    stm, nstm = random_indices(a.positions, gen, **COUNTS)
    bucket = torch.randint(0, sf.LAYER_STACKS, (a.positions,), generator=gen)
    load_before = os.getloadavg()
    cases = {"rows_from_memory": (stm, nstm), "rows_in_cache": (hot(stm), hot(nstm))}
    out = {"benchmark": "sfnnv16 batch evaluation on one CPU thread: compiled vs torch, from indices",
           "positions": a.positions, "hidden": a.hidden, "reps": a.reps,
           "cases": {name: time_case(net, s, n, bucket, a.reps) for name, (s, n) in cases.items()},
           "equal": True, "mean_valid_indices_per_perspective": round(float((stm >= 0).sum(1).float().mean()), 1),
           "net": "random, trained-like magnitudes (module docstring)", "torch_threads": torch.get_num_threads(),
           "cpu_count": os.cpu_count(), "loadavg_before": [round(x, 2) for x in load_before],
           "loadavg_after": [round(x, 2) for x in os.getloadavg()]}
    emit(out, a.out)
    return out


def main(argv=None) -> int:
    run(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
