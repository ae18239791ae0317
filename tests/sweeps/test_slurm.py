"""Sweeps and DDP through a real one-node SLURM (scripts/slurm_up.sh; skipped with the reason when
it cannot start): a 2×2 sweep through hydra/launcher=submitit_slurm, and a 2-process CPU DDP job."""
from __future__ import annotations

import json
import pickle
import subprocess
from pathlib import Path

import pytest
import yaml
from tests.sweeps.sweep_util import TINY, nnue, two_part_dataset
from tests.samples import SAMPLE

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slurm


def _slurm_state(job_id: str) -> str:
    """JobState from slurmctld (kept MinJobAge=600 s after the end; there is no accounting for sacct)."""
    out = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True).stdout
    return next((f.split("=", 1)[1] for f in out.split() if f.startswith("JobState=")), "gone")


def _settled_state(job_id: str, timeout_s: float = 120.0) -> str:
    """The job's state once slurmctld has finished ending it.

    submitit returns as soon as a task's result file is written, while slurmctld may still show the
    task as COMPLETING (it reaps the step and runs the epilog after the process exits), so a single
    look can race; CI once saw COMPLETING here. Polls until the state leaves the transient ones."""
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        state = _slurm_state(job_id)
        if state not in ("COMPLETING", "RUNNING", "PENDING", "CONFIGURING") or time.monotonic() > deadline:
            return state
        time.sleep(0.5)


def _submitit_results(sweep: Path) -> dict[str, tuple]:
    """Every task's submitit result file: {"<job id>_<task>": (outcome, value)}."""
    out = {}
    for p in (sweep / ".submitit").rglob("*_result.pkl"):
        with open(p, "rb") as f:
            out[p.name.removesuffix("_result.pkl")] = pickle.load(f)
    return out


def test_slurm_2x2_sweep(slurm, sample_dataset, tmp_path):
    sweep = tmp_path / "sweep"
    r = nnue("train", "-m", *TINY, f"data.path={sample_dataset}", "model.hidden=8,16", "optimizer.lr=0.001,0.003",
             "hydra/launcher=submitit_slurm", "hydra.launcher.timeout_min=20", f"hydra.sweep.dir={sweep}")
    # a quiet console: no sacct errors, one line per job state change, a summary
    out = r.stdout + r.stderr
    assert "sacct" not in out and "accounting storage" not in out and "Traceback" not in out, out
    import re

    changes = re.findall(r"job (\d) \(SLURM (\d+_\d)\): (?:(\w+) -> )?(\w+) \(", out)
    for n in "0123":
        mine = [c for c in changes if c[0] == n]
        assert mine and mine[0][2] == "" and mine[-1][3] == "COMPLETED", (n, changes)
        assert all(a[3] == b[2] and a[3] != b[3] for a, b in zip(mine, mine[1:])), mine  # changes only
    assert re.search(r"4 job\(s\) ended in \d+ s: 4 COMPLETED", out), out
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert [p.name for p in jobs] == ["0", "1", "2", "3"]
    combos = set()
    for job in jobs:
        m = json.loads((job / "metrics.json").read_text())
        assert m["val_loss"] > 0
        assert m["torch_threads"] == 1  # cpus_per_task=1, whatever the node's cores
        assert "1 torch thread(s) (NNUE_THREADS)" in (job / "train.log").read_text()
        cfg = yaml.safe_load((job / "config.yaml").read_text())
        assert cfg["paths"]["output_dir"] == str(job)
        combos.add((cfg["model"]["hidden"], cfg["optimizer"]["lr"]))
    assert len(combos) == 4
    results = _submitit_results(sweep)
    assert len(results) == 4 and all(v[0] == "success" for v in results.values()), results
    assert sorted(v[1].return_value > 0 for v in results.values()) == [True] * 4  # val_loss returned to Hydra
    ids = {k.rsplit("_", 1)[0] for k in results}  # array tasks: <array job>_<index>
    assert len(ids) == 4
    states = {i: _settled_state(i) for i in ids}
    assert all(s in ("COMPLETED", "gone") for s in states.values()) and "COMPLETED" in states.values(), states
    # the layout docs/sweeps.md shows, and nothing else: .submitit/<array id>/<array id>_submission.sh,
    # .submitit/<array id>_<task>/ with the task's logs, pickled call and result
    (array,) = {i.split("_")[0] for i in ids}
    sub = sweep / ".submitit"
    assert sorted(p.name for p in sub.iterdir()) == [array] + [f"{array}_{t}" for t in range(4)]
    assert [p.name for p in (sub / array).iterdir()] == [f"{array}_submission.sh"]
    for t in range(4):
        assert sorted(p.name for p in (sub / f"{array}_{t}").iterdir()) == sorted(
            f"{array}_{t}_{x}" for x in ("0_log.err", "0_log.out", "0_result.pkl", "submitted.pkl"))


def test_slurm_ddp_two_cpu_processes(slurm, tmp_path):
    ds = two_part_dataset(SAMPLE, tmp_path / "data")
    sweep, probe = tmp_path / "sweep", tmp_path / "probe"
    nnue("train", "-m", *TINY, f"data.path={ds}", "model.hidden=8", "trainer=ddp",
         "hydra/launcher=submitit_slurm", "hydra.launcher.tasks_per_node=2", "hydra.launcher.cpus_per_task=1",
         "hydra.launcher.timeout_min=20", f"hydra.sweep.dir={sweep}",
         "+callbacks.rank_report._target_=nnue.trainer.ddp.RankReport", f"+callbacks.rank_report.dirpath={probe}")
    r0, r1 = (json.loads((probe / f"rank{r}.json").read_text()) for r in (0, 1))
    assert (r0["rank"], r1["rank"], r0["world_size"], r1["world_size"]) == (0, 1, 2, 2)
    assert r0["cluster_environment"] == r1["cluster_environment"] == "SLURMEnvironment"
    assert r0["pid"] != r1["pid"]
    # disjoint shards: each rank its own row groups, and the positions it trained come from them
    u0, u1 = ({tuple(u) for u in r["units"]} for r in (r0, r1))
    assert u0 and u1 and not u0 & u1 and len(u0 | u1) == 2
    assert r0["batches"] == r1["batches"] > 0
    import hashlib

    import torch

    from nnue.pipeline.batch import to_sparse_batch
    from nnue.pipeline.features import get_feature_set, parse_output_buckets
    from nnue.pipeline.parts import open_part, read_group

    fs, buckets = get_feature_set("chess768"), parse_output_buckets("MaterialCount<8>")

    def positions(units):
        out = set()
        for path, rg in units:
            b = read_group(open_part(path), rg, ["board"]).column("board").to_pylist()
            boards = torch.frombuffer(bytearray(b"".join(b)), dtype=torch.uint8).reshape(-1, 32)
            n = boards.shape[0]
            sb = to_sparse_batch({"boards": boards, "score": torch.zeros(n), "result": torch.zeros(n)}, fs, buckets)
            out |= {hashlib.sha1(row.tobytes()).hexdigest()[:16] for row in sb.stm_indices.numpy()}
        return out

    p0, p1 = positions(u0), positions(u1)
    assert set(r0["positions"]) <= p0 and set(r1["positions"]) <= p1
    assert set(r0["positions"]) - p1 and set(r1["positions"]) - p0  # each saw positions only it holds
    # identical weights on both ranks after training (DDP all-reduces the gradients)
    assert r0["weights_sha256"] == r1["weights_sha256"]
    # only rank 0 wrote the run folder: one set of files, rank 0's log alone
    job = sweep / "0"
    assert json.loads((job / "metrics.json").read_text())["epochs"] == 1
    assert [p.name for p in (job / "csv").iterdir()] == ["version_0"]
    assert sorted(p.name for p in (job / ".hydra").iterdir()) == ["config.yaml", "hydra.yaml", "overrides.yaml"]
    log = (job / "train.log").read_text()
    assert "(rank 0)" in log and "(rank 1)" not in log
    names = {p.relative_to(job).as_posix() for p in job.rglob("*") if p.is_file()}
    assert not any("rank1" in n or "version_1" in n for n in names), names
