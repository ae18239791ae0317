"""The Dockerfile builds and its image runs: scripts/container_check.sh (podman, a debootstrapped Debian 12
base, `nnue --version`, the demo and one test file in the image). Slow: minutes with its cache, more
without; needs root and the network (Debian's archive, PyPI). Its latest result is committed in
bench/results/container_check.json (the latest run) and container_check_fresh.json (the latest from nothing);
``--apptainer`` (off by default, not run here) adds container_check_apptainer.json."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RESULT = REPO / "bench" / "results" / "container_check.json"
#: the latest run from nothing: no podman images, no cached base
FRESH = REPO / "bench" / "results" / "container_check_fresh.json"


def _check_demo(step: dict) -> None:
    """The demo's four evals (integers before their FEN) and its summary block."""
    lines = step["evals_and_summary"]
    evals = [line for line in lines if line.split(" ", 1)[0].lstrip("-").isdigit()]
    assert len(evals) == 4 and any(line.startswith("summary") for line in lines)


def _check_result(r: dict) -> None:
    """What a passing run of the script recorded."""
    assert r["passed"], {k: (v["status"], v["output"][-800:]) for k, v in r["steps"].items()}
    steps = r["steps"]
    assert steps["version"]["output"].strip().startswith("nnue-forge ")
    _check_demo(steps["demo"])
    assert " passed" in steps["test"]["summary"] and " failed" not in steps["test"]["summary"]
    assert r["base"]["what"].startswith("debootstrap") and "bookworm" in r["base"]["what"]


@pytest.mark.parametrize("result", [RESULT, FRESH], ids=["latest", "fresh"])
def test_committed_result_is_a_passing_run(result):
    """The committed results of the script are passing runs of this layout (their fields as checked
    below); the fresh one made its base with debootstrap and reused no build step."""
    r = json.loads(result.read_text())
    _check_result(r)
    if result == FRESH:
        assert r["base"]["made_by"] == "debootstrap" and r["build"]["steps_from_cache"] == 0


@pytest.mark.slow
def test_container_builds_and_runs(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("scripts/container_check.sh runs as root (debootstrap, rootful podman)")
    if not shutil.which("podman") and not shutil.which("apt-get"):
        pytest.skip("no podman and no apt-get to install it")
    out = tmp_path / "container_check.json"
    r = subprocess.run(["bash", str(REPO / "scripts" / "container_check.sh"), str(out)], capture_output=True,
                       text=True, timeout=3600)
    assert out.exists(), r.stderr[-3000:]
    _check_result(json.loads(out.read_text()))
    assert r.returncode == 0, r.stderr[-3000:]


#: written by ``scripts/container_check.sh --apptainer`` (off by default): the image as a .sif, run with apptainer exec
APPTAINER = REPO / "bench" / "results" / "container_check_apptainer.json"


def test_committed_apptainer_result_is_a_passing_run():
    """The committed Apptainer result: the .sif was built from podman's OCI archive, ``nnue --version``
    and the demo ran in it with ``apptainer exec``, and the demo's files were all written outside
    the read-only image."""
    r = json.loads(APPTAINER.read_text())
    assert r["passed"], {k: (v["status"], v["output"][-800:]) for k, v in r["steps"].items()}
    steps = r["steps"]
    assert [steps[k]["status"] for k in ("save", "build", "version", "demo")] == [0, 0, 0, 0]
    assert steps["version"]["output"].strip().splitlines()[-1].startswith("nnue-forge ")
    _check_demo(steps["demo"])
    assert r["demo_outputs_missing"] == [] and r["sif_bytes"] > 0
    assert any(c.startswith("apptainer build ") and "oci-archive://" in c for c in r["commands"])
