"""The sfnnv16 benchmarks (training step, batch evaluation) run end to end at toy sizes, and their
random positions have the counts they claim."""
from __future__ import annotations

import json

import torch

from nnue.bench import bench_infer_sfnnv16, bench_train_sfnnv16
from nnue.inference.kinds.sfnnv16 import INT8_INPUTS, NUM_INPUTS, THREAT_INPUTS


def test_random_indices_counts_and_ranges():
    gen = torch.Generator().manual_seed(0)
    stm, nstm = bench_train_sfnnv16.random_indices(300, gen, halfka=32, threats=60, pawn_pairs=20)
    for t in (stm, nstm):
        v = t[t >= 0]
        assert int(v.max()) < NUM_INPUTS and bool(((t >= 0) | (t == -1)).all())
        counts = [((t >= lo) & (t < hi)).sum(1).float().mean().item()
                  for lo, hi in ((0, THREAT_INPUTS), (THREAT_INPUTS, INT8_INPUTS), (INT8_INPUTS, NUM_INPUTS))]
        assert abs(counts[0] - 60) < 3 and abs(counts[1] - 20) < 2 and abs(counts[2] - 32) < 2
        k = t.clone().long()
        k[k < INT8_INPUTS] = -1
        kb = torch.where(k >= 0, (k - INT8_INPUTS) // 704, -1)
        assert bool((kb.max(1).values == torch.where(kb >= 0, kb, 99).min(1).values).all())   # one king bucket
        for row in k[:20]:   # HalfKA features distinct within a perspective
            r = row[row >= 0]
            assert r.unique().numel() == r.numel()


def test_bench_train_sfnnv16_smoke(tmp_path):
    out = tmp_path / "t.json"
    r = bench_train_sfnnv16.run(["--batch", "48", "--hidden", "64", "--steps", "1", "--warmup", "0",
                                 "--rounds", "2", "--out", str(out)])
    assert json.loads(out.read_text())["speedup_numba_vs_torch"] == r["speedup_numba_vs_torch"] > 0
    for v in ("torch", "numba"):
        assert len(r["variants"][v]["steps_s"]) == 2
        assert set(r["variants"][v]["median_phase_s"]) == {"forward", "backward", "optimizer", "clip"}


def test_bench_infer_sfnnv16_smoke(tmp_path):
    r = bench_infer_sfnnv16.run(["--positions", "40", "--hidden", "64", "--reps", "2",
                                 "--out", str(tmp_path / "i.json")])
    assert r["equal"] and set(r["cases"]) == {"rows_from_memory", "rows_in_cache"}
    for case in r["cases"].values():
        assert case["paths"]["compiled"]["evals_per_cpu_s"] > 0 and 0 < case["fc0_nonzero_input_pairs"] < 1
