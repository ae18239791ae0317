"""nnue.kernels.host_memory: after retain_freed_memory a freed 64 MiB buffer's pages are reused by
the next allocation (they still hold its bytes), where glibc's default unmaps them and maps fresh
zero-filled pages (which the kernel must fault in and zero: the cost this module removes);
NNUE_MALLOC=default leaves malloc alone. Each case runs in a fresh interpreter (malloc settings
are per process)."""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")

PROBE = r"""
import json
import numpy as np
from nnue.kernels import host_memory
applied = host_memory.retain_freed_memory()
n = 64 << 20
a = np.empty(n, np.uint8)
a.fill(7)                 # a step's big temporary, written, then freed
del a
b = np.empty(n, np.uint8)  # the next step's: the same pages again, or fresh zero pages?
print(json.dumps({"applied": applied, "status": host_memory.status(), "reused": float((b == 7).mean())}))
"""


def _probe(env_extra: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NNUE_MALLOC"} | env_extra
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_freed_memory_is_reused():
    got = _probe({})
    assert got["applied"] and got["status"] == "retain"
    assert got["reused"] > 0.99, got     # the freed buffer's pages, bytes and all


def test_opt_out_leaves_malloc_alone():
    got = _probe({"NNUE_MALLOC": "default"})
    assert not got["applied"] and got["status"] == "default"
    assert got["reused"] < 0.01, got     # glibc's default: a fresh, zero-filled mapping
