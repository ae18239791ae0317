"""`nnue` runs its commands with OMP_WAIT_POLICY=PASSIVE unless the user chose a policy: with
spinning OpenMP threads, torch's ops and numba's kernels took the 2 cores from each other (CPU
training 4x slower at load 1.5; docs/training.md)."""
from __future__ import annotations

import subprocess
import sys


def policy_seen_by_a_command(env_policy: str | None) -> str:
    """OMP_WAIT_POLICY as a command's work module sees it, in a fresh `nnue` process."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if env_policy is not None:
        env["OMP_WAIT_POLICY"] = env_policy
    code = ("import os, sys\n"
            "import nnue.cli as cli\n"
            "cli._main = lambda argv: print(os.environ.get('OMP_WAIT_POLICY')) or 0\n"
            "sys.exit(cli.main(['train']))\n")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_passive_by_default():
    assert policy_seen_by_a_command(None) == "PASSIVE"


def test_a_users_policy_is_kept():
    assert policy_seen_by_a_command("ACTIVE") == "ACTIVE"
