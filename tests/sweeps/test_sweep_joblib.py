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
        # joblib gives each of its n_jobs=2 workers CPUs // 2 threads, and the job trains with them
        assert metrics["torch_threads"] == max(1, os.cpu_count() // 2)
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


def test_optuna_search_two_trials_stored_and_resumed(sample_dataset, tmp_path):
    """hparams_search=lr_hidden with an SQLite storage: Optuna proposes lr and hidden, each trial in
    its own folder, the best value is the smallest val_loss of the trials and
    optimization_results.yaml names its folder; a second sweep with the same study name resumes
    the study (3 trials in the database) and the report draws Optuna's plots from it."""
    import optuna

    db = tmp_path / "optuna.db"
    storage = f"sqlite:///{db}"
    sweep = tmp_path / "optuna"
    common = ["hparams_search=lr_hidden", *TINY, f"data.path={sample_dataset}", "hydra.sweeper.n_jobs=1",
              f"hydra.sweeper.storage={storage}", "hydra.sweeper.study_name=resume_me"]
    r = nnue("train", *common, "hydra.sweeper.n_trials=2", f"hydra.sweep.dir={sweep}")
    assert "setup plugin alembic" not in r.stdout + r.stderr
    losses = {}
    for job in ("0", "1"):
        cfg = yaml.safe_load((sweep / job / "config.yaml").read_text())
        assert cfg["model"]["hidden"] in (16, 32, 64) and 3e-4 <= cfg["optimizer"]["lr"] <= 1e-2
        losses[job] = json.loads((sweep / job / "metrics.json").read_text())["val_loss"]
    best = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert abs(best["best_value"] - min(losses.values())) < 1e-6
    assert best["best_job"] == min(losses, key=losses.get) and best["best_job_dir"] == str(sweep / best["best_job"])
    study = optuna.load_study(study_name="resume_me", storage=storage)
    assert sorted(t.value for t in study.trials) == sorted(losses.values())
    # resume by name: one more trial joins the stored study
    sweep2 = tmp_path / "optuna2"
    nnue("train", *common, "hydra.sweeper.n_trials=1", f"hydra.sweep.dir={sweep2}")
    study = optuna.load_study(study_name="resume_me", storage=storage)
    assert len(study.trials) == 3 and all(t.state.name == "COMPLETE" for t in study.trials)
    new = json.loads((sweep2 / "0" / "metrics.json").read_text())["val_loss"]
    assert sorted(t.value for t in study.trials) == sorted([*losses.values(), new])
    rep = json.loads(nnue("sweep", "report", sweep2, "--json").stdout)
    assert rep["optuna"]["storage"] == storage and rep["optuna"]["plots"], rep["optuna"]
    assert (sweep2 / "sweep_optuna_history.png").exists()
    # a storage in a folder that does not exist: one line before anything runs
    r = nnue("train", *common[:-2], "hydra.sweeper.storage=sqlite:///" + str(tmp_path / "no" / "x.db"),
             check=False)
    assert r.returncode == 2 and "does not exist" in r.stderr and len(r.stderr.strip().splitlines()) == 1
