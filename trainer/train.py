"""Hydra entry point of ``nnue train``: compose the config tree in ``conf/`` and fit.

``nnue train experiment=demo data.path=DATASET paths.output_dir=OUT`` leaves
``OUT/checkpoints/last.ckpt`` (Lightning, for resume: ``ckpt_path=...``), ``OUT/checkpoints/
weights-*.safetensors`` (weights only), CSV and TensorBoard logs under ``OUT/``, and
``OUT/metrics.json`` (final validation loss and Spearman ρ).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path

import hydra
import pytorch_lightning as pl
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)


def run(cfg: DictConfig) -> dict:
    """Train from a composed config; returns the final metrics (also in metrics.json)."""
    pl.seed_everything(cfg.seed, workers=True)
    out = Path(cfg.paths.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    datamodule = instantiate(cfg.data)
    lit = instantiate(cfg.model, optimizer=instantiate(cfg.optimizer),
                      scheduler=instantiate(cfg.scheduler) if cfg.get("scheduler") else None)
    if cfg.get("init_weights"):  # warm start (nnue retrain): weights only; fresh optimiser and schedule
        from .registry import load_weights
        load_weights(lit.model, cfg.init_weights)
    callbacks = [instantiate(c) for c in cfg.get("callbacks", {}).values() if c is not None]
    loggers = [instantiate(c) for c in cfg.get("logger", {}).values() if c is not None]
    trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=loggers)
    trainer.fit(lit, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    metrics = {k: float(v) for k, v in trainer.callback_metrics.items()}
    metrics["global_step"] = trainer.global_step
    metrics["epochs"] = trainer.current_epoch
    (out / "metrics.json").write_text(json.dumps(metrics, indent=1, sort_keys=True) + "\n")
    (out / "config.yaml").write_text(OmegaConf.to_yaml(cfg, resolve=True))
    log.info("metrics: %s", metrics)
    return metrics


@hydra.main(version_base="1.3", config_path="../conf", config_name="train")
def main(cfg: DictConfig) -> float | None:
    metrics = run(cfg)
    return metrics.get(cfg.get("optimized_metric", "val_loss"))
