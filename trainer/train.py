"""Hydra entry point of ``nnue train``: compose the config tree in ``conf/`` and fit.

``nnue train experiment=demo data.path=DATASET paths.output_dir=OUT`` leaves
``OUT/checkpoints/last.ckpt`` (Lightning, for resume: ``ckpt_path=...``), ``OUT/checkpoints/
weights-*.safetensors`` (weights only), CSV and TensorBoard logs under ``OUT/``, plots under
``OUT/plots/`` and ``OUT/metrics.json`` (final validation loss and Spearman ρ, global_step).

The schedules' unit is the optimiser step; the run's length in steps comes from how it stops
(:func:`nnue.trainer.schedule.total_steps`) and is logged at the start.
"""
from __future__ import annotations

import json
import logging
import os
import signal
import sys
import warnings

import hydra
import pytorch_lightning as pl
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf, open_dict

from .callbacks import (EmptyTrainingSet, Interrupts, Plots, Progress, RunCheckpoint, SweepInterrupted,
                        TrainingInterrupted, plain)
from .schedule import total_steps
from . import runs  # registers the conf/ resolvers (run folders, rank-0-only Hydra files)

log = logging.getLogger("nnue.trainer")


def quiet_lightning() -> None:
    """Silence Lightning's start-up chatter (accelerator lines, tips, litlogger advertisement)
    and its repeated advisory warnings; NNUE_DEBUG=1 keeps them."""
    if os.environ.get("NNUE_DEBUG"):
        return
    for name in ("pytorch_lightning", "lightning.pytorch", "lightning_fabric", "lightning"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from pytorch_lightning.utilities.warnings import PossibleUserWarning

    warnings.filterwarnings("ignore", category=PossibleUserWarning)
    for msg in (".*does not have many workers.*", ".*litlogger.*", ".*LitLogger.*", ".*exists and is not empty.*",
                ".*resuming from a checkpoint that ended before the epoch ended.*",
                ".*The number of training batches.*", ".*Total length of .* across ranks is zero.*",
                ".*IterableDataset.*__len__.*", ".*`training_step` returned `None`.*", ".*LeafSpec.*",
                ".*overridden `on_after_batch_transfer`.*", ".*`srun` command is available.*",
                ".*could not find the monitored key.*", ".*`weights_only` was not set.*"):
        warnings.filterwarnings("ignore", message=msg)


def _world_size(t: dict) -> int:
    d, n = t.get("devices", 1), t.get("num_nodes", 1) or 1
    if isinstance(d, int) and d > 0:
        return d * n
    if isinstance(d, (list, tuple)):
        return len(d) * n
    return 1


def run(cfg: DictConfig) -> dict:
    """Train from a composed config; returns the final metrics (also in metrics.json).
    Raises TrainingInterrupted (SIGINT/SIGTERM, last.ckpt saved), EmptyTrainingSet, ValueError."""
    quiet_lightning()
    interrupts = Interrupts(None)  # from the start: a stop signal during set-up is kept, not fatal
    interrupts.install()
    try:
        return _run(cfg, interrupts)
    finally:
        interrupts.restore()


def _run(cfg: DictConfig, interrupts: Interrupts) -> dict:
    threads, threads_from = runs.apply_threads()  # cpus_per_task / joblib's share, not every core
    pl.seed_everything(cfg.seed, workers=True, verbose=False)
    out = runs.prepare(cfg)  # the job's own folder; absolute data.path/ckpt_path; refuses finished runs
    from nnue.pipeline.manifest import wait_for_first_part

    for p in [cfg.data.path] if isinstance(cfg.data.path, str) else list(cfg.data.path):
        wait_for_first_part(p, float(cfg.data.get("wait_for_data_s", 0) or 0), log.info)  # `nnue train` waited already
    datamodule = instantiate(cfg.data)
    tcfg = plain(cfg.trainer)
    spe, exact = datamodule.steps_per_epoch(_world_size(tcfg))
    if spe == 0 and datamodule.manifest_rows() == 0:
        raise EmptyTrainingSet(f"{', '.join(datamodule.paths)}: the training data holds 0 positions")
    total = total_steps(tcfg, max(spe, 1))
    if cfg.get("ckpt_path"):  # a resume that changes the run: exact or refused (trainer/resume.py)
        from .resume import ResumeFinished, check_resume

        probe = datamodule.train_set or datamodule.probe
        parts = sorted(str(p) for p, _ in probe.parts) if probe is not None else None
        try:
            datamodule.replay_parts = check_resume(cfg.ckpt_path, datamodule.batch_size, _world_size(tcfg),
                         int(tcfg.get("accumulate_grad_batches") or 1), total, parts, max(spe, 1))
        except ResumeFinished as e:
            old = out / runs.FINISHED_MARKER
            note = ("its metrics.json is kept" if old.exists() else "no metrics.json (it was not written)")
            log.info("nothing to train: %s is at step %s of %s; %s", cfg.ckpt_path, f"{e.args[0]:,}",
                     f"{e.args[1]:,}", note)
            print(f"nnue train: {cfg.ckpt_path} already reaches step {e.args[0]:,} of this run's {e.args[1]:,}: "
                  f"nothing to train ({note}); raise trainer.max_epochs or +trainer.max_steps to continue",
                  file=sys.stderr)
            import json as _json

            return _json.loads(old.read_text()) if old.exists() else {"global_step": e.args[0]}
    if runs.env_rank() == 0:  # a resumed run is unfinished until it ends (after the checks above)
        (out / runs.FINISHED_MARKER).unlink(missing_ok=True)
    from .lit import resolve_qat

    qat, why = resolve_qat(cfg.model, cfg.get("init_weights"))
    if why:
        log.info("%s", why)
    with open_dict(cfg):
        cfg.model.qat = qat  # the checkpoint's hparams hold the bool the run used
    from .fast_path import resolve as resolve_fast_path

    fast_path = resolve_fast_path(cfg)  # model.backend=auto, optimizer.sparse_ft=auto -> what runs
    if runs.env_rank() == 0:
        log.info(fast_path)
    lit = instantiate(cfg.model, optimizer=instantiate(cfg.optimizer), scheduler=plain(cfg.get("scheduler")),
                      lambda_schedule=plain(cfg.get("wdl_lambda")))
    lit.set_run_length(total, spe, float(cfg.optimizer.lr))
    if cfg.get("init_weights"):  # warm start (nnue retrain): weights only; fresh optimiser and schedule
        from .registry import load_weights
        load_weights(lit.model, cfg.init_weights)
    out.mkdir(parents=True, exist_ok=True)
    ckpt = RunCheckpoint(str(out / "checkpoints"),
                         int((plain(cfg.get("checkpoints")) or {}).get("weights_every_n_epochs", 0) or 0))
    interrupts.checkpoint = ckpt
    bar = bool(tcfg.get("enable_progress_bar", True)) and sys.stderr.isatty()
    me = tcfg.get("max_epochs")
    callbacks = [ckpt, interrupts, Progress(total, datamodule.batch_size * _world_size(tcfg),
                                            me if me not in (None, -1) else None, bar),
                 Plots(str(out / "plots"))]
    for c in cfg.get("callbacks", {}).values():
        if c is not None:
            mode = {"mode": "max"} if "spearman" in str(c.get("monitor") or "") else {}
            callbacks.append(instantiate(c, **mode))
    es = plain(cfg.get("early_stopping")) or {}
    if es.get("patience") is not None:
        from pytorch_lightning.callbacks import EarlyStopping

        monitor = es.get("monitor") or cfg.get("optimized_metric", "val_loss")
        callbacks.append(EarlyStopping(monitor=monitor, patience=int(es["patience"]),
                                       min_delta=float(es.get("min_delta", 0.0)),
                                       mode="max" if "spearman" in monitor else "min",
                                       check_on_train_epoch_end=False, verbose=False))
    loggers = [instantiate(c) for c in cfg.get("logger", {}).values() if c is not None]
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers, enable_progress_bar=False,
                          enable_model_summary=bool(os.environ.get("NNUE_DEBUG")))
    ws = _world_size(tcfg)
    acc = int(tcfg.get("accumulate_grad_batches") or 1)
    per_step = f"{datamodule.batch_size * ws * acc:,}" + (f": batches of {datamodule.batch_size:,}" +
                                                          (f" on {ws} ranks" if ws > 1 else "") +
                                                          (f", {acc} accumulated" if acc > 1 else "")
                                                          if ws > 1 or acc > 1 else "")
    log.info("run: %s steps of %s positions, %s %s batches per epoch%s, output %s, %d torch thread(s) (%s)",
             f"{total:,}", per_step, "exactly" if exact else "about", f"{spe:,}",
             "" if exact else " (estimated from the manifest's row counts after the split and filters)", out,
             threads, threads_from)
    from pytorch_lightning.utilities.exceptions import SIGTERMException

    if interrupts.signum is not None:  # stopped during set-up: nothing trained, nothing to resume
        raise TrainingInterrupted(interrupts.signum, 0, None)
    try:
        trainer.fit(lit, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    except SIGTERMException:  # Lightning's SIGTERM path (a SystemExit with status 0): ours instead
        raise TrainingInterrupted(interrupts.signum or 15, trainer.global_step, str(ckpt.last)) from None
    except RuntimeError as e:
        if "yields no rows" in str(e):
            raise EmptyTrainingSet(f"the training set is empty after the split and filters "
                                   f"({_counts(datamodule)}); check data.filters and data.val_fraction") from None
        raise
    if trainer.global_step == 0 and not trainer.interrupted:
        raise EmptyTrainingSet(f"no training step was run ({_counts(datamodule)})")
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    metrics["global_step"] = trainer.global_step
    metrics["epochs"] = trainer.current_epoch
    metrics["total_steps"] = total
    metrics["early_stopped"] = bool(trainer.should_stop and trainer.global_step < total)
    metrics["torch_threads"] = threads  # what the job trained with (runs.apply_threads)
    if trainer.global_rank == 0:  # under DDP only rank 0 writes the run folder
        from nnue.pipeline.atomic import atomic_write_bytes

        # config.yaml first: metrics.json is the finished marker (runs.FINISHED_MARKER), written last
        atomic_write_bytes(out / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True).encode())
        atomic_write_bytes(out / "metrics.json", (json.dumps(metrics, indent=1, sort_keys=True) + "\n").encode())
    log.info("metrics: %s", metrics)
    return metrics


def _counts(dm) -> str:
    counts = dict(getattr(dm.train_set, "counts", {}) or {})
    read = counts.pop("read", 0)
    return f"read {read:,} rows, filtered out " + (", ".join(f"{v:,} ({k})" for k, v in sorted(counts.items()))
                                                    or "none")


def _exit_code(e: BaseException) -> int:
    if isinstance(e, TrainingInterrupted):
        return 128 + e.signum
    return 2 if isinstance(e, (ValueError, KeyError, FileNotFoundError)) else 1


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    try:
        metrics = run(cfg)
    except KeyboardInterrupt:
        if multirun:  # stop the sweep, not only this job
            raise SweepInterrupted(signal.SIGINT, HydraConfig.get().runtime.output_dir) from None
        print("nnue train: interrupted before training started; nothing to resume", file=sys.stderr)
        sys.exit(130)
    except TrainingInterrupted as e:
        if multirun:  # a stop signal stops the sweep: a KeyboardInterrupt passes through Hydra's launcher
            raise SweepInterrupted(e.signum, HydraConfig.get().runtime.output_dir) from None
        if os.environ.get("NNUE_DEBUG"):
            raise
        if runs.env_rank() == 0:  # under DDP one line, the launcher's (every rank stops at the same step)
            print(f"nnue train: {' '.join(str(e).split())}", file=sys.stderr)
        sys.exit(_exit_code(e))
    except Exception as e:
        if os.environ.get("NNUE_DEBUG") or multirun:
            raise  # a sweep records the failed job and goes on; NNUE_DEBUG: the full traceback
        kind = "" if isinstance(e, (TrainingInterrupted, ValueError)) else f"{type(e).__name__}: "
        msg = " ".join(str(e).split()) or type(e).__name__
        print(f"nnue train: {'' if isinstance(e, TrainingInterrupted) else 'error: '}{kind}{msg}", file=sys.stderr)
        sys.exit(_exit_code(e))
    return metrics.get(cfg.get("optimized_metric", "val_loss"))
