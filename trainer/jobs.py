"""What happens after each training job (a Hydra callback, ``conf/hydra/default.yaml``).

- A failed job writes ``OUT/error.txt`` (the exception, one line first), so that ``nnue sweep
  report`` lists it with its error instead of dropping it.
- With ``export=true`` (``experiment=activation_ablation`` sets it) a finished job exports its
  net: ``OUT/export/`` (``net.safetensors``, ``net.bin``, ``export.json``: audit and
  float-vs-int cross-check; values that would overflow are clipped and counted, ``--clip``),
  then times integer evaluation on the job's validation positions into
  ``OUT/export/eval_speed.json`` (``evals_per_s``). An export that fails writes
  ``OUT/export_error.txt``; the job still counts as trained.

Only rank 0 acts (DDP jobs run the callback on every rank).
"""
from __future__ import annotations

import json
import logging
import time
import traceback
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from nnue.pipeline.atomic import atomic_write_bytes

from .runs import env_rank

log = logging.getLogger(__name__)

EXPORT_DIR = "export"
SPEED_POSITIONS = 20000


def _write(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def export_job(out: Path, positions: int = 20000) -> dict:
    """Export ``out/checkpoints/last.ckpt`` into ``out/export`` (clipping what would overflow)
    and time integer evals/s on up to :data:`SPEED_POSITIONS` validation positions.
    Returns export.json's contents with ``eval_speed`` added."""
    import torch

    from nnue.inference import evaluate, load
    from nnue.trainer.export import export, load_checkpoint, validation_boards

    net_dir = out / EXPORT_DIR
    r = export(out / "checkpoints" / "last.ckpt", net_dir, clip=True, max_positions=positions)
    _, _, data, _ = load_checkpoint(out / "checkpoints" / "last.ckpt")
    boards, _ = validation_boards(data, SPEED_POSITIONS)
    net = load(net_dir / "net.safetensors")
    speed = {"positions": int(boards.shape[0]), "evals_per_s": None, "threads": torch.get_num_threads()}
    if boards.shape[0]:
        evaluate(net, boards[:256])  # warm-up (one-time exactness checks, allocations)
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            evaluate(net, boards)
            best = min(best, time.perf_counter() - t)
        speed["evals_per_s"] = round(boards.shape[0] / best)
    _write(net_dir / "eval_speed.json", json.dumps(speed) + "\n")
    return r | {"eval_speed": speed}


def name_best_trial(sweep: Path) -> dict | None:
    """Add the best trial's job folder to an Optuna sweep's ``optimization_results.yaml``
    (``best_job``, ``best_job_dir``; null when the best trial ran in another sweep of a stored
    study, outside this folder, whose folder ``best_job_note`` names when nnue's sweeper recorded it). Returns the new contents, or None without that file."""
    import yaml

    from .sweep_report import _collect, best_job

    p = sweep / "optimization_results.yaml"
    if not p.exists():
        return None
    res = yaml.safe_load(p.read_text()) or {}
    rows, _, st = _collect(sweep, None, None)
    job = best_job(rows, res.get("best_params") or {})
    res["best_job"] = job["job"] if job else None
    res["best_job_dir"] = job["dir"] if job else None
    if job is None:
        from .sweep_report import optuna_summary

        elsewhere = (optuna_summary(sweep, rows, st) or {}).get("elsewhere")
        res["best_job_note"] = (f"the best trial ran in another sweep of the stored study: {elsewhere}" if elsewhere
                                else "the best trial is not in this sweep folder (another sweep of the stored study)")
    _write(p, yaml.safe_dump(res, sort_keys=False))
    return res


class JobEnd(Callback):
    """Hydra callback: error.txt for a failed job; with ``export=true`` the finished job's export;
    after an Optuna sweep, the best trial's folder in ``optimization_results.yaml``."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        target = str(config.hydra.launcher.get("_target_", ""))
        if target.startswith("hydra_plugins.nnue_forge_launchers."):
            from .launchers import register

            register()  # an editable install is not found by Hydra's plugin scan
        if str(config.hydra.sweeper.get("_target_", "")).startswith("hydra_plugins.nnue_forge_launchers."):
            from hydra.core.plugins import Plugins

            from hydra_plugins.nnue_forge_launchers.optuna_sweeper import OptunaSweeper

            Plugins.instance().register(OptunaSweeper)  # the same, for nnue's Optuna sweeper

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            sweep = Path(str(config.hydra.sweep.dir))  # the cached unique folder (nnue.unique_dir)
            if sweep.is_dir():
                name_best_trial(sweep)
        except Exception as e:  # the sweep ran; naming its best folder is a convenience
            log.warning("could not name the best trial's folder: %s", e)

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if env_rank() != 0:
            return
        try:
            from hydra.core.hydra_config import HydraConfig

            out = Path(HydraConfig.get().runtime.output_dir)
        except Exception:
            return
        if job_return.status == JobStatus.FAILED:
            e = job_return._return_value
            first = " ".join(f"{type(e).__name__}: {e}".split())
            tb = "".join(traceback.format_exception(type(e), e, e.__traceback__)) if isinstance(e, BaseException) else ""
            out.mkdir(parents=True, exist_ok=True)
            _write(out / "error.txt", first + "\n\n" + tb)
            return
        if job_return.status != JobStatus.COMPLETED or not config.get("export", False):
            return
        if not (out / "checkpoints" / "last.ckpt").exists():
            return
        try:
            r = export_job(out)
            log.info("exported %s: mean |Δ| %.2f cp, %s integer evals/s", out / EXPORT_DIR,
                     r["cross_check"].get("mean_abs_diff_cp", float("nan")), r["eval_speed"]["evals_per_s"])
            (out / "export_error.txt").unlink(missing_ok=True)
        except Exception as e:  # the job trained; its export is reported, not fatal
            log.error("export of %s failed: %s", out, e)
            _write(out / "export_error.txt", " ".join(f"{type(e).__name__}: {e}".split()) + "\n")
