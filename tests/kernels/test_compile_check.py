"""Every Triton kernel compiles for sm_90 (H100/H200) without spilling — on a machine with no GPU.

The interpreter tests check the numbers but not that the real compiler accepts the kernels;
nnue.kernels.compile_check runs Triton's whole pipeline down to ptxas and a cubin. It needs
TRITON_INTERPRET unset, so it runs in a subprocess. About 20 s cold, a few seconds once Triton's
cache holds the kernels.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import triton

PTXAS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"


@pytest.mark.skipif(not PTXAS.exists(), reason="this triton wheel ships no ptxas")
def test_kernels_compile_for_sm90_without_spills():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run([sys.executable, "-W", "ignore", "-m", "nnue.kernels.compile_check", "--json"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    kernels = {r["kernel"] for r in report["kernels"]}
    for act in ("crelu", "screlu", "pairwise_crelu", "relu", "hardswish", "swish", "none"):
        assert f"sparse_ft fwd {act} fp32 save_acc=True" in kernels and f"sparse_ft bwd {act} fp32" in kernels
    assert {"swiglu fwd swish bf16", "swiglu bwd swish bf16", "swiglu bwd hardswish bf16",
            "activation bwd hardswish bf16"} <= kernels
    assert report["spilled"] == []
