"""``nnue retrain train.launcher=NAME``: the cycle's training goes through a Hydra launcher of
``nnue train`` (a one-job sweep), the rest of the cycle runs in the calling process. Real launchers:
``submitit_local`` (a submitit child process) in the default run, and ``submitit_slurm`` on the
real one-node SLURM of scripts/slurm_up.sh (marked ``slurm``: skipped with the reason when it
cannot start)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from nnue.trainer.registry import Registry
from tests.service.test_retrain import assert_consistent, retrain


@pytest.fixture
def dumps(tmp_path):
    from tests.service.service_testlib import cut_dumps

    folder = tmp_path / "dumps"
    cut_dumps(folder, 2, records=700, bad_every=0)
    return folder


def _check_cycle(reg: Path, launcher: str):
    r = Registry(reg)
    assert r.champion() == "0001"
    assert_consistent(reg, "0001")
    v = reg / "versions" / "0001"
    assert (v / "checkpoint.safetensors").exists() and (v / "net.safetensors").exists()
    job = v / "train_sweep" / "0"
    cfg = yaml.safe_load((job / "config.yaml").read_text())
    assert cfg["model"]["hidden"] == 8  # train.overrides reached the job
    assert cfg["paths"]["output_dir"].endswith("train_sweep/0")
    metrics = json.loads((job / "metrics.json").read_text())
    hist = [json.loads(line) for line in (reg / "history.jsonl").read_text().splitlines()]
    assert hist[-1]["version"] == "0001" and hist[-1]["train"]["val_loss"] == metrics["val_loss"]
    assert (v / "train_sweep" / ".submitit").is_dir(), f"{launcher}: the job did not go through submitit"
    assert not (job / "checkpoints").exists()  # the weights live on as checkpoint.safetensors


def test_training_through_submitit_local(tmp_path, dumps):
    reg = tmp_path / "reg"
    rc, out, err = retrain(reg, dumps, "train.launcher=submitit_local",
                           'train.launcher_overrides="hydra.launcher.timeout_min=20"')
    assert rc == 0, err
    assert "version 0001 promoted" in out
    _check_cycle(reg, "submitit_local")


def test_a_launcher_that_does_not_exist_is_one_line_and_leaves_no_version(tmp_path, dumps):
    reg = tmp_path / "reg"
    rc, out, err = retrain(reg, dumps, "train.launcher=nosuchlauncher")
    assert rc == 2
    lines = [x for x in err.strip().splitlines() if x.startswith("nnue retrain:")]
    assert len(lines) == 1 and "train.launcher=nosuchlauncher" in lines[0], err
    assert "Traceback" not in err
    assert not (reg / "versions").exists() or not any((reg / "versions").iterdir())
    assert Registry(reg).champion() is None


@pytest.mark.slurm
def test_training_through_slurm(slurm, tmp_path, dumps):
    reg = tmp_path / "reg"
    rc, out, err = retrain(reg, dumps, "train.launcher=submitit_slurm",
                           'train.launcher_overrides="hydra.launcher.timeout_min=20"')
    assert rc == 0, err
    _check_cycle(reg, "submitit_slurm")
    logs = list((reg / "versions" / "0001" / "train_sweep" / ".submitit").rglob("*_log.out"))
    assert logs, "no sbatch log: the training did not run as a SLURM job"
