"""LightningModule wrapping the float model of a net kind (:mod:`nnue.trainer.kinds`), built from
the model config's net settings.

Batches arrive packed (``boards`` (B, 32) uint8, ``score``, ``result``) and are expanded into a
:class:`~nnue.pipeline.batch.SparseBatch` on the training device in ``on_after_batch_transfer``.
After every optimiser step the weights are clamped to the quantisation scheme's limits, so that
every trained net can be exported. Validation logs ``val_loss`` and ``val_spearman`` (net eval vs
the dataset's scores).
"""
from __future__ import annotations

import logging

import pytorch_lightning as pl
import torch

from nnue.spec.quant import QuantScheme
from nnue.pipeline.batch import SparseBatch, to_sparse_batch
from nnue.pipeline.features import get_feature_set, parse_output_buckets

from .callbacks import plain
from .loss import check_loss_config, training_loss
from .schedule import Ramp, Schedule, lr_schedule
from .val_metrics import ValidationSums

from . import kinds


# what training_step logs: a callback that monitors one of them makes every step report
TRAIN_STEP_METRICS = ("train_loss", "lr", "wdl_lambda", "train_l0_density")


class LitNNUE(pl.LightningModule):
    """features: feature-set name; output_buckets: e.g. "MaterialCount<8>"; quant: QuantScheme
    fields; loss: {"wdl_lambda", "power"}, also ``target`` ("wdl" | "residual": train the net on
    teacher − base_eval), ``residual_space``, ``teacher`` (:func:`~nnue.trainer.loss.check_loss_config`);
    optimizer/scheduler: factories (Hydra ``_partial_``) taking params / the optimiser.

    ``**net``: the float net's settings, one mapping the net's kind reads
    (:func:`nnue.trainer.kinds.build`): ``kind`` (default perspective), ``hidden``,
    ``activation``, ``backend`` (kernel backend: auto | triton | torch | numba), ``factoriser``
    (virtual shared features, :func:`~nnue.trainer.model.factor_map`, folded in at export) and the
    kind's own group (``model.deep``, ``model.tiny``, ``model.sfnnv5``, ...: its ``layers_key``).
    They are saved flat in the checkpoint's hparams, as the config has them, so that export
    rebuilds the same net.

    qat: train quantisation-aware (:func:`~nnue.trainer.model.fake_quant` on the scheme's grids);
    "auto" (the config's default) is resolved by ``nnue train`` (:func:`resolve_qat`) and means
    off anywhere else, so the checkpoint's hparams always hold a bool.
    act_l1: weight of the L1 penalty on the L0 activations (``act_l1 · mean(x0)``, x0 in [0, 1])
    that pushes them to zero, for the block-sparse L1 path of inference; logged with
    ``l0_density`` (fraction of nonzero activations) and ``val_block_sparsity`` (fraction of
    all-zero blocks of 4). alpha: a residual net's α (eval = base + α·net), and max_bytes: the
    byte budget of net.safetensors, both read by ``nnue export`` from the hparams."""

    def __init__(self, features: str, output_buckets: str, quant: dict | None = None, loss: dict | None = None,
                 optimizer=None, scheduler=None, qat: bool | str = False, act_l1: float = 0.0,
                 lambda_schedule: dict | None = None, alpha: float = 0.5, max_bytes: int | None = None, **net):
        super().__init__()
        qat = qat is True  # "auto" unresolved: off (the hparams saved below hold the bool)
        quant, loss = plain(quant), plain(loss)  # DictConfig -> dict: checkpoints hold plain data
        net = {k: plain(v) for k, v in net.items()}
        self.save_hyperparameters(ignore=["optimizer", "scheduler", "lambda_schedule"])
        self.feature_set = get_feature_set(features)
        self.buckets = parse_output_buckets(output_buckets)
        self.scheme = QuantScheme(**(quant or {}))
        self.loss_cfg = check_loss_config(loss)  # target=residual: trainer/loss.py
        self.model = kinds.build(net, self.feature_set, self.buckets, self.scheme)
        self.arch = self.model.arch
        if qat:
            self.model.enable_qat(self.scheme)
        self.act_l1 = float(act_l1)
        self.optimizer_factory, self.scheduler_cfg = optimizer, plain(scheduler)
        self.lambda_cfg = plain(lambda_schedule)
        # built by set_run_length() once the run's length in steps is known (train.py)
        self.lr_schedule: Schedule | None = None
        self.lambda_ramp: Ramp | None = None
        self.total_steps: int | None = None
        self.resume_note: str | None = None
        self._val = ValidationSums()  # every validation row once, over all ranks (trainer/val_metrics.py)

    # ---------------------------------------------------------------- schedules (unit: optimiser step)
    def set_run_length(self, total_steps: int, steps_per_epoch: int | None, base_lr: float) -> None:
        """Build the lr schedule and the λ ramp for a run of ``total_steps`` optimiser steps
        (:func:`nnue.trainer.schedule.total_steps`). base_lr: the optimiser's lr (the peak)."""
        self.total_steps = int(total_steps)
        self.lr_schedule = lr_schedule(self.scheduler_cfg, base_lr, total_steps, steps_per_epoch)
        lam = dict(self.lambda_cfg or {})
        start = lam.get("start")
        start = self.loss_cfg["wdl_lambda"] if start is None else float(start)
        end = start if lam.get("end") is None else float(lam["end"])
        self.lambda_ramp = Ramp(start, end, str(lam.get("shape", "linear")), int(total_steps))

    def current_lr(self) -> float:
        return self.lr_schedule(self.global_step) if self.lr_schedule else float("nan")

    def current_lambda(self) -> float:
        return self.lambda_ramp(self.global_step) if self.lambda_ramp else self.loss_cfg["wdl_lambda"]

    def on_train_batch_start(self, batch, batch_idx: int) -> None:
        if self.lr_schedule is not None:
            lr = self.lr_schedule(self.global_step)
            opts = self.optimizers()
            for opt in opts if isinstance(opts, list) else [opts]:
                for g in opt.param_groups:
                    g["lr"] = lr

    # ---------------------------------------------------------------- schedule-free AdamW
    def _schedule_free(self):
        """The optimiser if it is schedule-free (has train()/eval() and a train_mode flag), else None."""
        if self._trainer is None or not self.trainer.optimizers:
            return None
        opt = self.trainer.optimizers[0]
        inner = getattr(opt, "optimizer", opt)
        return inner if hasattr(inner, "eval") and "train_mode" in inner.param_groups[0] else None

    def eval_state_dict(self) -> dict[str, torch.Tensor]:
        """The net's weights to evaluate and export, canonical keys (no ``_orig_mod.``), on CPU:
        for schedule-free AdamW the averaged weights (optimizer.eval()), for a row-sparse optimiser
        the weights as a flush would leave them (:meth:`weights_of_step`, the training state left
        as it is), else the weights as they are."""
        flushed = {k[len("model."):]: v for k, v in self.weights_of_step().items()}
        opt = self._schedule_free()
        x = {}
        if opt is not None:  # x = lerp(y, z, 1 − 1/β1), what optimizer.eval() would set, without touching y
            with torch.no_grad():
                for g in opt.param_groups:
                    if g["train_mode"]:
                        for p in g["params"]:
                            if "z" in opt.state[p]:
                                x[id(p)] = torch.lerp(p, opt.state[p]["z"].to(p.device), 1 - 1 / g["betas"][0])
        params = {name: id(p) for name, p in self.model.named_parameters()}
        return {c: x.get(params.get(k), flushed.get(c, v)).detach().cpu().clone().contiguous()
                for k, v in self.model.state_dict(keep_vars=True).items() for c in [k.replace("_orig_mod.", "")]}

    def on_fit_start(self) -> None:
        # CPU training: keep freed memory in the heap, so that each step's large temporaries do
        # not fault in fresh pages (nnue.kernels.host_memory: 2.3x on sfnnv5; NNUE_MALLOC=default
        # opts out)
        if self.device.type == "cpu":
            from nnue.kernels.host_memory import retain_freed_memory

            retain_freed_memory()
        # DDP: the buffers are constants (factor_map), so no per-forward buffer broadcast, which the
        # first validation forward after training would run: a collective a rank without
        # validation rows never joins (trainer/val_metrics.py)
        ddp = self.trainer.strategy.model if self._trainer is not None else None
        if isinstance(ddp, torch.nn.parallel.DistributedDataParallel):
            ddp.forward_sync_buffers = ddp.broadcast_buffers = False

    def on_train_epoch_start(self) -> None:
        opt = self._schedule_free()
        if opt is not None:
            opt.train()

    def on_validation_epoch_start(self) -> None:
        self.flush_optimizer()
        opt = self._schedule_free()
        if opt is not None:
            opt.eval()

    def encode_batch(self, batch) -> SparseBatch:
        """A packed batch -> its SparseBatch, encoded where its tensors are; a SparseBatch (encoded
        ahead by the data module's prefetch thread, :mod:`nnue.trainer.data`) as it is."""
        return batch if isinstance(batch, SparseBatch) else to_sparse_batch(batch, self.feature_set, self.buckets)

    def on_after_batch_transfer(self, batch, dataloader_idx: int = 0) -> SparseBatch:
        return self.encode_batch(batch)

    def forward(self, b: SparseBatch) -> torch.Tensor:
        return self.model(b.stm_indices, b.nstm_indices, b.bucket)

    def _loss(self, b: SparseBatch, wdl_lambda: float):
        y, h = self.model.forward_with_activations(b.stm_indices, b.nstm_indices, b.bucket)
        cfg = dict(self.loss_cfg, wdl_lambda=wdl_lambda)  # λ from the schedule (lambda_schedule)
        return y, h, training_loss(y, b, self.scheme.scale, **cfg)

    # ---------------------------------------------------------------- per-step logging
    # Lightning's self.log costs 0.3-0.7 ms a call (it moves and checks a torchmetrics state per
    # key), which was 3% of a 42 ms CPU step for three calls. So the training step's scalars go
    # to self.log only on the steps where something reads them (_report_step); in between, λ is
    # summed in Python. What every reader sees is unchanged: the logger gets the same values at
    # the same steps, callback_metrics holds the last step's train_loss and lr at every epoch
    # end and at the run's end, and the epoch's wdl_lambda is the same weighted mean.
    _train_monitored = False   # a callback monitors a training metric: report every step
    _lam_sum = 0.0             # Σ λ·positions since the last report
    _lam_n = 0                 # positions since the last report

    def on_train_start(self) -> None:
        self._lam_sum, self._lam_n = 0.0, 0
        self._train_monitored = any(getattr(c, "monitor", None) in TRAIN_STEP_METRICS for c in self.trainer.callbacks)

    def _report_step(self) -> bool:
        """Whether this training step's scalars must reach ``self.log``: a callback monitors
        them; the logger writes this step (Lightning's own ``log_every_n_steps`` rule); the epoch's
        last batch (Lightning's prefetching fetcher knows it before the step, whether or not the
        epoch's length is); the run's last step (``max_steps``). True where Lightning's loop
        attributes are missing (another Lightning version): every step, as before."""
        t = self._trainer
        if t is None or self._train_monitored:
            return True
        try:
            if t._logger_connector.should_update_logs or t.fit_loop.epoch_loop.batch_progress.is_last_batch:
                return True
        except AttributeError:
            return True
        return 0 < t.max_steps <= t.global_step + 1 or t.should_stop

    def training_step(self, b: SparseBatch, batch_idx: int):
        lam = self.current_lambda()
        _, h, loss = self._loss(b, lam)
        n = len(b)
        self._lam_sum, self._lam_n = self._lam_sum + lam * n, self._lam_n + n
        if self._report_step():
            self.log("train_loss", loss, prog_bar=True, batch_size=n)
            if self.lr_schedule is not None:
                self.log("lr", self.current_lr(), on_step=True, on_epoch=False, batch_size=n)
            # the mean λ since the last report, weighted by its positions: Lightning's epoch mean
            # of these is the mean over every step of the epoch
            self.log("wdl_lambda", self._lam_sum / self._lam_n, on_step=False, on_epoch=True, batch_size=self._lam_n)
            self._lam_sum, self._lam_n = 0.0, 0
            if self.act_l1:
                self.log("train_l0_density", (h.detach() > 0).float().mean(), batch_size=n)
        if self.act_l1:
            loss = loss + self.act_l1 * h.mean()
        return loss

    def on_train_batch_end(self, outputs, batch, batch_idx: int) -> None:
        # a row-sparse optimiser clamps the rows of ft.weight it updated: no dense pass over (F, H)
        self.model.clip_weights(self.scheme.ft_clip, self.scheme.l1_clip, ft_weight=self._row_sparse() is None)

    def on_train_end(self) -> None:
        self.flush_optimizer()

    def validation_step(self, b: SparseBatch, batch_idx: int):
        # at the final λ, so that val_loss compares across epochs whatever the λ schedule
        y, h, loss = self._loss(b, self.lambda_ramp.end if self.lambda_ramp else self.loss_cfg["wdl_lambda"])
        h = h.detach()
        means = {"val_loss": loss.detach(), "val_l0_density": (h > 0).float().mean()}
        if h.shape[1] >= 4:
            blocks = h[:, : h.shape[1] // 4 * 4].reshape(h.shape[0], -1, 4)
            means["val_block_sparsity"] = (blocks == 0).all(-1).float().mean()
        pred = y * self.scheme.scale
        if self.loss_cfg["target"] == "residual":  # the eval is base + net
            pred = pred + torch.nan_to_num(b.base_eval)
        self._val.add(len(b), means, pred.reshape(-1), b.score)

    def on_validation_epoch_end(self) -> None:
        metrics, rows = self._val.result(self.trainer)  # all ranks' rows (collective under DDP)
        self._val.reset()
        if not rows and not self.trainer.sanity_checking and self.trainer.is_global_zero:
            import warnings
            warnings.warn("validation split is empty: no val_loss; raise data.val_fraction", stacklevel=1)
        for k, v in metrics.items():  # the same values on every rank: monitors decide alike
            self.log(k, v, prog_bar=k in ("val_loss", "val_spearman"), rank_zero_only=False, sync_dist=False)
        opt = self._schedule_free()
        if opt is not None and self.trainer.state.fn == "fit":  # back to the training weights
            opt.train()

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Record this checkpoint's own validation loss (export writes it into the net's
        provenance) and the schedules in force. ``state_dict`` holds the weights to export
        (schedule-free: the averaged ones; row-sparse optimiser: the flushed ones,
        :meth:`weights_of_step`); the training weights where they differ go to
        ``nnue_forge.train_state_dict`` for an exact resume. Keys are canonical: no ``_orig_mod.``
        of torch.compile."""
        # the state dict Lightning collected shares storage with the parameters and the
        # optimiser's state, which stay as they are (the lazy decays not applied)
        flushed = self.weights_of_step()
        val = self.trainer.callback_metrics.get("val_loss") if self._trainer is not None else None
        extra = {"val_loss": None if val is None else float(val)}
        if self.lr_schedule is not None:
            extra["schedule"] = self.lr_schedule.state()
            extra["lambda"] = self.lambda_ramp.state()
            extra["total_steps"] = self.total_steps
        extra["torch_rng"] = torch.get_rng_state()  # nothing in training draws from it today; kept for exact resume
        if self._trainer is not None:  # what a resume must keep to continue exactly (trainer/resume.py)
            from .resume import run_shape

            extra["run"] = run_shape(self.trainer)
        sd = checkpoint["state_dict"]
        canon = {k.replace("_orig_mod.", ""): v for k, v in sd.items()}
        if self._schedule_free() is not None:
            extra["train_state_dict"] = canon
            canon = {**canon, **{f"model.{k}": v for k, v in self.eval_state_dict().items()}}
        elif flushed:
            extra["train_state_dict"] = {k: canon[k] for k in flushed}
            canon = {**canon, **flushed}
        checkpoint["state_dict"] = canon
        checkpoint["nnue_forge"] = extra

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Resume: training weights (schedule-free), keys mapped to this model (compiled or not),
        and the stored schedules, rebuilt from the resumed step when the run's length changed."""
        extra = checkpoint.get("nnue_forge") or {}
        # the training weights: train_state_dict where they differ from the exported ones (all
        # of them for schedule-free AdamW, the feature transformer's for a row-sparse optimiser)
        sd = {**checkpoint.get("state_dict", {}), **(extra.get("train_state_dict") or {})}
        ours = {k.replace("_orig_mod.", ""): k for k in self.state_dict()}
        checkpoint["state_dict"] = {ours.get(k.replace("_orig_mod.", ""), k): v for k, v in sd.items()}
        if isinstance(extra.get("torch_rng"), torch.Tensor):
            torch.set_rng_state(extra["torch_rng"])
        step = int(checkpoint.get("global_step", 0))
        if "schedule" in extra and self.total_steps is not None:
            old = Schedule(**extra["schedule"])
            self.lr_schedule = old.rebuilt(step, self.total_steps)
            self.lambda_ramp = Ramp(**extra["lambda"]).rebuilt(step, self.total_steps)
            if old.total != self.total_steps:
                self.resume_note = (f"resumed at step {step:,}: run length changed from {old.total:,} to "
                                    f"{self.total_steps:,} steps; the {old.kind} schedule continues from "
                                    f"lr {old(step):.3g} and reaches {self.lr_schedule.final:.3g} at step "
                                    f"{self.total_steps:,}")
                logging.getLogger("nnue.trainer").info(self.resume_note)

    def configure_optimizers(self):
        """The optimiser from the factory (Hydra ``_partial_``). ``optimizer.sparse_ft=true`` (a
        keyword of the factory, taken out here): :class:`~nnue.trainer.sparse_optim.RowSparseAdamW`
        with the factory's AdamW settings, the feature transformer's weight row-sparse (its
        gradient sparse on the numba backend) and clamped row by row to the quantisation limit."""
        if self.optimizer_factory is None:
            raise ValueError("LitNNUE needs an optimizer factory (Hydra optimizer config)")
        factory = self.optimizer_factory
        kw = dict(getattr(factory, "keywords", None) or {})
        if "sparse_ft" not in kw:
            return factory(self.parameters())
        sparse = kw.pop("sparse_ft")
        func, args = factory.func, factory.args
        if sparse is not True:  # false, or an "auto" nnue.trainer.fast_path.resolve did not decide: dense
            return func(self.parameters(), *args, **kw)
        from .sparse_optim import RowSparseAdamW, adamw_settings

        opt = RowSparseAdamW.for_model(self.model, ft_clip=self.scheme.ft_clip, **adamw_settings(func, kw))
        self.model.sparse_grad = True
        return opt

    # ---------------------------------------------------------------- row-sparse optimiser
    def _row_sparse(self):
        """The optimiser if it is row-sparse (:class:`~nnue.trainer.sparse_optim.RowSparseAdamW`), else None."""
        if self._trainer is None or not self.trainer.optimizers:
            return None
        opt = self.trainer.optimizers[0]
        inner = getattr(opt, "optimizer", opt)
        return inner if hasattr(inner, "flush") and hasattr(inner, "_step_rows") else None

    @torch.no_grad()
    def weights_of_step(self) -> dict[str, torch.Tensor]:
        """For a row-sparse optimiser: the tensors of this module's state dict that
        :meth:`flush_optimizer` would change, as it would leave them (new tensors; canonical keys
        with the ``model.`` prefix, no ``_orig_mod.``); {} for other optimisers. The parameters and
        the optimiser's state are left exactly as they were, so that saving a checkpoint or the
        weights at a step (an interrupt, every epoch without validation) does not change the
        run: a flush rounds differently from the lazy catch-up it replaces, and a run resumed
        from a flushed checkpoint was not bit-identical to one never interrupted. Costs one copy
        of the net's tensors while it runs."""
        opt = self._row_sparse()
        if opt is None:
            return {}
        live = self.state_dict()
        saved = {k: v.clone() for k, v in live.items()}
        try:
            opt.flush(weights_only=True)
            self.model.clip_weights(self.scheme.ft_clip, self.scheme.l1_clip)
            return {k.replace("_orig_mod.", ""): v.clone() for k, v in live.items() if not torch.equal(v, saved[k])}
        finally:
            for k, v in live.items():
                v.copy_(saved[k])

    def flush_optimizer(self) -> None:
        """Row-sparse optimiser: apply every row's pending decays, then clamp the whole feature
        transformer (the step clamps only the rows it updates), so that the weights evaluated or
        saved are those of the current step. Nothing for other optimisers."""
        opt = self._row_sparse()
        if opt is not None:
            opt.flush()
            self.model.clip_weights(self.scheme.ft_clip, self.scheme.l1_clip)


def resolve_qat(model_cfg, init_weights) -> tuple[bool, str | None]:
    """``model.qat``'s value for a run: true or false as given; "auto" is on for a warm start
    (``init_weights=``) of a kind whose nets an engine loads (its inference record has an
    ``engine_reader``: sfnnv5, sfnnv16), whose imported weights sit on the engine's integer grids
    and drift off them without QAT (a fine-tune of Stockfish 15.1's net exported 52 cp from its
    float net, of Stockfish 19's 35 cp), else off. Returns (qat, the log line saying why, or None
    when it was given)."""
    qat = model_cfg.get("qat", False)
    if qat != "auto":
        return bool(qat), None
    entry = kinds.get(kinds.kind_of(model_cfg))
    engine = entry.inference.engine_reader is not None
    on = bool(init_weights) and engine
    why = ("a warm start (init_weights=) of an engine's net kind" if on else
           "not a warm start" if engine else "the kind has no engine file")
    return on, f"model.qat=auto: QAT {'on' if on else 'off'} ({why}; set model.qat=true or false to choose)"
