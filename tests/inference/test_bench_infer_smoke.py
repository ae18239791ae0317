"""`nnue bench infer` runs end to end at toy sizes for both architectures (timings meaningless)."""
from __future__ import annotations

import json

import pytest

from nnue.bench import bench_infer


@pytest.mark.parametrize("arch", ["perspective", "deep"])
def test_bench_infer_smoke(arch, tmp_path):
    out = tmp_path / "infer.json"
    bench_infer.main(["--batch", "64", "--runs", "2", "--block", "1", "--hidden", "16", "--no-neutral",
                      "--arch", arch, "--profile", "--out", str(out)])
    r = json.loads(out.read_text())
    assert r["arch"] == arch and r["int_evals_per_s"] > 0 and r["float_evals_per_s"] > 0
    assert ("16 crelu -> 32 crelu" in r["net"]) == (arch == "deep")
    assert r["int_torch_evals_per_s"] > 0 and r["int_over_int_torch"] > 0
    prof = r["profile"]
    assert prof["float"]["total"] > 0 and ("int" in prof) == (arch == "perspective")
    if arch == "perspective":
        assert set(prof["int"]) >= {"encode", "ft", "activation_l1", "rest", "total"}
        assert set(prof["int_torch"]) >= {"sort", "encode", "ft", "activation", "l1", "rest"}
    s = r["single_position"]
    assert s["us_per_call"] > 0 and 0 < s["over_batch_call_cpu"] and s["goal"] == 0.01


def test_bench_infer_sfnnv5_smoke(tmp_path):
    out = tmp_path / "infer_sfnnv5.json"
    bench_infer.main(["--batch", "40", "--runs", "2", "--block", "1", "--hidden", "64", "--arch", "sfnnv5",
                      "--out", str(out)])
    r = json.loads(out.read_text())
    assert r["arch"] == "sfnnv5" and r["checked_equal"] and r["int_evals_per_s"] > 0
    assert r["int_torch_evals_per_s"] > 0 and r["int_over_int_torch"] > 0 and "64 + 8 PSQT" in r["net"]
    assert r["single_position"]["us_per_call"] > 0
