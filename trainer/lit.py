"""LightningModule wrapping :class:`~nnue.trainer.model.PerspectiveNet` or :class:`~nnue.trainer.model.DeepNet`.

Batches arrive packed (``boards`` (B, 32) uint8, ``score``, ``result``) and are expanded into a
:class:`~nnue.pipeline.batch.SparseBatch` on the training device in ``on_after_batch_transfer``.
After every optimiser step the weights are clamped to the quantisation scheme's limits, so that
every trained net can be exported. Validation logs ``val_loss`` and ``val_spearman`` (net eval vs
the dataset's scores).
"""
from __future__ import annotations

import numpy as np
import pytorch_lightning as pl
import torch

from nnue.inference.net import QuantScheme
from nnue.pipeline.batch import SparseBatch, to_sparse_batch
from nnue.pipeline.features import get_feature_set, parse_output_buckets

from .callbacks import plain
from .loss import check_loss_config, training_loss
from .metrics import spearman
from .model import build_model


class LitNNUE(pl.LightningModule):
    """hidden/activation: the net; features: feature-set name; output_buckets: e.g.
    "MaterialCount<8>"; quant: QuantScheme fields; loss: {"wdl_lambda", "power"};
    optimizer/scheduler: factories (Hydra ``_partial_``) taking params / the optimiser;
    backend: kernel backend (auto: Triton on CUDA, torch on CPU | triton | torch).
    factoriser: train virtual shared features beside the real ones
    (:func:`~nnue.trainer.model.factor_map`), folded in at export. kind: "perspective" |
    "deep"; deep: {"l1_outputs", "l2_outputs", "hidden_activation"} of a deep net.
    qat: train quantisation-aware (:func:`~nnue.trainer.model.fake_quant` on the scheme's
    grids). loss: also ``target`` ("wdl" | "residual": train the net on teacher − base_eval),
    ``residual_space``, ``teacher`` (:func:`~nnue.trainer.loss.check_loss_config`). act_l1: weight of the L1 penalty on the L0 activations (``act_l1 · mean(x0)``,
    x0 in [0, 1]) that pushes them to zero, for the block-sparse L1 path of inference; logged
    with ``l0_density`` (fraction of nonzero activations) and ``val_block_sparsity`` (fraction
    of all-zero blocks of 4)."""

    def __init__(self, hidden: int, activation: str, features: str, output_buckets: str,
                 quant: dict | None = None, loss: dict | None = None, optimizer=None,
                 scheduler=None, backend: str = "auto", factoriser: bool = False,
                 kind: str = "perspective", deep: dict | None = None, qat: bool = False,
                 act_l1: float = 0.0):
        super().__init__()
        quant, loss, deep = plain(quant), plain(loss), plain(deep)  # DictConfig -> dict: checkpoints hold plain data
        self.save_hyperparameters(ignore=["optimizer", "scheduler"])
        self.feature_set = get_feature_set(features)
        self.buckets = parse_output_buckets(output_buckets)
        self.scheme = QuantScheme(**(quant or {}))
        self.loss_cfg = check_loss_config(loss)  # target=residual: trainer/loss.py
        self.model = build_model(kind, features, self.feature_set.num_inputs, hidden, activation,
                                 self.buckets.count, backend, factoriser, deep,
                                 product_scale=self.scheme.qa / (1 << self.scheme.l0_shift))
        self.arch = self.model.arch
        if qat:
            self.model.enable_qat(self.scheme)
        self.act_l1 = float(act_l1)
        self.optimizer_factory, self.scheduler_factory = optimizer, scheduler
        self._val_pred: list[torch.Tensor] = []
        self._val_score: list[torch.Tensor] = []

    def on_after_batch_transfer(self, batch, dataloader_idx: int = 0) -> SparseBatch:
        return to_sparse_batch(batch, self.feature_set, self.buckets)

    def forward(self, b: SparseBatch) -> torch.Tensor:
        return self.model(b.stm_indices, b.nstm_indices, b.bucket)

    def _loss(self, b: SparseBatch):
        y, h = self.model.forward_with_activations(b.stm_indices, b.nstm_indices, b.bucket)
        return y, h, training_loss(y, b, self.scheme.scale, **self.loss_cfg)

    def training_step(self, b: SparseBatch, batch_idx: int):
        _, h, loss = self._loss(b)
        self.log("train_loss", loss, prog_bar=True, batch_size=len(b))
        if self.act_l1:
            self.log("train_l0_density", (h.detach() > 0).float().mean(), batch_size=len(b))
            loss = loss + self.act_l1 * h.mean()
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx: int) -> None:
        self.model.clip_weights(self.scheme.ft_clip, self.scheme.l1_clip)

    def validation_step(self, b: SparseBatch, batch_idx: int):
        y, h, loss = self._loss(b)
        self.log("val_loss", loss, prog_bar=True, on_epoch=True, batch_size=len(b))
        h = h.detach()
        self.log("val_l0_density", (h > 0).float().mean(), on_epoch=True, batch_size=len(b))
        if h.shape[1] >= 4:
            blocks = h[:, : h.shape[1] // 4 * 4].reshape(h.shape[0], -1, 4)
            self.log("val_block_sparsity", (blocks == 0).all(-1).float().mean(), on_epoch=True, batch_size=len(b))
        pred = y * self.scheme.scale
        if self.loss_cfg["target"] == "residual":  # the eval is base + net
            pred = pred + torch.nan_to_num(b.base_eval)
        self._val_pred.append(pred.detach().cpu())
        self._val_score.append(b.score.detach().cpu())

    def on_validation_epoch_end(self) -> None:
        if not self._val_pred and not self.trainer.sanity_checking:
            import warnings
            warnings.warn("validation split is empty: no val_loss; raise data.val_fraction", stacklevel=1)
        if self._val_pred:
            rho = spearman(torch.cat(self._val_pred).numpy(), torch.cat(self._val_score).numpy())
            self.log("val_spearman", float(np.nan_to_num(rho)), prog_bar=True)
        self._val_pred.clear()
        self._val_score.clear()

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Record this checkpoint's own validation loss (export writes it into the net's provenance)."""
        val = self.trainer.callback_metrics.get("val_loss") if self.trainer is not None else None
        checkpoint["nnue_forge"] = {"val_loss": None if val is None else float(val)}

    def configure_optimizers(self):
        if self.optimizer_factory is None:
            raise ValueError("LitNNUE needs an optimizer factory (Hydra optimizer config)")
        opt = self.optimizer_factory(self.parameters())
        if self.scheduler_factory is None:
            return opt
        return {"optimizer": opt, "lr_scheduler": {"scheduler": self.scheduler_factory(opt),
                                                   "interval": "epoch"}}
