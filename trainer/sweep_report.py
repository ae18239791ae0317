"""``nnue sweep report SWEEP_DIR [-o DIR]``: one row per job of a sweep, as Markdown, CSV and a PNG.

A job is a sub-folder of the sweep folder with a ``.hydra/`` folder or a ``metrics.json``
(``hydra.sweep.dir/<job number>``). Its row:

- ``job``, ``status`` (``finished``, ``failed`` with ``error.txt``'s first line, ``unfinished``);
- ``overrides``: the job's own overrides, those of ``.hydra/overrides.yaml`` that differ between
  jobs (the ones shared by all jobs are printed once above the table);
- ``val_loss``, ``val_spearman``, ``val_block_sparsity`` (L0 block sparsity, when logged), from
  ``metrics.json``;
- when the job exported (``export=true``: ``OUT/export/export.json``): ``overflows`` (values the
  audit clipped, plus problems it reported), ``mean_abs_dcp`` (float-vs-int mean |Δcp| on
  validation positions), ``max_abs_dcp``; ``int_evals_per_s`` from ``OUT/export/eval_speed.json``;
  an export that failed fills ``error`` from ``export_error.txt``.

Writes ``DIR/sweep_report.md``, ``DIR/sweep_report.csv``, ``DIR/sweep_report.png`` (atomic
writes; ``DIR`` defaults to the sweep folder) and returns the rows.
"""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from nnue.pipeline.atomic import atomic_write_bytes

COLUMNS = ["job", "status", "overrides", "val_loss", "val_spearman", "val_block_sparsity", "overflows",
           "mean_abs_dcp", "max_abs_dcp", "int_evals_per_s", "error"]


class SweepReportError(ValueError):
    """The folder is not a sweep folder (one line)."""


def _json(p: Path) -> dict | None:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def _overrides(job: Path) -> list[str]:
    p = job / ".hydra" / "overrides.yaml"
    if not p.exists():
        return []
    import yaml

    try:
        v = yaml.safe_load(p.read_text())
    except yaml.YAMLError:
        return []
    return [str(x) for x in v] if isinstance(v, list) else []


def _first_line(p: Path) -> str | None:
    try:
        return p.read_text().strip().splitlines()[0]
    except (OSError, IndexError):
        return None


def job_dirs(sweep: Path) -> list[Path]:
    """Job folders of a sweep, in job-number order (numbers first, then names)."""
    jobs = [p for p in sweep.iterdir() if p.is_dir() and not p.name.startswith(".")
            and ((p / ".hydra").is_dir() or (p / "metrics.json").exists() or (p / "error.txt").exists())]
    return sorted(jobs, key=lambda p: (not p.name.isdigit(), int(p.name) if p.name.isdigit() else 0, p.name))


def collect(sweep: str | Path) -> tuple[list[dict], list[str]]:
    """(rows, overrides common to every job). Raises SweepReportError for a folder without jobs."""
    sweep = Path(sweep)
    if not sweep.is_dir():
        raise SweepReportError(f"{sweep}: no such folder (give hydra.sweep.dir of a sweep)")
    jobs = job_dirs(sweep)
    if not jobs:
        raise SweepReportError(f"{sweep}: no job folders (sub-folders with .hydra/ or metrics.json); "
                               "is it a sweep folder (hydra.sweep.dir)?")
    ovr = {j: _overrides(j) for j in jobs}
    common = sorted(set.intersection(*(set(v) for v in ovr.values()))) if ovr else []
    rows = []
    for j in jobs:
        m = _json(j / "metrics.json")
        err = _first_line(j / "error.txt")
        status = "failed" if err else "finished" if m is not None else "unfinished"
        row = {c: None for c in COLUMNS}
        row.update(job=j.name, status=status, error=err,
                   overrides=" ".join(o for o in ovr[j] if o not in common))
        if m:
            for k in ("val_loss", "val_spearman", "val_block_sparsity"):
                row[k] = m.get(k)
        ex = _json(j / "export" / "export.json")
        if ex:
            audit, cross = ex.get("audit") or {}, ex.get("cross_check") or {}
            row["overflows"] = int(sum((audit.get("clipped") or {}).values())) + len(audit.get("problems") or [])
            row["mean_abs_dcp"] = cross.get("mean_abs_diff_cp")
            row["max_abs_dcp"] = cross.get("max_abs_diff_cp")
            speed = _json(j / "export" / "eval_speed.json") or {}
            row["int_evals_per_s"] = speed.get("evals_per_s")
        elif (j / "export_error.txt").exists():
            row["error"] = "export: " + (_first_line(j / "export_error.txt") or "failed")
        rows.append(row)
    return rows, common


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return f"{v:.4f}" if abs(v) < 10 else f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}" if abs(v) >= 1000 else str(v)
    return str(v)


def markdown(rows: list[dict], common: list[str], sweep: Path) -> str:
    cols = [c for c in COLUMNS if c in ("job", "status", "overrides") or any(r[c] is not None for r in rows)]
    head = {"val_block_sparsity": "L0 block sparsity", "overflows": "export overflows",
            "mean_abs_dcp": "float-vs-int mean \\|Δcp\\|", "max_abs_dcp": "max \\|Δcp\\|",
            "int_evals_per_s": "integer evals/s"}
    out = [f"# Sweep {sweep}", "", f"{len(rows)} job(s): "
           + ", ".join(f"{sum(r['status'] == s for r in rows)} {s}" for s in ("finished", "failed", "unfinished")
                       if any(r["status"] == s for r in rows)), ""]
    if common:
        out += ["Common overrides: `" + " ".join(common) + "`", ""]
    out.append("| " + " | ".join(head.get(c, c) for c in cols) + " |")
    out.append("|" + "|".join("---" if c in ("job", "status", "overrides", "error") else "---:" for c in cols) + "|")
    for r in rows:
        cells = [_fmt(r[c]).replace("|", "\\|") for c in cols]
        out.append("| " + " | ".join(f"`{x}`" if c == "overrides" and x else x for c, x in zip(cols, cells)) + " |")
    return "\n".join(out) + "\n"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['job']}: {r['overrides'] or '-'}"[:48] for r in rows]
    panels = [(k, t) for k, t in (("val_loss", "final val_loss"), ("val_spearman", "final val_spearman"),
                                  ("mean_abs_dcp", "float-vs-int mean |Δcp|"),
                                  ("int_evals_per_s", "integer evals/s"))
              if any(isinstance(r[k], (int, float)) for r in rows)] or [("val_loss", "final val_loss")]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 0.45 * len(rows) + 1.8), squeeze=False)
    for ax, (k, title) in zip(axes[0], panels):
        vals = [r[k] if isinstance(r[k], (int, float)) else 0.0 for r in rows]
        colors = ["tab:red" if r["status"] == "failed" else "tab:gray" if r[k] is None else "tab:blue" for r in rows]
        ax.barh(range(len(rows)), vals, color=colors)
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels(labels if ax is axes[0][0] else [""] * len(rows), fontsize=8)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
        for i, r in enumerate(rows):
            if r["status"] == "failed":
                ax.text(0, i, " failed", va="center", fontsize=8, color="tab:red")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


def report(sweep: str | Path, out_dir: str | Path | None = None) -> dict:
    """Write the report files; returns {"rows", "common_overrides", "files"}."""
    sweep = Path(sweep)
    rows, common = collect(sweep)
    out = Path(out_dir) if out_dir is not None else sweep
    out.mkdir(parents=True, exist_ok=True)
    md = markdown(rows, common, sweep)
    atomic_write_bytes(out / "sweep_report.md", md.encode())
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: "" if v is None else v for k, v in r.items()})
    atomic_write_bytes(out / "sweep_report.csv", buf.getvalue().encode())
    plot(rows, out / "sweep_report.png")
    files = [str(out / f"sweep_report.{e}") for e in ("md", "csv", "png")]
    return {"rows": rows, "common_overrides": common, "files": files, "markdown": md}


def main(args) -> int:
    """``nnue sweep report`` (args: sweep_dir, output, json)."""
    r = report(args.sweep_dir, args.output)
    if args.json:
        print(json.dumps({k: r[k] for k in ("rows", "common_overrides", "files")}, default=float))
    else:
        print(r["markdown"], end="")
        print(f"wrote {', '.join(r['files'])}")
    return 0
