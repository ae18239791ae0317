"""A 2×2 sweep through hydra/launcher=joblib (always runs): four jobs, four folders, nothing lost."""
from __future__ import annotations

import json
import os

import yaml
from tests.sweeps.sweep_util import TINY, nnue


def test_joblib_2x2_sweep_every_job_owns_its_folder(sample_dataset, tmp_path):
    rel = os.path.relpath(sample_dataset, tmp_path)  # relative to where nnue runs, with chdir=true
    sweep = tmp_path / "sweep"
    nnue("train", "-m", *TINY, f"data.path={rel}", "model.hidden=8,16", "optimizer.lr=0.001,0.003",
         "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "hydra.job.chdir=true",
         "hydra.sweep.dir=sweep", cwd=tmp_path)
    jobs = sorted(p for p in sweep.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert [p.name for p in jobs] == ["0", "1", "2", "3"]
    combos = set()
    for job in jobs:
        metrics = json.loads((job / "metrics.json").read_text())
        assert metrics["val_loss"] > 0 and metrics["epochs"] == 1
        cfg = yaml.safe_load((job / "config.yaml").read_text())
        assert cfg["paths"]["output_dir"] == str(job)  # the job's folder is its paths.output_dir
        assert cfg["data"]["path"] == str(sample_dataset)  # resolved against the starting directory
        assert (job / "checkpoints" / "last.ckpt").exists() and (job / ".hydra" / "overrides.yaml").exists()
        combos.add((cfg["model"]["hidden"], cfg["optimizer"]["lr"]))
    assert combos == {(8, 0.001), (8, 0.003), (16, 0.001), (16, 0.003)}
    # the same sweep folder again: refused in one line, nothing touched
    before = (jobs[0] / "metrics.json").read_text()
    r = nnue("train", "-m", *TINY, f"data.path={rel}", "model.hidden=8,16", "hydra.sweep.dir=sweep",
             cwd=tmp_path, check=False)
    assert r.returncode == 2 and "already holds 4 job folder(s)" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert (jobs[0] / "metrics.json").read_text() == before


def test_optuna_search_two_trials(sample_dataset, tmp_path):
    """hparams_search=lr_hidden: Optuna proposes lr and hidden, each trial in its own folder,
    the best value is the smallest val_loss of the trials."""
    sweep = tmp_path / "optuna"
    nnue("train", "hparams_search=lr_hidden", *TINY, f"data.path={sample_dataset}", "hydra.sweeper.n_trials=2",
         "hydra.sweeper.n_jobs=1", f"hydra.sweep.dir={sweep}")
    losses = {}
    for job in ("0", "1"):
        cfg = yaml.safe_load((sweep / job / "config.yaml").read_text())
        assert cfg["model"]["hidden"] in (16, 32, 64) and 3e-4 <= cfg["optimizer"]["lr"] <= 1e-2
        losses[job] = json.loads((sweep / job / "metrics.json").read_text())["val_loss"]
    best = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert abs(best["best_value"] - min(losses.values())) < 1e-6
