"""scripts/demo.sh's own control flow in the container's mode (``NNUE_USE_INSTALLED=1``: the ``nnue``
on PATH, no ``.venv``): it ran every step and then failed on its last line, touching a marker
under the ``.venv`` the container does not have (found by the container check). The ``nnue``
here is a recorder that logs its arguments (and makes the folders given to -o), so the test takes a second; the real demo in the
image is run by scripts/container_check.sh (tests/test_container.py)."""
from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("read_only", [False, True], ids=["writable", "read-only tree"])
def test_demo_in_installed_mode_runs_through_without_a_venv(tmp_path, read_only):
    tree = tmp_path / "tree"
    (tree / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "demo.sh", tree / "scripts" / "demo.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.txt"
    fake = bin_dir / "nnue"
    # logs its arguments and makes the folder given to -o, as pack and export do
    fake.write_text(f'#!/usr/bin/env bash\necho "$*" >> {calls}\n'
                    'while [ $# -gt 0 ]; do [ "$1" = -o ] && mkdir -p "$2"; shift; done\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    out = tmp_path / "out"  # outside the tree, as in Apptainer (the image is read-only)
    if read_only:  # Apptainer's image: the tree cannot be written (root ignores the mode bits: skip then)
        if os.geteuid() == 0:
            pytest.skip("root writes into a read-only folder; the writable case covers the flow")
        for p in (tree / "scripts", tree):
            p.chmod(0o555)
    env = dict(os.environ, NNUE_USE_INSTALLED="1", PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    try:
        r = subprocess.run(["bash", str(tree / "scripts" / "demo.sh"), str(out)], capture_output=True, text=True,
                           env=env, timeout=60)
    finally:
        for p in (tree, tree / "scripts"):
            p.chmod(0o755)
    assert r.returncode == 0, r.stderr
    assert not (tree / ".venv").exists()
    commands = [line.split()[0] for line in calls.read_text().splitlines()]
    assert commands == ["pack", "inspect", "train", "export", "eval", "report"]
    assert (out / "fens.txt").read_text().count("\n") == 4
