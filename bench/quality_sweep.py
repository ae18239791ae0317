"""The measurements behind ``experiment=quality``: train, export and report a list of recipes on
all of our own self-play, one after another, and write one row per recipe.

Every row is one ``nnue train`` on the same packed dataset with the same held-out games (the
dataset's game ids with ``data.val_fraction=0.1`` and ``seed=42``: the recipes below keep both), then
``nnue export`` and the quality report (:mod:`nnue.trainer.report`): the Spearman rank correlation
of the *integer* net's evals with Stockfish's search scores on the quiet positions of the held-out
games, the material count's on the same positions, the final val_loss (comparable only between rows
with the same λ) and the training wall time (seconds, this machine, whatever else was running).

Usage::

    python -m bench.quality_sweep --dataset DS --work DIR [--only NAME ...] [--json OUT]
        [--rows ROWS.json]

``--rows`` appends to (and skips the recipes already in) an existing result file, so a sweep that
was stopped resumes. The recipes are the ``RECIPES`` table: name -> Hydra overrides.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

DEMO = ["experiment=demo"]
Q = ["experiment=quality"]
VIRI = ["experiment=deep_demo", "model.deep.hidden_activation=hardswish", "model.deep.l2_activation=swiglu"]

# name -> overrides; each is measured by one full train/export/report
RECIPES: dict[str, list[str]] = {
    "demo": DEMO,
    "demo_h128": DEMO + ["model.hidden=128"],
    "demo_l0": DEMO + ["model.loss.wdl_lambda=0.0"],
    "demo_3x": DEMO + ["data.positions_per_epoch=393216"],
    "demo_l0_3x": DEMO + ["model.loss.wdl_lambda=0.0", "data.positions_per_epoch=393216"],
    "demo_l0_3x_h64": DEMO + ["model.loss.wdl_lambda=0.0", "data.positions_per_epoch=393216", "model.hidden=64"],
    "demo_l0_s800": DEMO + ["model.loss.wdl_lambda=0.0", "model.quant.scale=800"],
    "demo_l0_s1200": DEMO + ["model.loss.wdl_lambda=0.0", "model.quant.scale=1200"],
    "quality": Q,
    "quality_halfkav2_hm": Q + ["features=halfkav2_hm"],
    "quality_kb768hm4": Q + ["features=kb768hm4"],
    "deep_demo": ["experiment=deep_demo"],
    # act_l1 (issue 11): the L1 penalty on L0's activations, for SCReLU (the demo) and for the
    # Viridithas layer sequence (pairwise CReLU, Hard-Swish, Hard-Swish-gated SwiGLU) at deep_demo's widths
    "screlu_act_l1_1e-3": DEMO + ["model.act_l1=1e-3"],
    "screlu_act_l1_1e-2": DEMO + ["model.act_l1=1e-2"],
    "viridithas_seq": VIRI,
    "viridithas_seq_act_l1_1e-3": VIRI + ["model.act_l1=1e-3"],
    "viridithas_seq_act_l1_1e-2": VIRI + ["model.act_l1=1e-2"],
}


def run(cmd: list[str], log: Path) -> None:
    with open(log, "a") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        r = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if r.returncode:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... failed (status {r.returncode}); see {log}")


def measure(name: str, overrides: list[str], dataset: Path, work: Path) -> dict:
    out = work / name
    log = work / f"{name}.log"
    nnue = str(Path(sys.executable).with_name("nnue"))
    if (out / "checkpoints" / "last.ckpt").exists() and (out / "metrics.json").exists():
        train_s = json.loads((out / "quality_row_train_s.json").read_text())
    else:
        t0 = time.perf_counter()
        run([nnue, "train", *overrides, f"data.path={dataset}", f"paths.output_dir={out}",
             "trainer.enable_progress_bar=false", "+overwrite=true"], log)
        train_s = round(time.perf_counter() - t0, 1)
        (out / "quality_row_train_s.json").write_text(json.dumps(train_s))
    run([nnue, "export", str(out / "checkpoints" / "last.ckpt"), "-o", str(out / "net")], log)
    from nnue.trainer.report import report
    r = report(out, out / "net")
    m = json.loads((out / "metrics.json").read_text())
    return {"name": name, "overrides": overrides, "train_seconds": train_s,
            "epochs": m.get("epochs"), "global_step": m.get("global_step"),
            "val_block_sparsity": m.get("val_block_sparsity"), "val_l0_density": m.get("val_l0_density"), **r}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.quality_sweep", description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", required=True, help="a dataset packed from ../shared/data/selfplay")
    p.add_argument("--work", required=True, help="folder for the runs (kept, so a rerun resumes)")
    p.add_argument("--only", nargs="*", default=None, help="recipe names to run (default: all)")
    p.add_argument("--rows", default=None, help="result JSON to extend (rows already in it are kept)")
    p.add_argument("--json", default=None, help="write the result JSON here (default: --rows, else stdout)")
    a = p.parse_args(argv)
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    res = {"rows": []}
    if a.rows and Path(a.rows).exists():
        res = json.loads(Path(a.rows).read_text())
    done = {r["name"] for r in res["rows"]}
    names = a.only if a.only else list(RECIPES)
    for n in names:
        if n in done:
            continue
        row = measure(n, RECIPES[n], Path(a.dataset), work)
        res["rows"].append(row)
        print(json.dumps({k: row[k] for k in ("name", "spearman_net", "spearman_material", "val_loss",
                                               "train_seconds")}), flush=True)
        res["machine"] = f"{platform.machine()}, {os.cpu_count()} cores (shared with other work)"
        out = a.json or a.rows
        if out:
            tmp = Path(str(out) + ".tmp")
            tmp.write_text(json.dumps(res, indent=1))
            tmp.replace(out)
    if not (a.json or a.rows):
        print(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
