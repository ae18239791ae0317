"""The kernel benchmarks run end to end at toy sizes, so the GPU script can't fail on a typo.

On CPU with TRITON_INTERPRET=1 the Triton backend runs through the interpreter too (timings
meaningless, code paths the same as on CUDA: speedups, targets, the block-size sweep)."""
from __future__ import annotations

import importlib

import pytest
from tests.kernels.kernel_testing import INTERPRETED


@pytest.fixture
def bench():
    """The benchmarks as installed (``nnue bench NAME`` imports them the same way)."""
    return lambda name: importlib.import_module(f"nnue.bench.{name}")


def test_bench_sparse_ft_smoke(bench, tmp_path):
    mod = bench("bench_sparse_ft")
    backends = "torch,triton" if INTERPRETED else "torch"
    out = tmp_path / "sparse_ft.json"
    r = mod.main(["--device", "cpu", "--batch", "5", "--features", "40", "--hidden", "8", "--active", "4",
                  "--reps", "1", "--warmup", "0", "--copy-mib", "4", "--dtypes", "fp32,bf16",
                  "--backends", backends, "--out", str(out)] + (["--sweep"] if INTERPRETED else []))
    assert out.exists() and len(r["results"]) == 6 and "CPU run" in r["note"]
    for res in r["results"]:
        assert res["torch"]["fwd_bwd"]["GB_per_s"] > 0
        if INTERPRETED:
            assert set(res["targets_met"]) == set(mod.SPEED_TARGETS) and res["speedup_triton_vs_torch"]["fwd"] > 0
    if INTERPRETED:
        assert set(r["sweep_fp32"]) == {"screlu", "pairwise_crelu"} and len(r["sweep_fp32"]["screlu"]) == 8


def test_bench_activations_smoke(bench, tmp_path):
    mod = bench("bench_activations")
    backends = "torch,triton" if INTERPRETED else "torch"
    r = mod.main(["--device", "cpu", "--shape", "3,70", "--reps", "1", "--warmup", "0", "--copy-mib", "4",
                  "--backends", backends, "--out", str(tmp_path / "act.json")])
    assert [x["activation"] for x in r["results"]] == list(mod.NAMES) * 2
    assert all(x["torch"]["fwd_bwd"]["GB_per_s"] > 0 for x in r["results"])
