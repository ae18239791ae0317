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


def test_bench_train_smoke(bench, tmp_path):
    """nnue bench train end to end at toy size: every variant, the baseline and the ratios."""
    mod = bench("bench_train")
    out = tmp_path / "train.json"
    r = mod.run(["--data", "sample", "--batch", "32", "--steps", "2", "--warmup", "1", "--rounds", "2",
                 "--out", str(out), "model.hidden=8", "model.backend=numba", "optimizer.sparse_ft=true", "model.factoriser=true",
                 "--baseline", "model.backend=torch optimizer.sparse_ft=false"])
    assert out.exists() and len(r["runs"]) == 1
    assert r["data"]["source"] == "sample" and r["data"]["positions_packed"] == 4015
    assert r["environment"]["cores_available"] >= 1
    run = r["runs"][0]
    assert set(run["variants"]) == {"lightning", "plain", "naive", "baseline"}
    for v in run["variants"].values():
        assert v["steps"] == 4 and v["positions_per_s_median"] > 0 and v["cpu_s_per_step_median"] >= 0
        assert v["cores_used"] >= 0
        # the machine's other processes while it ran (Linux): a share of the cores, never negative
        assert 0 <= v["other_processes_cores"] <= r["environment"]["cpu_count"] + 0.5
    assert set(run["variants"]["plain"]["phases_ms_median"]) == set(mod.PHASES)
    assert run["config"]["backend_resolved"] == "numba" and run["config"]["sparse_ft"]
    assert run["baseline_config"]["backend_resolved"] == "torch" and not run["baseline_config"]["sparse_ft"]
    assert {"lightning_overhead", "lightning_overhead_cpu", "lightning_own_fraction", "plain_vs_naive",
            "plain_vs_baseline"} <= set(run["ratios"])
    # inside the Lightning run every phase of our code was timed (the wrappers took), and the
    # step is those phases plus Lightning's own time
    li = run["variants"]["lightning"]
    assert set(li["phases_ms_mean"]) == set(mod.PHASES)
    assert all(li["phases_ms_mean"][p] > 0 for p in ("stream", "features", "forward_loss", "backward", "optimizer"))
    assert li["lightning_own_ms_per_step_mean"] > 0
    assert abs(sum(li["phases_ms_mean"].values()) + li["lightning_own_ms_per_step_mean"] - li["step_ms_mean"]) < 1e-6
    assert len(run["load_average_1_5_15min_before"]) == 3


def test_nnue_bench_returns_success_for_a_report(tmp_path):
    """Issue: `nnue bench activations` printed its JSON, then 'internal error' (main returned the dict)."""
    from nnue.commands.bench import run_argv as run_bench

    assert run_bench(["activations", "--device", "cpu", "--shape", "3,70", "--reps", "1", "--warmup", "0",
                      "--copy-mib", "4", "--backends", "torch"]) == 0


def test_bench_cpu_kernels_smoke(bench, tmp_path):
    """nnue bench cpu_kernels at toy size: both cases, before and after timed, the same bits."""
    mod = bench("bench_cpu_kernels")
    out = tmp_path / "k.json"
    r = mod.main(["--batch", "203", "--reps", "1", "--out", str(out)])
    assert out.exists() and r["factor_grad"]["same_bits"] is True
    assert sum(r["layer_stack"]["shape"]["bucket_rows"]) == 203
    for k in ("forward", "grad_x", "grad_w", "total"):
        assert r["layer_stack"][k]["before_ms"] > 0 and r["layer_stack"][k]["after_ms"] > 0
