"""nnue sweep report: one row per job (failed ones included), Markdown + CSV + PNG; and
experiment=activation_ablation end to end (every activation of the code's list, each exported)."""
from __future__ import annotations

import csv
import json

import yaml
from tests.sweeps.sweep_util import TINY, nnue

from nnue.trainer.model import PERSPECTIVE_ACTIVATIONS
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
