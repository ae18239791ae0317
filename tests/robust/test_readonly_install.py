"""A read-only install: the package's folders and the home folder cannot be written (a system
package, a container image). numba raised "cannot cache function …: no locator available" when a
cached function was defined, so every compiled command (``nnue pack``, ``nnue eval``) ended with
an internal error. Now :mod:`nnue.numba_cache` picks a cache folder that can be written (the
temporary folder) or runs without the cache.

The read-only folders are real: read-only bind mounts in a private mount namespace (``unshare``),
so the test skips, with the reason, where namespaces or mounts are not allowed.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import nnue
from tests.samples import SAMPLE

REPO = Path(nnue.__file__).resolve().parents[1]  # the editable install's root, or site-packages
NNUE = [sys.executable, "-m", "nnue.cli"]


def _unshare() -> list[str]:
    import os

    return ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]


def _can_mount(tmp: Path) -> str | None:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "unshare or mount not installed"
    (tmp / "probe").mkdir()
    r = subprocess.run([*_unshare(), "sh", "-c", f"mount --bind -o ro {tmp / 'probe'} {tmp / 'probe'} && "
                        f"! touch {tmp / 'probe' / 'x'} 2>/dev/null"], capture_output=True, text=True)
    return None if r.returncode == 0 else f"no read-only bind mounts here ({r.stderr.strip()[:100]})"


def _run_readonly(tmp: Path, argv: list[str], ro: list[Path], tmpfs: Path | None = None):
    """Run ``argv`` with ``ro`` (and the install) mounted read-only, HOME in a read-only folder,
    no XDG_CACHE_HOME, and ``tmpfs`` (if given) a fresh writable folder mounted after the others."""
    import os
    import shlex

    home = tmp / "home"
    home.mkdir(exist_ok=True)
    mounts = [f"mount --bind -o ro {shlex.quote(str(p))} {shlex.quote(str(p))}" for p in [REPO, home, *ro]]
    if tmpfs is not None:
        mounts.append(f"mount -t tmpfs none {shlex.quote(str(tmpfs))}")
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "NUMBA_CACHE_DIR")}
    env.update(HOME=str(home), NNUE_DEBUG="")
    script = " && ".join(mounts + [f"cd {shlex.quote(str(home))}", shlex.join(argv)])
    return subprocess.run([*_unshare(), "sh", "-c", script], capture_output=True, text=True, env=env, timeout=900)


@pytest.fixture
def ro_tmp(tmp_path):
    why = _can_mount(tmp_path)
    if why:
        pytest.skip(why)
    return tmp_path


def test_pack_and_eval_on_a_read_only_install(ro_tmp):
    from tests.netfiles import make_int_net

    make_int_net("chess768", hidden=16).save(ro_tmp / "net.safetensors")
    cases = [["pack", str(SAMPLE), "-o", str(ro_tmp / "ds"), "--no-progress"],
             ["eval", str(ro_tmp / "net.safetensors"), "--fen", "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1"]]
    for args in cases:
        r = _run_readonly(ro_tmp, [*NNUE, *args], [])
        assert r.returncode == 0, r.stderr
        assert "internal error" not in r.stderr and "no locator" not in r.stderr
    r = _run_readonly(ro_tmp, [sys.executable, "-c", "import nnue.numba_cache as c; print(c.CHOICE)"], [])
    assert r.stdout.strip() == "temporary folder", r.stderr


@pytest.mark.slow
def test_nothing_writable_runs_without_the_cache(ro_tmp):
    """The temporary folders read-only too: numba's cache is off, the command still runs (slow:
    every compiled function of the pack path is compiled again, about a minute)."""
    import tempfile

    out = ro_tmp / "out"
    out.mkdir()
    tmp_dirs = sorted({Path(tempfile.gettempdir()), Path("/tmp"), Path("/var/tmp")} - {Path("/")})
    tmp_dirs = [p for p in tmp_dirs if p.is_dir()]
    r = _run_readonly(ro_tmp, [sys.executable, "-c", "import nnue.numba_cache as c; print(c.CHOICE)"], tmp_dirs,
                      tmpfs=out)
    assert r.stdout.strip() == "off", r.stderr
    r = _run_readonly(ro_tmp, [*NNUE, "pack", str(SAMPLE), "-o", str(out / "ds"), "--no-progress", "--json"],
                      tmp_dirs, tmpfs=out)
    assert r.returncode == 0, r.stderr
    assert '"packed": 4015' in r.stdout
