"""nnue sweep report: one row per job (failed ones included), Markdown + CSV + PNG; and
experiment=activation_ablation end to end (every activation of the code's list, each exported)."""
from __future__ import annotations

import csv
import json

import yaml
from tests.sweeps.sweep_util import TINY, nnue

from nnue.trainer.kinds.perspective import PERSPECTIVE_ACTIVATIONS
from nnue.trainer.sweep_report import report


def _job(root, name, overrides, metrics=None, error=None, export=None):
    d = root / name
    (d / ".hydra").mkdir(parents=True)
    (d / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    if metrics:
        (d / "metrics.json").write_text(json.dumps(metrics))
    if error:
        (d / "error.txt").write_text(error + "\n\nTraceback ...\n")
    if export:
        (d / "export").mkdir()
        (d / "export" / "export.json").write_text(json.dumps(export))
        (d / "export" / "eval_speed.json").write_text(json.dumps({"evals_per_s": 123456}))
    return d


def test_report_rows_failed_job_kept(tmp_path):
    sweep = tmp_path / "sweep"
    _job(sweep, "0", ["data.path=x", "model.hidden=8"], {"val_loss": 0.05, "val_spearman": 0.8, "val_block_sparsity": 0.25},
         export={"audit": {"clipped": {"l0w": 3}, "problems": []}, "cross_check": {"mean_abs_diff_cp": 1.5, "max_abs_diff_cp": 9.0}})
    _job(sweep, "1", ["data.path=x", "model.hidden=16"], error="ValueError: activation 'bogus'")
    _job(sweep, "10", ["data.path=x", "model.hidden=32"])  # started, never finished
    (sweep / ".submitit").mkdir()
    r = report(sweep, tmp_path / "rep")
    rows = r["rows"]
    assert [x["job"] for x in rows] == ["0", "1", "10"] and r["common_overrides"] == ["data.path=x"]
    assert rows[0]["status"] == "finished" and rows[0]["overflows"] == 3
    assert rows[0]["mean_abs_dcp"] == 1.5 and rows[0]["int_evals_per_s"] == 123456 and rows[0]["overrides"] == "model.hidden=8"
    assert rows[1]["status"] == "failed" and rows[1]["error"] == "ValueError: activation 'bogus'"
    assert rows[2]["status"] == "unfinished"
    md = (tmp_path / "rep" / "sweep_report.md").read_text()
    assert "activation 'bogus'" in md and "| 1 | failed |" in md and "integer evals/s" in md
    with open(tmp_path / "rep" / "sweep_report.csv") as f:
        table = list(csv.DictReader(f))
    assert [t["status"] for t in table] == ["finished", "failed", "unfinished"] and table[0]["val_loss"] == "0.05"
    assert (tmp_path / "rep" / "sweep_report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _optuna_hydra(job, direction="maximize", metric="val_spearman", storage=None):
    """What Hydra writes into a job's .hydra/ for an Optuna sweep (the parts the report reads)."""
    (job / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"optimized_metric": metric}))
    (job / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump({"hydra": {
        "runtime": {"cwd": str(job.parent)},
        "sweeper": {"_target_": "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper",
                    "direction": direction, "study_name": "s", "storage": storage,
                    "params": {"optimizer.lr": "tag(log, interval(0.0003, 0.01))",
                               "model.hidden": "choice(16, 32, 64)"}}}}))


def test_report_names_the_best_job_everywhere(tmp_path):
    """Rows sorted by the optimised metric in its direction (the Optuna sweeper's: maximize
    val_spearman here), the best marked in md, csv, json and png; the best trial's folder named
    from optimization_results.yaml; Optuna's plots rebuilt from the job folders."""
    sweep = tmp_path / "sweep"
    spear = {"0": 0.41, "1": 0.77, "2": 0.55, "3": None}
    lrs = {"0": 0.0005, "1": 0.004, "2": 0.0012, "3": 0.002}
    for j, hidden in zip(spear, (16, 32, 64, 16)):
        m = None if spear[j] is None else {"val_loss": 0.05 - (spear[j] or 0) / 100, "val_spearman": spear[j]}
        d = _job(sweep, j, [f"optimizer.lr={lrs[j]}", f"model.hidden={hidden}", "data.path=x"], m,
                 error="RuntimeError: boom" if spear[j] is None else None)
        _optuna_hydra(d)
    (sweep / "optimization_results.yaml").write_text(yaml.safe_dump(
        {"name": "optuna", "best_params": {"model.hidden": 32, "optimizer.lr": 0.004}, "best_value": 0.77}))
    r = report(sweep, tmp_path / "rep")
    assert r["metric"]["name"] == "val_spearman" and r["metric"]["direction"] == "maximize"
    assert [x["job"] for x in r["rows"]] == ["1", "2", "0", "3"]
    assert [x["rank"] for x in r["rows"]] == [1, 2, 3, None] and [x["best"] for x in r["rows"]] == [True, False, False, False]
    assert r["best"]["job"] == "1" and r["best"]["value"] == 0.77 and r["swept"] == ["optimizer.lr", "model.hidden"]
    assert r["optuna"]["best_job"] == "1" and r["optuna"]["best_job_dir"] == str(sweep / "1")
    md = (tmp_path / "rep" / "sweep_report.md").read_text()
    assert "Optimised metric: **val_spearman**, maximized (direction from hydra.sweeper.direction)" in md
    first = next(x for x in md.splitlines() if x.startswith("| **1**"))
    assert "★ best" in first and "model.hidden=32" in first
    with open(tmp_path / "rep" / "sweep_report.csv") as f:
        table = list(csv.DictReader(f))
    assert [(t["job"], t["rank"], t["best"]) for t in table] == [("1", "1", "true"), ("2", "2", "false"),
                                                                 ("0", "3", "false"), ("3", "", "false")]
    js = json.loads((tmp_path / "rep" / "sweep_report.json").read_text())
    assert js["best"]["job"] == "1" and js["rows"][0]["best"] is True
    png = (tmp_path / "rep" / "sweep_report.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image

    h, w, _ = matplotlib.image.imread(tmp_path / "rep" / "sweep_report.png").shape
    assert w >= 800 and h >= 500  # two parameter panels above the ranked bars
    plots = {p.rsplit("/", 1)[1] for p in r["optuna"]["plots"]}
    try:
        import sklearn  # noqa: F401
        assert plots == {"sweep_optuna_history.png", "sweep_optuna_importances.png"}, r["optuna"]["plots_skipped"]
    except ImportError:
        assert plots == {"sweep_optuna_history.png"}
    # the user's choice of metric and direction wins
    r2 = report(sweep, tmp_path / "rep2", metric="val_loss", direction="maximize")
    assert [x["job"] for x in r2["rows"]][:3] == ["0", "2", "1"] and r2["metric"]["direction_from"] == "--direction"
    # a basic sweep's direction follows the metric's kind: a loss is minimised
    for j in ("0", "1", "2", "3"):
        (sweep / j / ".hydra" / "hydra.yaml").unlink()
        (sweep / j / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"optimized_metric": "val_loss"}))
    (sweep / "optimization_results.yaml").unlink()
    r3 = report(sweep, tmp_path / "rep3")
    assert r3["metric"]["direction"] == "minimize" and [x["job"] for x in r3["rows"]] == ["1", "2", "0", "3"]
    assert r3["optuna"] is None


def test_report_bad_folder_is_one_line(tmp_path):
    r = nnue("sweep", "report", tmp_path, check=False)
    assert r.returncode == 2 and r.stderr.startswith("nnue sweep: error:") and len(r.stderr.splitlines()) == 1


def test_activation_ablation_exports_every_activation(sample_dataset, tmp_path):
    sweep = tmp_path / "ablation"
    nnue("train", "experiment=activation_ablation", *TINY[1:], "model.hidden=8", f"data.path={sample_dataset}",
         f"hydra.sweep.dir={sweep}")
    out = json.loads(nnue("sweep", "report", sweep, "--json").stdout)
    rows = out["rows"]
    assert sorted(r["overrides"] for r in rows) == sorted(f"model.activation={a}" for a in PERSPECTIVE_ACTIVATIONS)
    for r in rows:
        assert r["status"] == "finished" and r["val_loss"] > 0
        assert r["overflows"] is not None and r["mean_abs_dcp"] >= 0 and r["int_evals_per_s"] > 0
    for job in sweep.iterdir():
        if job.is_dir() and job.name.isdigit():
            ex = json.loads((job / "export" / "export.json").read_text())
            assert (job / "export" / "net.safetensors").exists() and ex["cross_check"]["positions"] > 0
