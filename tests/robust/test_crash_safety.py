"""Issue 15, crash safety as a table: SIGKILL ``nnue pack`` (one file and many), ``nnue
convert`` and ``nnue export`` at points spread over their run time. After each kill nothing
that looks finished is incomplete (every part file named or not is a whole Parquet file, the
manifest loads with read == packed + rejected, a converted file or exported net is either
absent or whole), and rerunning the same command gives the uninterrupted result.

A SIGKILLed process leaves its temporary file (dot-named ``*.tmp``, never a finished-looking
name); reruns do not delete such files, since another run may be writing them. ``nnue train``
is not in the table yet. The default run kills each command at 3 points; ``-m slow`` at 14."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import SAMPLE, shared_file

NNUE = [sys.executable, "-m", "nnue.cli"]


def _run(args, kill_after=None):
    p = subprocess.Popen([*NNUE, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    if kill_after is None:
        assert p.wait(timeout=600) == 0
        return True
    try:
        p.wait(timeout=kill_after)
        return True  # finished before the kill
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the command and its worker processes
        p.wait()
        return False


def _dataset_state(ds: Path):
    """Check a (possibly interrupted) dataset folder; returns its content for comparison."""
    if not ds.exists():
        return None
    for part in ds.glob("part-*.parquet"):
        pq.read_table(part)  # a part file under its final name is whole
    if not (ds / "manifest.json").exists():
        return {}
    from nnue.pipeline import manifest as mf

    m = mf.load(ds)  # checks read == packed + rejected per file
    out = {}
    for sha, e in m["files"].items():
        t = pq.read_table(ds / e["part"])
        assert t.num_rows == e["packed"]
        assert (ds / e["rejects"]).exists()
        assert len((ds / e["rejects"]).read_text().splitlines()) == sum(e["rejected"].values())
        out[sha] = (e["read"], e["packed"], e["rejected"], t.drop(["source"]).to_pydict()["board"][:50],
                    t.num_rows)
    return out


def _inputs_many():
    return [str(SAMPLE), str(shared_file("selfplay/sf15-960-xfen-s2.plain")),
            str(shared_file("selfplay/sf15-960-xfen-s2.txt"))]


def _points(n, total):
    return [total * (i + 1) / (n + 1) for i in range(n)]


N = [3, pytest.param(14, marks=pytest.mark.slow)]


@pytest.mark.parametrize("n", N)
@pytest.mark.parametrize("case", ["pack one file", "pack many files", "pack many files, 2 workers"])
def test_pack_killed(tmp_path, case, n):
    inputs = [str(SAMPLE)] if case == "pack one file" else _inputs_many()
    extra = ["--workers", "2"] if "workers" in case else []
    ref = tmp_path / "ref"
    t0 = time.perf_counter()
    _run(["pack", *inputs, "-o", str(ref), "--no-progress", *extra])
    total = time.perf_counter() - t0
    want = _dataset_state(ref)
    for i, at in enumerate(_points(n, total)):
        ds = tmp_path / f"ds{i}"
        _run(["pack", *inputs, "-o", str(ds), "--no-progress", *extra], kill_after=at)
        _dataset_state(ds)  # whatever is there is consistent
        _run(["pack", *inputs, "-o", str(ds), "--no-progress", *extra])
        assert _dataset_state(ds) == want, f"kill at {at:.2f} s of {total:.2f} s"
        # a SIGKILLed process cannot remove its temporary file; what it leaves is dot-named *.tmp,
        # never a finished-looking name (a rerun does not delete it: another run may own it);
        # .manifest.lock is the writers' lock file (pipeline/manifest.py), empty and kept on purpose
        assert all(p.name.endswith(".tmp") or p.name == ".manifest.lock" for p in ds.iterdir()
                   if p.name.startswith("."))
        shutil.rmtree(ds)


@pytest.mark.parametrize("n", N)
def test_convert_killed(tmp_path, sample_dataset, n):
    ref = tmp_path / "ref.plain"
    t0 = time.perf_counter()
    _run(["convert", str(sample_dataset), "--to", "plain", "-o", str(ref)])
    total = time.perf_counter() - t0
    for i, at in enumerate(_points(n, total)):
        out = tmp_path / f"o{i}.plain"
        done = _run(["convert", str(sample_dataset), "--to", "plain", "-o", str(out)], kill_after=at)
        assert not out.exists() or out.read_bytes() == ref.read_bytes()
        if not done or not out.exists():
            _run(["convert", str(sample_dataset), "--to", "plain", "-o", str(out)])
        assert out.read_bytes() == ref.read_bytes()
        assert all(p.name.endswith(".tmp") for p in tmp_path.iterdir() if p.name.startswith("."))


@pytest.mark.parametrize("n", N)
def test_export_killed(tmp_path, sample_dataset, n):
    from netfiles import make_model, write_weights

    ck = write_weights(make_model("crelu"), tmp_path / "w.safetensors", sample_dataset)
    args = lambda out: ["export", str(ck), "-o", str(out), "--positions", "2000", "--json"]  # noqa: E731
    ref = tmp_path / "ref"
    t0 = time.perf_counter()
    _run(args(ref))
    total = time.perf_counter() - t0
    want = {f: (ref / f).read_bytes() for f in ("net.safetensors", "net.bin")}
    for i, at in enumerate(_points(n, total)):
        out = tmp_path / f"n{i}"
        _run(args(out), kill_after=at)
        if (out / "export.json").exists():  # finished-looking: every file whole
            assert {f: (out / f).read_bytes() for f in want} == want
        for f in want:
            if (out / f).exists():
                assert (out / f).read_bytes() == want[f]
        _run(args(out))
        assert {f: (out / f).read_bytes() for f in want} == want
        assert json.loads((out / "export.json").read_text())
