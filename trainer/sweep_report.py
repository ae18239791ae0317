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

The **optimised metric** is the sweep's ``optimized_metric`` (``val_loss`` unless set) and its
direction the Optuna sweeper's ``direction``, else ``maximize`` for a Spearman and ``minimize``
otherwise (as the best checkpoint and early stopping do); ``--metric``/``--direction`` override
both. Rows are sorted best first (jobs without the metric, failed and unfinished ones last);
``rank`` numbers the ranked ones and ``best`` marks the first, in every output.

For an Optuna sweep (``optimization_results.yaml``) the report names the job folder whose
parameters are the best ones, and draws Optuna's own plots (optimisation history, parameter
importances; ``optuna.visualization.matplotlib``) into ``sweep_optuna_*.png`` from the study in
its storage, or rebuilt from the job folders when it was kept in memory.

Writes ``DIR/sweep_report.md``, ``DIR/sweep_report.csv``, ``DIR/sweep_report.png`` (the metric
against each swept parameter, and the jobs ranked; the best highlighted) and the JSON of
``--json`` (atomic writes; ``DIR`` defaults to the sweep folder) and returns the rows.
"""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

from nnue.pipeline.atomic import atomic_write_bytes

COLUMNS = ["rank", "best", "job", "status", "overrides", "val_loss", "val_spearman", "val_block_sparsity",
           "overflows", "mean_abs_dcp", "max_abs_dcp", "int_evals_per_s", "error"]
DIRECTIONS = ("minimize", "maximize")


class SweepReportError(ValueError):
    """The folder is not a sweep folder (one line)."""


def _json(p: Path) -> dict | None:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def _yaml(p: Path):
    import yaml

    try:
        return yaml.safe_load(p.read_text())
    except (OSError, yaml.YAMLError):
        return None


def _overrides(job: Path) -> list[str]:
    v = _yaml(job / ".hydra" / "overrides.yaml")
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


def _get(d, dotted: str, default=None):
    for k in dotted.split("."):
        if not isinstance(d, dict) or k not in d:
            return default
        d = d[k]
    return d


def sweep_settings(sweep: Path, jobs: list[Path]) -> dict:
    """What the sweep optimised, from ``multirun.yaml`` (Hydra writes it into the sweep folder) or
    a job's ``.hydra/``: ``{"metric", "direction", "direction_from", "optuna", "study_name",
    "storage", "params"}`` (``params``: ``hydra.sweeper.params`` as override strings)."""
    cfg = _yaml(sweep / "multirun.yaml")
    hyd = _get(cfg, "hydra") if isinstance(cfg, dict) else None
    if not isinstance(cfg, dict):
        for j in jobs:
            c, h = _yaml(j / ".hydra" / "config.yaml"), _yaml(j / ".hydra" / "hydra.yaml")
            if isinstance(c, dict):
                cfg, hyd = c, _get(h, "hydra")
                break
    cfg = cfg if isinstance(cfg, dict) else {}
    sweeper = _get(hyd, "sweeper", {}) or {}
    metric = str(cfg.get("optimized_metric") or "val_loss")
    optuna = "optuna" in str(sweeper.get("_target_", "")).lower()
    d = sweeper.get("direction") if optuna else None
    if isinstance(d, list):  # multi-objective: the report ranks on the first objective
        d = d[0] if d else None
    d = str(d).lower().split(".")[-1] if d is not None else None
    if d in DIRECTIONS:
        direction, origin = d, "hydra.sweeper.direction"
    else:
        direction = "maximize" if "spearman" in metric else "minimize"
        origin = "the metric's kind: a loss is minimised, a Spearman maximised"
    params = sweeper.get("params") if optuna else None
    storage = sweeper.get("storage") if optuna else None
    cwd = _get(hyd, "runtime.cwd")
    if isinstance(storage, str) and storage.startswith("sqlite:///") and not storage.startswith("sqlite:////") \
            and cwd:  # a relative SQLite path is relative to where `nnue train` ran
        storage = "sqlite:///" + str(Path(cwd) / storage[len("sqlite:///"):])
    return {"metric": metric, "direction": direction, "direction_from": origin, "optuna": optuna,
            "study_name": sweeper.get("study_name") if optuna else None, "storage": storage,
            "params": {str(k): str(v) for k, v in params.items()} if isinstance(params, dict) else {}}


def _split(o: str) -> tuple[str, str]:
    k, _, v = o.partition("=")
    return k.lstrip("+~"), v


def collect(sweep: str | Path, metric: str | None = None, direction: str | None = None) -> tuple[list[dict], list[str]]:
    """(rows, overrides common to every job), rows sorted best first. Raises SweepReportError for
    a folder without jobs or a direction that is neither minimize nor maximize."""
    rows, common, _ = _collect(Path(sweep), metric, direction)
    return rows, common


def _collect(sweep: Path, metric: str | None, direction: str | None) -> tuple[list[dict], list[str], dict]:
    if not sweep.is_dir():
        raise SweepReportError(f"{sweep}: no such folder (give hydra.sweep.dir of a sweep)")
    jobs = job_dirs(sweep)
    if not jobs:
        raise SweepReportError(f"{sweep}: no job folders (sub-folders with .hydra/ or metrics.json); "
                               "is it a sweep folder (hydra.sweep.dir)?")
    st = sweep_settings(sweep, jobs)
    if metric:
        st["metric"] = metric
        if direction is None:
            st["direction"] = "maximize" if "spearman" in metric else "minimize"
            st["direction_from"] = "the metric's kind: a loss is minimised, a Spearman maximised"
    if direction is not None:
        if direction not in DIRECTIONS:
            raise SweepReportError(f"--direction {direction}: give minimize or maximize")
        st["direction"], st["direction_from"] = direction, "--direction"
    ovr = {j: _overrides(j) for j in jobs}
    values: dict[str, set] = {}
    for v in ovr.values():
        for o in v:
            k, x = _split(o)
            values.setdefault(k, set()).add(x)
    swept = [k for k, vs in values.items() if len(vs) > 1 or k in st["params"]]
    st["swept"] = swept
    common = sorted(o for o in set.intersection(*(set(v) for v in ovr.values())) if _split(o)[0] not in swept)
    rows = []
    for j in jobs:
        m = _json(j / "metrics.json")
        err = _first_line(j / "error.txt")
        status = "failed" if err else "finished" if m is not None else "unfinished"
        row = {c: None for c in COLUMNS}
        row.update(job=j.name, status=status, error=err, best=False, dir=str(j),
                   overrides=" ".join(o for o in ovr[j] if o not in common),
                   params={k: x for k, x in map(_split, ovr[j]) if k in swept})
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
        v = row.get(st["metric"]) if st["metric"] in row else (m or {}).get(st["metric"])
        row["metric"] = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None
        rows.append(row)
    sign = 1.0 if st["direction"] == "minimize" else -1.0
    order = {"finished": 1, "failed": 2, "unfinished": 3}
    rows.sort(key=lambda r: (0, sign * r["metric"], 0) if r["metric"] is not None and r["status"] == "finished"
              else (order[r["status"]], 0.0, 0))  # stable: job order within a group
    ranked = [r for r in rows if r["metric"] is not None and r["status"] == "finished"]
    for i, r in enumerate(ranked, 1):
        r["rank"] = i
    if ranked:
        ranked[0]["best"] = True
    return rows, common, st


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else ""
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        return f"{v:.4f}" if abs(v) < 10 else f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.2f}"
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 1000 else str(v)
    return str(v)


def _columns(rows: list[dict], st: dict) -> list[str]:
    cols = [c for c in COLUMNS if c in ("rank", "best", "job", "status", "overrides")
            or any(r[c] is not None for r in rows)]
    if st["metric"] not in COLUMNS:
        cols.insert(cols.index("overrides") + 1, "metric")
    return cols


def best_line(rows: list[dict], st: dict) -> str:
    best = next((r for r in rows if r["best"]), None)
    if best is None:
        return f"Best: none (no finished job reported {st['metric']})"
    return (f"Best: job {best['job']}, {st['metric']} {best['metric']:.6g}"
            + (f" (`{best['overrides']}`)" if best["overrides"] else "") + f", folder {best['dir']}")


def markdown(rows: list[dict], common: list[str], sweep: Path, st: dict | None = None,
             optuna: dict | None = None) -> str:
    st = st or {"metric": "val_loss", "direction": "minimize", "direction_from": "default"}
    cols = _columns(rows, st)
    head = {"val_block_sparsity": "L0 block sparsity", "overflows": "export overflows",
            "mean_abs_dcp": "float-vs-int mean \\|Δcp\\|", "max_abs_dcp": "max \\|Δcp\\|",
            "int_evals_per_s": "integer evals/s", "metric": st["metric"]}
    head[st["metric"]] = f"**{st['metric']}** ({'↓' if st['direction'] == 'minimize' else '↑'})"
    out = [f"# Sweep {sweep}", "", f"{len(rows)} job(s): "
           + ", ".join(f"{sum(r['status'] == s for r in rows)} {s}" for s in ("finished", "failed", "unfinished")
                       if any(r["status"] == s for r in rows)), "",
           f"Optimised metric: **{st['metric']}**, {st['direction']}d (direction from {st['direction_from']}); "
           "rows best first.", "", best_line(rows, st), ""]
    if optuna:
        out += [optuna_line(optuna), ""]
    if common:
        out += ["Common overrides: `" + " ".join(common) + "`", ""]
    out.append("| " + " | ".join(head.get(c, c) for c in cols) + " |")
    out.append("|" + "|".join("---" if c in ("best", "job", "status", "overrides", "error") else "---:"
                              for c in cols) + "|")
    for r in rows:
        cells = ["★ best" if c == "best" and r["best"] else _fmt(r[c]).replace("|", "\\|") for c in cols]
        cells = [f"`{x}`" if c == "overrides" and x else f"**{x}**" if r["best"] and x and c != "best" else x
                 for c, x in zip(cols, cells)]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def optuna_line(o: dict) -> str:
    where = (f"job {o['best_job']} ({o['best_job_dir']})" if o.get("best_job") is not None
             else f"in another sweep of the study: {o['elsewhere']}" if o.get("elsewhere")
             else "not in this folder (another sweep of the stored study)")
    return (f"Optuna: best value {o.get('best_value')} with {o.get('best_params')}: {where}"
            + (f"; study '{o['study_name']}' in {o['storage']}" if o.get("storage") else ""))


# ---------------------------------------------------------------------------------------- PNG
def _num(x: str) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def plot(rows: list[dict], path: Path, st: dict | None = None) -> None:
    """The PNG: the optimised metric against each swept parameter (numbers on a numeric axis, a
    log axis when they span 20× or more; anything else as categories), then the jobs ranked best
    first (bars), the best job in red everywhere; export columns as extra ranked panels."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    st = st or {"metric": "val_loss", "direction": "minimize", "swept": []}
    metric, arrow = st["metric"], "lower is better" if st["direction"] == "minimize" else "higher is better"
    ranked = [r for r in rows if r["rank"] is not None]
    params = st.get("swept", [])[:6]
    extra = [(k, t) for k, t in (("mean_abs_dcp", "float-vs-int mean |Δcp|"), ("int_evals_per_s", "integer evals/s"))
             if any(isinstance(r[k], (int, float)) for r in ranked)]
    top = ranked[:20]
    ncols = max(len(params), 1 + len(extra), 1)
    nrows = 2 if params else 1
    bar_h = max(2.6, 0.28 * len(top) + 1.2)
    fig = plt.figure(figsize=(4.4 * ncols, (3.4 if params else 0) + bar_h + 1.2))
    gs = fig.add_gridspec(nrows, ncols, height_ratios=[3.4, bar_h] if params else [bar_h])
    for i, k in enumerate(params):
        ax = fig.add_subplot(gs[0, i])
        pts = [(r["params"].get(k), r["metric"], r["best"]) for r in ranked if r["params"].get(k) is not None]
        if not pts:
            ax.set_title(f"{metric} vs {_short(k.split('.')[-1], 20)}: no finished job", fontsize=10)
            continue
        nums = [_num(x) for x, _, _ in pts]
        if pts and all(v is not None for v in nums):
            xs = nums
            if min(xs) > 0 and max(xs) / min(xs) >= 8:
                ax.set_xscale("log")
            else:
                from matplotlib.ticker import FormatStrFormatter, MaxNLocator

                ax.xaxis.set_major_locator(MaxNLocator(4))
                ax.xaxis.set_major_formatter(FormatStrFormatter("%.3g"))
        else:
            cats = sorted({str(x) for x, _, _ in pts}, key=lambda c: (_num(c) is None, _num(c) or 0, c))
            xs = [cats.index(str(x)) for x, _, _ in pts]
            ax.set_xticks(range(len(cats)))
            ax.set_xticklabels([_short(c, 14) for c in cats], rotation=30 if max(map(len, cats), default=0) > 6 else 0,
                               ha="right" if max(map(len, cats), default=0) > 6 else "center", fontsize=8)
            ax.set_xlim(-0.5, len(cats) - 0.5)
        ax.scatter([x for x, p in zip(xs, pts) if not p[2]], [p[1] for p in pts if not p[2]], s=28,
                   color="tab:blue", alpha=0.8, label="job")
        bx = [(x, p[1]) for x, p in zip(xs, pts) if p[2]]
        if bx:
            ax.scatter([bx[0][0]], [bx[0][1]], s=160, marker="*", color="tab:red", zorder=3, label="best")
        ax.set_xlabel(_short(k, 32), fontsize=9)
        ax.set_ylabel(metric if i == 0 else "", fontsize=9)
        ax.set_title(f"{metric} vs {_short(k.split('.')[-1], 20)}", fontsize=10)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
        if i == 0 and bx:
            ax.legend(fontsize=8, loc="best")
    for i, (k, title) in enumerate([(None, f"{metric} ({arrow})"), *extra]):
        ax = fig.add_subplot(gs[nrows - 1, i])
        vals = [(r["metric"] if k is None else r[k]) for r in top]
        vals = [v if isinstance(v, (int, float)) else 0.0 for v in vals]
        ax.barh(range(len(top)), vals, color=["tab:red" if r["best"] else "tab:blue" for r in top])
        ax.set_yticks(range(len(top)))
        ax.set_yticklabels([f"job {r['job']}" + (" ★" if r["best"] else "") for r in top], fontsize=8)
        ax.invert_yaxis()
        if vals and k is None:
            lo, hi = min(vals), max(vals)
            pad = (hi - lo) * 0.15 or abs(hi) * 0.05 or 1.0
            ax.set_xlim(max(0.0, lo - pad) if lo >= 0 else lo - pad, hi + pad)
        from matplotlib.ticker import FormatStrFormatter, MaxNLocator

        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.xaxis.set_major_formatter(FormatStrFormatter("%.4g"))
        ax.set_title(title + (f" (top {len(top)} of {len(ranked)})" if len(ranked) > len(top) else ""), fontsize=10)
        ax.tick_params(axis="x", labelsize=8)
        ax.grid(axis="x", alpha=0.3)
    if not ranked:
        fig.axes[-1].text(0.5, 0.5, f"no finished job reported {metric}", ha="center", va="center",
                          transform=fig.axes[-1].transAxes)
    best = next((r for r in rows if r["best"]), None)
    left = [f"{sum(r['status'] == s for r in rows)} {s}" for s in ("failed", "unfinished")
            if any(r["status"] == s for r in rows)]
    title = f"{metric}, {st['direction']}d: " + (f"best job {best['job']} = {best['metric']:.5g}" if best
                                                  else "no finished job")
    sub = (best["overrides"] if best and best["overrides"] else "") + (
        ("   |   " if best and best["overrides"] else "") + ", ".join(left) + " (not plotted)" if left else "")
    width_chars = int(4.4 * ncols * 13)
    text = title + ("\n" + "\n".join(textwrap.wrap(sub, width_chars)[:3]) if sub else "")
    fig.suptitle(text, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())


# -------------------------------------------------------------------------------------- Optuna
def _same(a, b) -> bool:
    x, y = _num(str(a)), _num(str(b))
    if x is not None and y is not None:
        return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12)
    return str(a) == str(b)


def best_job(rows: list[dict], best_params: dict) -> dict | None:
    """The finished job whose overrides give exactly ``best_params`` (Optuna's best trial), or None."""
    for r in rows:
        if r["status"] != "finished":
            continue
        got = dict(map(_split, (r["overrides"] or "").split())) | r["params"]
        if all(k in got and _same(got[k], v) for k, v in best_params.items()):
            return r
    return None


def optuna_summary(sweep: Path, rows: list[dict], st: dict) -> dict | None:
    """For an Optuna sweep: optimization_results.yaml with the best trial's job folder."""
    res = _yaml(sweep / "optimization_results.yaml")
    if not st.get("optuna") and not isinstance(res, dict):
        return None
    res = res if isinstance(res, dict) else {}
    bp, value, elsewhere = res.get("best_params") or {}, res.get("best_value"), None
    if st.get("storage") and st.get("study_name"):  # the stored study's best now, and the folder of its sweep
        try:
            from .optuna_study import load, trial_folders

            study = load(str(st["storage"]), str(st["study_name"]))
            best = study.best_trial if study is not None else None
        except Exception:  # an unreadable storage, no finished trial: the results file's best
            best = None
        if best is not None:
            bp, value = dict(best.params), best.value
            elsewhere = trial_folders(study).get(best.number)
    job = best_job(rows, bp) if bp else None
    return {"best_params": bp, "best_value": value, "best_job": job["job"] if job else None,
            "best_job_dir": job["dir"] if job else None,
            "elsewhere": None if job else elsewhere, "study_name": st.get("study_name"),
            "storage": st.get("storage"), "results_file": str(sweep / "optimization_results.yaml")
            if res else None}


def _study(sweep: Path, rows: list[dict], st: dict):
    """The Optuna study: loaded from its storage when it has one, else rebuilt from the job folders
    (one trial per finished job, with the distributions of ``hydra.sweeper.params``)."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage, name = st.get("storage"), st.get("study_name")
    if storage and name:
        if storage.startswith("sqlite:///") and not Path(storage[len("sqlite:///"):]).exists():
            raise SweepReportError(f"{storage}: the study's SQLite file is gone")  # load_study would create it
        return optuna.load_study(study_name=str(name), storage=str(storage)), f"the study in {storage}"
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra_plugins.hydra_optuna_sweeper._impl import create_optuna_distribution_from_override

    parser = OverridesParser.create()
    dists = {}
    for k, v in st["params"].items():
        o = parser.parse_overrides([f"{k}={v}"])[0]
        if o.is_sweep_override():
            dists[k] = create_optuna_distribution_from_override(o)
    study = optuna.create_study(direction=st["direction"], study_name=name or "sweep")
    for r in sorted((r for r in rows if r["metric"] is not None and r["status"] == "finished"),
                    key=lambda r: (not r["job"].isdigit(), int(r["job"]) if r["job"].isdigit() else 0)):
        params = {}
        for k, d in dists.items():
            x = r["params"].get(k)
            if x is None:
                break
            params[k] = (d.choices[[str(c) for c in d.choices].index(x)] if hasattr(d, "choices")
                         and x in [str(c) for c in d.choices] else float(x) if "Int" not in type(d).__name__
                         else int(float(x)))
        else:
            study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=r["metric"]))
    return study, "the job folders (the study was kept in memory)"


def optuna_plots(sweep: Path, rows: list[dict], st: dict, out: Path) -> tuple[list[str], list[str]]:
    """Optuna's own plots into ``out``: (files written, one line per plot left out and why)."""
    files, skipped = [], []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from optuna.visualization import matplotlib as ovm

        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # optuna's ExperimentalWarning (create_trial, add_trial)
            study, origin = _study(sweep, rows, st)
    except Exception as e:  # an optuna without the matplotlib backend, an unreadable storage
        return [], [f"Optuna plots: {' '.join(str(e).split())[:200]}"]
    done = [t for t in study.trials if t.state.name == "COMPLETE"]
    def importances(study):
        # Optuna's numbers (optuna.importance), drawn here: optuna 2.10's default evaluator (fANOVA)
        # fails on today's scikit-learn trees and its matplotlib plot calls matplotlib.cm.get_cmap,
        # removed in matplotlib 3.9; the impurity evaluator works
        import optuna
        from optuna.importance import MeanDecreaseImpurityImportanceEvaluator

        imp = optuna.importance.get_param_importances(study, evaluator=MeanDecreaseImpurityImportanceEvaluator(seed=0))
        fig, ax = plt.subplots()
        names = list(imp)[::-1]
        ax.barh(range(len(names)), [imp[n] for n in names], color="tab:blue")
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels([_short(n, 28) for n in names], fontsize=8)
        ax.set_xlabel(f"importance for {st['metric']} (mean decrease in impurity, sums to 1)", fontsize=9)
        ax.set_title("Hyperparameter importances", fontsize=10)
        return ax

    for name, fn, need in (("history", ovm.plot_optimization_history, 1), ("importances", importances, 2)):
        if len(done) < need:
            skipped.append(f"{name}: needs {need} finished trial(s), the study has {len(done)}")
            continue
        try:
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # optuna's ExperimentalWarning for the matplotlib backend
                ax = fn(study)
            fig = (ax[0] if hasattr(ax, "__len__") else ax).figure
            fig.set_size_inches(7, 4.5)
            fig.suptitle(f"Optuna {name} ({origin})", fontsize=9)
            fig.tight_layout()
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=100)
            plt.close(fig)
            p = out / f"sweep_optuna_{name}.png"
            atomic_write_bytes(p, buf.getvalue())
            files.append(str(p))
        except ImportError as e:
            skipped.append(f"{name}: needs {e.name or 'scikit-learn'} (pip install scikit-learn)")
        except Exception as e:  # e.g. importances of a parameter with one value
            skipped.append(f"{name}: {' '.join(str(e).split())[:200]}")
        finally:
            plt.close("all")
    return files, skipped


# ------------------------------------------------------------------------------------- report
def _public(r: dict) -> dict:
    return {k: r[k] for k in [*COLUMNS, "metric", "params", "dir"]}


def report(sweep: str | Path, out_dir: str | Path | None = None, metric: str | None = None,
           direction: str | None = None, optuna_figures: bool = True) -> dict:
    """Write the report files; returns {"metric", "best", "optuna", "rows", "common_overrides",
    "files", "markdown"} (rows best first)."""
    sweep = Path(sweep)
    rows, common, st = _collect(sweep, metric, direction)
    out = Path(out_dir) if out_dir is not None else sweep
    out.mkdir(parents=True, exist_ok=True)
    opt = optuna_summary(sweep, rows, st)
    files = [str(out / f"sweep_report.{e}") for e in ("md", "csv", "json", "png")]
    if opt is not None and optuna_figures:
        figs, skipped = optuna_plots(sweep, rows, st, out)
        opt.update(plots=figs, plots_skipped=skipped)
        files += figs
    md = markdown(rows, common, sweep, st, opt)
    atomic_write_bytes(out / "sweep_report.md", md.encode())
    buf = io.StringIO()
    cols = _columns(rows, st)
    w = csv.DictWriter(buf, fieldnames=cols, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    for r in rows:
        w.writerow({k: "" if r[k] is None else ("true" if r[k] else "false") if isinstance(r[k], bool) else r[k]
                    for k in cols})
    atomic_write_bytes(out / "sweep_report.csv", buf.getvalue().encode())
    best = next((r for r in rows if r["best"]), None)
    result = {"metric": {k: st[k] for k in ("metric", "direction", "direction_from")} | {"name": st["metric"]},
              "best": None if best is None else {"job": best["job"], "value": best["metric"], "dir": best["dir"],
                                                 "overrides": best["overrides"]},
              "swept": st["swept"], "optuna": opt, "rows": [_public(r) for r in rows],
              "common_overrides": common, "files": files}
    atomic_write_bytes(out / "sweep_report.json", (json.dumps(result, indent=1, default=float) + "\n").encode())
    plot(rows, out / "sweep_report.png", st)
    return result | {"markdown": md}


def main(args) -> int:
    """``nnue sweep report`` (args: sweep_dir, output, json, metric, direction)."""
    r = report(args.sweep_dir, args.output, getattr(args, "metric", None), getattr(args, "direction", None))
    if args.json:
        print(json.dumps({k: v for k, v in r.items() if k != "markdown"}, default=float))
    else:
        print(r["markdown"], end="")
        for line in (r["optuna"] or {}).get("plots_skipped", []):
            print(f"(Optuna plot left out: {line})")
        print(f"wrote {', '.join(r['files'])}")
    return 0
