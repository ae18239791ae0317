"""bench/gpu.sh (issue 23), without a GPU: its syntax, its usage errors, and a dry run that takes every
step on CPU at toy sizes (GPU tests collected, kernel benchmarks on the torch path, bench train's GPU
suite on the CPU fallbacks), so that the script cannot fail on a typo the first time a GPU is lent."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "bench" / "gpu.sh"


def _run(*args, timeout=600):
    env = dict(os.environ, PYTHON=sys.executable)
    env.pop("OUT", None)
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], cwd=REPO, capture_output=True, text=True,
                          env=env, timeout=timeout)


def test_syntax_and_usage():
    assert subprocess.run(["bash", "-n", str(SCRIPT)], capture_output=True).returncode == 0
    r = _run("--bogus")
    assert r.returncode == 2 and "usage" in r.stderr


def test_dry_run_takes_every_step_on_cpu(tmp_path):
    r = _run("--dry-run", tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    for step in ("kernel tests", "bench_sparse_ft", "bench_activations", "bench train --suite gpu"):
        assert f"== {step}" in r.stdout and "exit 0" in r.stdout
    assert "collected" in (tmp_path / "gpu_tests_dryrun.log").read_text()
    sft = json.loads((tmp_path / "sparse_ft_gpu_dryrun.json").read_text())
    assert sft["environment"]["device"] == "cpu" and len(sft["results"]) == 6
    act = json.loads((tmp_path / "activations_gpu_dryrun.json").read_text())
    assert act["results"]
    train = json.loads((tmp_path / "train_gpu_dryrun.json").read_text())
    assert len(train["runs"]) == 4 and {r["config"]["batch_size"] for r in train["runs"]} == {64}
    assert {r["config"]["features"] for r in train["runs"]} == {"chess768", "halfkav2_hm"}
    # the GPU net is the Stockfish 15.1 kind, at both batches, with the 4M/s goal
    sf = [r for r in train["runs"] if r["config"]["kind"] == "sfnnv5"]
    assert len(sf) == 2 and {r["target_positions_per_s"] for r in sf} == {4_000_000}
    for run in train["runs"]:
        assert run["features_encoded_on"] == "cpu"
        assert run["variants"]["plain"]["positions_per_s_median"] > 0
        assert run["variants"]["baseline"]["positions_per_s_median"] > 0
    # a dry run never writes over a GPU result
    assert not list(tmp_path.glob("train_gpu.json")) and "== train" in r.stdout
