"""Training step of Stockfish 19's net (kind ``sfnnv16``) on the CPU, the torch path against the numba fast path, side by side; prints JSON.

One step = forward, loss, backward, optimiser step and weight clip, on the same net and the same
batches for both variants, in one process, in rotating order over ``--rounds`` rounds:

* ``torch``: :class:`~nnue.trainer.kinds.sfnnv16.SFNNv16Net` with ``backend="torch"`` (the
  reference feature transformer, ``embedding_bag`` over the folded and fake-quantised (F, L1 + 8)
  matrix), dense ``torch.optim.AdamW``, the dense ``clip_weights``: what ``model.backend=torch
  optimizer.sparse_ft=false`` trains;
* ``numba``: ``backend="numba"`` (:func:`nnue.kernels.sparse_ft_numba.sparse_ft_pair_passthrough`:
  the factoriser unfolded, both QAT grids, the clamp at 255/256 and the pairwise product in one
  pass, a row-sparse weight gradient), :class:`~nnue.trainer.sparse_optim.RowSparseAdamW` (the
  int8 rows it touches clamped to ±127/256), ``clip_weights(ft_weight=False)``: what
  ``model.backend=numba optimizer.sparse_ft=true`` trains.

The net is the kind's default (L1 1,024, the HalfKA factoriser, QAT on); the loss is the mean
squared error against random targets (its cost is nothing next to the net's). The batches are
random ``sfnnv16`` indices with the counts of real positions (``--halfka``, ``--threats``,
``--pawn-pairs`` per perspective, each count drawn within ±25 %): the HalfKAv2_hm features of one
king bucket per perspective (as in a real position: 704 rows apart from the other buckets), the
threat and pawn-pair features uniform over their ranges (real positions repeat rows more often
than this, so the gathers here miss the cache at least as often as in training). Until the
``sfnnv16`` feature set is registered this is the step's measure; with it, ``nnue bench train
features=sfnnv16 model=sfnnv16 --baseline ...`` measures the same step on real data.

Per variant: median wall and CPU seconds (``time.process_time``, every thread) per step and
per phase, positions/s, and the load average before and after (the machine is shared).

    nnue bench train_sfnnv16 [--batch 16384] [--hidden 1024] [--steps 3] [--rounds 2] [--out FILE]
"""
from __future__ import annotations

import gc
import os
import resource
import statistics
import time

import torch

from nnue.bench import emit, parser

BATCH = 16384
COUNTS = {"halfka": 32, "threats": 60, "pawn_pairs": 20}


def random_indices(B: int, gen: torch.Generator, halfka: int, threats: int, pawn_pairs: int) -> tuple:
    """(stm, nstm) (B, A) int32 sfnnv16 indices, −1 padded at the end of each row: per
    perspective about ``threats`` Full_Threats, ``pawn_pairs`` PP_3Wide and ``halfka``
    HalfKAv2_hm features (each count uniform within ±25 %), the HalfKA ones distinct squares and
    planes of one random king bucket."""
    from nnue.trainer.kinds.sfnnv16 import INT8_INPUTS, THREAT_INPUTS

    def count(c):
        return torch.randint(max(0, c - c // 4), c + c // 4 + 1, (B,), generator=gen)

    A = (halfka + threats + pawn_pairs) * 5 // 4 + 3
    out = []
    for _ in range(2):
        rows = torch.full((B, A), -1, dtype=torch.int32)
        nt, npp, nk = count(threats), count(pawn_pairs), count(halfka).clamp(max=704)
        t = torch.randint(0, THREAT_INPUTS, (B, A), generator=gen, dtype=torch.int32)
        pp = torch.randint(THREAT_INPUTS, INT8_INPUTS, (B, A), generator=gen, dtype=torch.int32)
        kb = torch.randint(0, 32, (B, 1), generator=gen, dtype=torch.int32)
        sq = torch.rand(B, 704, generator=gen).argsort(1)[:, :A].int()
        k = INT8_INPUTS + kb * 704 + sq
        col = torch.arange(A).view(1, -1)
        rows = torch.where(col < nt.view(-1, 1), t, rows)
        rows = torch.where((col >= nt.view(-1, 1)) & (col < (nt + npp).view(-1, 1)), pp, rows)
        start = (nt + npp).view(-1, 1)
        sel = (col >= start) & (col < start + nk.view(-1, 1))
        rows = torch.where(sel, k.gather(1, (col - start).clamp(min=0, max=A - 1)), rows)
        out.append(rows.contiguous())
    return out[0], out[1]


def make_variant(name: str, hidden: int, qat: bool, factoriser: bool, lr: float, seed: int):
    """(model, optimiser, step(stm, nstm, bucket, target) -> phase seconds) of variant ``name``."""
    from nnue.trainer.kinds import sfnnv16 as sf
    from nnue.inference.kinds.sfnnv16 import SCHEME
    from nnue.pipeline.features import factor_map
    from nnue.trainer.sparse_optim import RowSparseAdamW

    torch.manual_seed(seed)
    model = sf.SFNNv16Net(sf.SFNNv16Arch(sf.NUM_INPUTS, hidden), "torch" if name == "torch" else "numba",
                          factor_map("sfnnv16", sf.NUM_INPUTS, partial=True) if factoriser else None)
    if qat:
        model.enable_qat(SCHEME)
    if name == "torch":
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
    else:
        model.sparse_grad = True
        opt = RowSparseAdamW.for_model(model, ft_clip=128.0, lr=lr)

    def step(stm, nstm, bucket, target):
        t = {}
        c0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(stm, nstm, bucket), target)
        c1 = time.perf_counter()
        loss.backward()
        c2 = time.perf_counter()
        opt.step()
        c3 = time.perf_counter()
        model.clip_weights(128.0, 0.992, ft_weight=name == "torch")
        c4 = time.perf_counter()
        t["forward"], t["backward"], t["optimizer"], t["clip"] = c1 - c0, c2 - c1, c3 - c2, c4 - c3
        return t
    return model, opt, step


def run(argv=None) -> dict:
    """The benchmark (module docstring); returns the report it prints."""
    p = parser("nnue bench train_sfnnv16", __doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=BATCH, help="positions per step")
    p.add_argument("--hidden", type=int, default=1024, help="L1 (Stockfish 19 loads 1,024)")
    p.add_argument("--steps", type=int, default=3, help="timed steps per variant and round")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps per variant and round")
    p.add_argument("--rounds", type=int, default=2, help="rounds of both variants, in rotating order")
    p.add_argument("--variants", default="torch,numba", help="comma-separated: torch,numba")
    p.add_argument("--no-qat", action="store_true", help="plain float (the kind trains with QAT by default)")
    p.add_argument("--no-factoriser", action="store_true", help="without the 704 virtual HalfKA rows")
    p.add_argument("--halfka", type=int, default=COUNTS["halfka"], help="HalfKAv2_hm features per perspective")
    p.add_argument("--threats", type=int, default=COUNTS["threats"], help="Full_Threats features per perspective")
    p.add_argument("--pawn-pairs", type=int, default=COUNTS["pawn_pairs"], help="PP_3Wide features per perspective")
    p.add_argument("--threads", type=int, help="torch and numba threads (default: theirs)")
    p.add_argument("--out", help="also write the JSON here")
    a = p.parse_args(argv)
    import numba

    from nnue.kernels.host_memory import retain_freed_memory

    from .bench_train import environment

    if a.threads:
        torch.set_num_threads(a.threads)
        numba.set_num_threads(min(a.threads, numba.config.NUMBA_NUM_THREADS))
    retain_freed_memory()   # as LitNNUE does for CPU training, for both variants alike
    variants = [v for v in a.variants.split(",") if v]
    for v in variants:
        if v not in ("torch", "numba"):
            raise SystemExit(f"bench train_sfnnv16: unknown variant {v!r}")
    qat, fac = not a.no_qat, not a.no_factoriser
    gen = torch.Generator().manual_seed(0)
    nb = a.warmup + a.steps
    batches = []
    for _ in range(nb):
        stm, nstm = random_indices(a.batch, gen, a.halfka, a.threats, a.pawn_pairs)
        batches.append((stm, nstm, torch.randint(0, 8, (a.batch,), generator=gen),
                        torch.randn(a.batch, generator=gen) * 0.5))
    valid = float((batches[0][0] >= 0).sum(1).float().mean())
    load_before = os.getloadavg()
    setups = {v: make_variant(v, a.hidden, qat, fac, 1e-3, 0) for v in variants}
    walls = {v: [] for v in variants}
    cpus = {v: [] for v in variants}
    phases = {v: {} for v in variants}
    for r in range(a.rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for v in order:
            _, _, step = setups[v]
            for i, batch in enumerate(batches):
                gc.collect()
                w0, c0 = time.perf_counter(), time.process_time()
                ph = step(*batch)
                w1, c1 = time.perf_counter(), time.process_time()
                if i >= a.warmup:
                    walls[v].append(w1 - w0)
                    cpus[v].append(c1 - c0)
                    for k, s in ph.items():
                        phases[v].setdefault(k, []).append(s)
    load_after = os.getloadavg()
    res = {}
    for v in variants:
        wall = statistics.median(walls[v])
        res[v] = {"median_step_s": round(wall, 4), "median_cpu_s_per_step": round(statistics.median(cpus[v]), 4),
                  "positions_per_s": round(a.batch / wall, 1),
                  "steps_s": [round(x, 4) for x in walls[v]],
                  "median_phase_s": {k: round(statistics.median(x), 4) for k, x in phases[v].items()}}
    out = {"benchmark": "training step of sfnnv16 (Stockfish 19's net) on the CPU: torch path vs numba fast path",
           "batch": a.batch, "hidden": a.hidden, "qat": qat, "factoriser": fac,
           "indices": {"halfka": a.halfka, "threats": a.threats, "pawn_pairs": a.pawn_pairs,
                       "mean_valid_per_perspective": round(valid, 1),
                       "how": "random: HalfKAv2_hm of one king bucket per perspective, threats and pawn pairs "
                              "uniform over their ranges, each count within +-25 %"},
           "steps_per_round": a.steps, "warmup_per_round": a.warmup, "rounds": a.rounds,
           "variants": res, "environment": environment(torch.device("cpu")),
           "loadavg_before": [round(x, 2) for x in load_before], "loadavg_after": [round(x, 2) for x in load_after],
           "peak_rss_gib_process": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20, 2)}
    if "torch" in res and "numba" in res:
        out["speedup_numba_vs_torch"] = round(res["torch"]["median_step_s"] / res["numba"]["median_step_s"], 2)
        out["cpu_ratio_torch_over_numba"] = round(res["torch"]["median_cpu_s_per_step"]
                                                  / res["numba"]["median_cpu_s_per_step"], 2)
    emit(out, a.out)
    return out


def main(argv=None) -> int:
    run(argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
