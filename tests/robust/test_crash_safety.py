"""Issue 15, crash safety as a table: SIGKILL ``nnue pack`` (one file and many), ``nnue
convert``, ``nnue export`` and ``nnue train`` at points spread over their run time. After each kill nothing
that looks finished is incomplete (every part file named or not is a whole Parquet file, the
manifest loads with read == packed + rejected, a converted file or exported net is either
absent or whole), and rerunning the same command gives the uninterrupted result.

A SIGKILLed process leaves its temporary file (dot-named ``*.tmp``, never a finished-looking
name); reruns do not delete such files, since another run may be writing them. A killed
``nnue train`` is resumed from its ``last.ckpt`` (or rerun when it wrote none) and must end with
the weights of a run never killed. The default run kills each command at a few points (train
at one); ``-m slow`` at 12 or more."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from nnue.pipeline.parts import read_part
import pytest
from tests.samples import SAMPLE, selfplay


NNUE = [sys.executable, "-m", "nnue.cli"]


def _run(args, kill_after=None, once: Path | None = None):
    """Run ``nnue ARGS``; with kill_after, SIGKILL it after that many seconds (counted from when
    file ``once`` appears, when given). Returns whether it finished."""
    p = subprocess.Popen([*NNUE, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    if kill_after is None:
        assert p.wait(timeout=600) == 0
        return True
    while once is not None and not once.exists() and p.poll() is None:
        time.sleep(0.05)
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
        read_part(part)  # a part file under its final name is whole
    if not (ds / "manifest.json").exists():
        return {}
    from nnue.pipeline import manifest as mf

    m = mf.load(ds)  # checks read == packed + rejected per file
    out = {}
    for sha, e in m["files"].items():
        import pyarrow as pa

        t = pa.concat_tables([read_part(ds / name) for name in mf.entry_parts(e)])
        assert t.num_rows == e["packed"]
        rejects = 0
        for name in mf.entry_rejects(e):
            assert (ds / name).exists()
            rejects += len((ds / name).read_text().splitlines())
        assert rejects == sum(e["rejected"].values())
        out[sha] = (e["read"], e["packed"], e["rejected"], t.drop(["source"]).to_pydict()["board"][:50],
                    t.num_rows, len(mf.entry_parts(e)))
    return out


def _inputs_many():
    return [str(SAMPLE), str(selfplay("sf15-960-xfen-s2.plain")),
            str(selfplay("sf15-960-xfen-s2.txt"))]


def _points(n, total):
    """n kill times spread over a run of ``total`` seconds (one kill: past the middle, where the
    command is writing)."""
    return [total * (i + 1) / (n + 1) for i in range(n)] if n > 1 else [0.6 * total]


# the default run keeps a small subset (each kill costs a process start and a rerun); -m slow has
# the whole table, 14 kills per command spread over its run
N = [1, pytest.param(14, marks=pytest.mark.slow)]
PACK_CASES = ["pack one file", "pack many files", "pack many files, 2 workers", "pack one file in ranges, 2 workers"]


@pytest.mark.parametrize("case,n", [("pack many files, 2 workers", 2), ("pack one file in ranges, 2 workers", 2)]
                         + [pytest.param(c, 14, marks=pytest.mark.slow) for c in PACK_CASES])
def test_pack_killed(tmp_path, case, n):
    inputs = [str(SAMPLE)] if case == "pack one file" else _inputs_many()
    extra = ["--workers", "2"] if "workers" in case else ["--workers", "1"]
    if "ranges" in case:  # one file cut into ~8 byte ranges, packed by 2 processes
        inputs = [str(selfplay("sf15-960-xfen-s2.plain"))]
        extra += ["--range-mb", "0.05"]
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
    from tests.netfiles import make_model, write_weights

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


# ---------------------------------------------------------------------------------- train
TRAIN_STEPS = 6 * 8  # 6 epochs of 2,048 positions, 256 a step


def _train_args(ds, out, resume: bool = False) -> list[str]:
    args = ["train", "experiment=demo", f"data.path={ds}", f"paths.output_dir={out}", "model.hidden=16",
            "data.positions_per_epoch=2048", "data.val_fraction=0.2", "data.val_batch_size=4096",
            "trainer.max_epochs=6", "trainer.enable_progress_bar=false"]
    return args + ([f"ckpt_path={out / 'checkpoints' / 'last.ckpt'}"] if resume else [])


def _whole_run_files(out: Path) -> None:
    """Every finished-looking file of a (possibly killed) run folder is whole: checkpoints load,
    weights load, plots are whole PNGs; metrics.json (the finished marker) only with a complete
    run beside it."""
    import torch
    from safetensors.torch import load_file

    ck = out / "checkpoints"
    for p in (ck.iterdir() if ck.is_dir() else []):
        if p.name.startswith("."):
            assert p.name.endswith(".tmp") or ".tmp" in p.name, p
        elif p.suffix == ".ckpt":
            torch.load(p, map_location="cpu", weights_only=True)
        elif p.suffix == ".safetensors":
            load_file(p)
    for p in (out / "plots").glob("*.png") if (out / "plots").is_dir() else []:
        data = p.read_bytes()
        assert data.startswith(b"\x89PNG") and data[-8:-4] == b"IEND", p
    if (out / "metrics.json").exists():
        m = json.loads((out / "metrics.json").read_text())
        assert m["global_step"] == TRAIN_STEPS and (out / "config.yaml").exists()
        assert torch.load(ck / "last.ckpt", map_location="cpu", weights_only=True)["global_step"] == TRAIN_STEPS


@pytest.mark.parametrize("n", [1, pytest.param(12, marks=pytest.mark.slow)])
def test_train_killed(tmp_path, sample_dataset, n):
    """SIGKILL `nnue train` at n points of its run; what is left is whole, and resuming from its
    last.ckpt (or rerunning where none was written) ends with the weights of a run never killed."""
    from safetensors.torch import load_file
    import torch

    ref = tmp_path / "ref"
    t0 = time.perf_counter()
    _run(_train_args(sample_dataset, ref))
    total = time.perf_counter() - t0
    want = load_file(ref / "checkpoints" / "weights-last.safetensors")
    # one kill (the default run): just after the first epoch's checkpoint, so that it resumes
    points = _points(n, total) if n > 1 else [0.3]
    for i, at in enumerate(points):
        out = tmp_path / f"r{i}"
        done = _run(_train_args(sample_dataset, out), kill_after=at,
                    once=out / "checkpoints" / "last.ckpt" if n == 1 else None)
        if n == 1:
            assert not done and (out / "checkpoints" / "last.ckpt").exists()
        _whole_run_files(out)
        if not (out / "metrics.json").exists():
            assert not done
            _run(_train_args(sample_dataset, out, resume=(out / "checkpoints" / "last.ckpt").exists()))
        _whole_run_files(out)
        assert json.loads((out / "metrics.json").read_text())["global_step"] == TRAIN_STEPS, f"kill at {at:.1f} s"
        got = load_file(out / "checkpoints" / "weights-last.safetensors")
        assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want), \
            f"kill at {at:.1f} s of {total:.1f} s"
        shutil.rmtree(out)
