"""Training callbacks: weights-only checkpoints in safetensors."""
from __future__ import annotations

import json
from pathlib import Path

import pytorch_lightning as pl
from safetensors.torch import save as st_save

from nnue.pipeline.atomic import atomic_write_bytes


def plain(obj):
    """OmegaConf containers (and dicts/lists holding them) -> plain Python data."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    if isinstance(obj, (DictConfig, ListConfig)):
        return OmegaConf.to_container(obj, resolve=True)
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


def weights_metadata(lit, trainer: pl.Trainer | None) -> dict[str, str]:
    """Everything export needs besides the tensors: hparams, data location, progress."""
    meta = {"hparams": json.dumps(plain(dict(lit.hparams)), default=str, sort_keys=True)}
    if trainer is not None:
        dm = getattr(trainer, "datamodule", None)
        if dm is not None:
            meta["data"] = json.dumps(plain(dict(dm.hparams)), default=str, sort_keys=True)
        val = trainer.callback_metrics.get("val_loss")
        meta["progress"] = json.dumps({"epoch": trainer.current_epoch, "global_step": trainer.global_step,
                                       "val_loss": None if val is None else float(val)})
    return meta


class WeightsCheckpoint(pl.Callback):
    """After each training epoch, write ``<dirpath>/weights-last.safetensors`` and
    ``<dirpath>/weights-epoch<N>.safetensors`` (model state dict, float32, plus metadata);
    atomic writes. Lightning's own ``last.ckpt`` (optimiser state, for resume) sits beside them."""

    def __init__(self, dirpath: str, every_n_epochs: int = 1):
        self.dirpath, self.every = Path(dirpath), every_n_epochs

    def on_validation_end(self, trainer: pl.Trainer, lit) -> None:
        if trainer.sanity_checking or trainer.global_rank != 0:
            return
        epoch = trainer.current_epoch
        self.dirpath.mkdir(parents=True, exist_ok=True)
        data = st_save({k: v.detach().cpu().contiguous() for k, v in lit.model.state_dict().items()},
                       weights_metadata(lit, trainer))
        atomic_write_bytes(self.dirpath / "weights-last.safetensors", data)
        if (epoch + 1) % self.every == 0:
            atomic_write_bytes(self.dirpath / f"weights-epoch{epoch:04d}.safetensors", data)
