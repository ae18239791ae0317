"""Run folders (trainer/runs.py) and the checks `nnue train -m` makes before launching (trainer/sweep.py)."""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from nnue.cli import main
from nnue.trainer.checks import check_train_args
from nnue.trainer import runs
from nnue.trainer.sweep import job_samples


def test_unique_dir_never_shared(tmp_path):
    with ThreadPoolExecutor(8) as ex:
        dirs = list(ex.map(lambda _: runs.unique_dir(str(tmp_path), stamp="2026-01-01_00-00-00"), range(64)))
    assert len(set(dirs)) == 64 and all(Path(d).is_dir() for d in dirs)


def test_check_run_folder(tmp_path):
    out = tmp_path / "run"
    assert runs.check_run_folder(out) is None  # missing
    out.mkdir()
    assert runs.check_run_folder(out) is None  # empty
    (out / "checkpoints").mkdir()
    (out / "checkpoints" / "last.ckpt").write_bytes(b"x")
    assert "interrupted run" in runs.check_run_folder(out)
    (out / "metrics.json").write_text("{}")
    why = runs.check_run_folder(out)
    assert "finished run" in why and "+overwrite=true" in why and "\n" not in why
    assert runs.check_run_folder(out, ckpt_path=out / "checkpoints" / "last.ckpt") is None
    assert runs.check_run_folder(out, ckpt_path=tmp_path / "other" / "last.ckpt") is not None
    assert runs.check_run_folder(out, overwrite=True) is None


def _cfg(**kw):
    base = {"paths": {"output_dir": None}, "data": {"path": "ds"}, "ckpt_path": None}
    return OmegaConf.merge(OmegaConf.create(base), OmegaConf.create(kw))


def test_prepare_paths_and_refusal(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = _cfg()
    out = runs.prepare(cfg)
    assert out.parent == tmp_path / "runs" and out.is_dir()
    assert cfg.paths.output_dir == str(out) and cfg.data.path == str(tmp_path / "ds")
    # a list of datasets and a relative ckpt_path resolve against the starting directory too
    cfg = _cfg(paths={"output_dir": "r1"}, data={"path": ["a", "/abs/b"]}, ckpt_path="r1/checkpoints/last.ckpt")
    out = runs.prepare(cfg)
    assert out == tmp_path / "r1" and list(cfg.data.path) == [str(tmp_path / "a"), "/abs/b"]
    assert cfg.ckpt_path == str(tmp_path / "r1" / "checkpoints" / "last.ckpt")
    (out / "metrics.json").write_text("{}")
    with pytest.raises(runs.RunFolderError, match="finished run"):
        runs.prepare(_cfg(paths={"output_dir": "r1"}))
    # resume: allowed; the old finished marker stays until train.run has checked the resume (then it
    # goes until the resumed run ends; a re-run of a finished run keeps it: issue 20 item 9)
    runs.prepare(_cfg(paths={"output_dir": "r1"}, ckpt_path="r1/checkpoints/last.ckpt"))
    assert (out / "metrics.json").exists()
    (out / "checkpoints").mkdir()
    (out / "checkpoints" / "last.ckpt").write_bytes(b"old")
    runs.prepare(_cfg(paths={"output_dir": "r1"}, overwrite=True))
    assert not (out / "metrics.json").exists() and not (out / "checkpoints").exists()


def test_rank_from_environment(monkeypatch):
    for k in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(k, raising=False)
    assert runs.env_rank() == 0
    monkeypatch.setenv("SLURM_PROCID", "1")
    monkeypatch.setenv("SLURM_NTASKS", "1")
    assert runs.env_rank() == 0  # one task: SLURM's PROCID says nothing about DDP
    monkeypatch.setenv("SLURM_NTASKS", "2")
    assert runs.env_rank() == 1 and runs._rank0(".hydra") is None and runs._rank0_log("x.log") == os.devnull


def test_job_samples_cover_every_value():
    jobs = job_samples(["a=1", "model.hidden=8,16,32", "optimizer.lr=0.1,0.2", "w=interval(0.5, 2.0)"])
    assert jobs[0] == ["a=1", "model.hidden=8", "optimizer.lr=0.1", "w=0.5"]
    assert len(jobs) == 4  # first job + 2 more hidden values + 1 more lr value
    assert {j[1] for j in jobs} == {"model.hidden=8", "model.hidden=16", "model.hidden=32"}
    # sweeper params from the config are checked unless the command line overrides the key
    jobs = job_samples(["model.hidden=8"], {"model.hidden": "choice(16, 32)", "model.activation": "crelu,screlu"})
    assert sorted(tuple(j) for j in jobs) == [("model.activation=crelu", "model.hidden=8"),
                                             ("model.activation=screlu", "model.hidden=8")]


@pytest.mark.parametrize("extra,needle", [
    (["model.hidden=8,,16"], "a sweep override does not parse"),
    (["model.hidden=[8"], "a sweep override does not parse"),
    (["model.activation=crelu,bogus"], "activation 'bogus'"),
    (["model.hidden=8,-3"], "model.hidden=-3"),
    (["paths.output_dir=x"], "paths.output_dir is per job in a sweep"),
    (["hydra/launcher=nope"], "hydra/launcher/nope"),
    (["hparams_search=nope"], "hparams_search"),
])
def test_bad_sweeps_are_one_line(extra, needle, sample_dataset, capsys):
    args = ["-m", "experiment=demo", f"data.path={sample_dataset}", *extra]
    err = check_train_args(args)
    assert err and needle in err and "\n" not in err
    assert main(["train", *args]) == 2
    line = capsys.readouterr().err.strip().splitlines()
    assert len(line) == 1 and line[0].startswith("nnue train: error:")


def test_sweep_dir_with_finished_jobs_refused(sample_dataset, tmp_path):
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / "metrics.json").write_text(json.dumps({"val_loss": 0.1}))
    args = ["-m", "experiment=demo", f"data.path={sample_dataset}", f"hydra.sweep.dir={tmp_path}", "model.hidden=8,16"]
    assert "already holds 1 job folder" in check_train_args(args)
    assert check_train_args(args + ["+overwrite=true"]) is None


def test_slurm_launcher_without_slurm_is_one_line(sample_dataset, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    err = check_train_args(["-m", "experiment=demo", f"data.path={sample_dataset}", "hydra/launcher=submitit_slurm"])
    assert "sbatch not found" in err and "scripts/slurm_up.sh" in err


def test_single_run_into_finished_folder_refused(sample_dataset, tmp_path):
    (tmp_path / "metrics.json").write_text("{}")
    base = ["experiment=demo", f"data.path={sample_dataset}", f"paths.output_dir={tmp_path}"]
    assert "finished run" in check_train_args(base)
    assert check_train_args(base + ["+overwrite=true"]) is None
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "last.ckpt").write_bytes(b"")  # resuming needs the file to exist
    assert check_train_args(base + [f"ckpt_path={tmp_path}/checkpoints/last.ckpt"]) is None


def test_threads_follow_the_cpus_given(monkeypatch):
    """runs.apply_threads: NNUE_THREADS (the submitit launchers' cpus_per_task), then
    SLURM_CPUS_PER_TASK, then joblib's OMP_NUM_THREADS; torch and OMP_NUM_THREADS follow."""
    import torch

    from nnue.trainer.launchers import _task_ids
    from nnue.trainer.runs import apply_threads

    before = torch.get_num_threads()
    try:
        for var in ("NNUE_THREADS", "SLURM_CPUS_PER_TASK", "OMP_NUM_THREADS"):
            monkeypatch.delenv(var, raising=False)
        monkeypatch.setenv("OMP_NUM_THREADS", "3")
        assert apply_threads() == (3, "OMP_NUM_THREADS") and torch.get_num_threads() == 3
        monkeypatch.setenv("SLURM_CPUS_PER_TASK", "2")
        assert apply_threads() == (2, "SLURM_CPUS_PER_TASK") and torch.get_num_threads() == 2
        monkeypatch.setenv("NNUE_THREADS", "1")
        assert apply_threads() == (1, "NNUE_THREADS") and torch.get_num_threads() == 1
        assert os.environ["OMP_NUM_THREADS"] == "1"
    finally:
        torch.set_num_threads(before)
    # scontrol's ArrayTaskId: one task, or the pending ones as a range with a throttle
    assert _task_ids("3") == ["3"] and _task_ids("0-3%16") == ["0", "1", "2", "3"] and _task_ids("1,4-5") == ["1", "4", "5"]
