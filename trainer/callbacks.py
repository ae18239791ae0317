"""Training callbacks: checkpoints at every end, interrupts, progress lines and plots.

- :class:`RunCheckpoint`: ``last.ckpt`` (Lightning, for resume) and ``weights-last.safetensors``
  (weights only, for export) at the end of every training epoch, at the end of training and at an
  interrupt, whatever the validation cadence (also with no validation at all); atomic writes.
- :class:`Interrupts`: SIGINT / SIGTERM finish the current step, save ``last.ckpt`` at that step
  and raise :class:`TrainingInterrupted` (the CLI turns it into one line and status 130 / 143).
- :class:`Progress`: a live bar over the whole run (step / total, positions/s, ETA) when stderr is a
  terminal, otherwise one plain log line per epoch (superbatch).
- :class:`Plots`: ``OUT/plots/{loss,quality,schedule}.png`` at every epoch end.
"""
from __future__ import annotations

import json
import logging
import math
import os
import signal
import sys
import time
from pathlib import Path

import pytorch_lightning as pl
import torch
from safetensors.torch import save as st_save

from nnue.pipeline.atomic import atomic_write_bytes

log = logging.getLogger("nnue.trainer")


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


class TrainingInterrupted(Exception):
    """SIGINT or SIGTERM during training; ``last.ckpt`` holds the interrupted step."""

    def __init__(self, signum: int, step: int, ckpt: str | None):
        self.signum, self.step, self.ckpt = signum, step, ckpt
        name = signal.Signals(signum).name
        where = f"; {ckpt} holds step {step:,}: resume with ckpt_path={ckpt}" if ckpt else ""
        super().__init__(f"interrupted by {name} at step {step:,}{where}")


class SweepInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped a job of a sweep (``nnue train -m``, an Optuna search): the whole
    sweep stops (a KeyboardInterrupt, which Hydra's launchers do not record as a failed job and
    go on). ``job``: the job's folder; ``notes``: what the sweeper adds (the study's state)."""

    def __init__(self, signum: int, job: str | None):
        super().__init__(signum, job)
        self.signum, self.job, self.notes = signum, job, []

    def line(self) -> str:
        name = signal.Signals(self.signum).name
        where = f" in job {self.job}" if self.job else ""
        return (f"sweep interrupted by {name}{where}; the finished jobs are kept"
                + "".join(f"; {n}" for n in self.notes)
                + ("" if self.notes else "; an interrupted job restarts from scratch in a new sweep (its "
                   "last.ckpt is not resumed by a sweep)"))


class EmptyTrainingSet(ValueError):
    """The training split yields no batch (no rows, or every row filtered)."""


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


def _state_dict(lit) -> dict:
    if hasattr(lit, "eval_state_dict"):
        return lit.eval_state_dict()
    return {k.replace("_orig_mod.", ""): v.detach().cpu().contiguous() for k, v in lit.model.state_dict().items()}


def write_weights(lit, trainer: pl.Trainer | None, path: Path) -> None:
    """The net's weights to export (schedule-free: averaged) as safetensors, atomically."""
    data = st_save(_state_dict(lit), weights_metadata(lit, trainer))
    atomic_write_bytes(path, data)


class RunCheckpoint(pl.Callback):
    """``<dirpath>/last.ckpt`` and ``<dirpath>/weights-last.safetensors`` at the end of every
    training epoch (after its validation, if any), at the end of training and when interrupted;
    ``weights-epoch<N>.safetensors`` every ``every_n_epochs`` epochs (N counts from 1, as every
    epoch number the trainer shows does; 0: none, the default of ``checkpoints.weights_every_n_epochs``). Atomic (temp + rename), so
    an interrupted write never leaves a file that looks finished. Raises :class:`EmptyTrainingSet`
    when the first epoch trained no batch."""

    def __init__(self, dirpath: str, every_n_epochs: int = 0):
        self.dirpath, self.every = Path(dirpath), every_n_epochs
        self.saved_step: int | None = None

    @property
    def last(self) -> Path:
        return self.dirpath / "last.ckpt"

    def save(self, trainer: pl.Trainer, lit, epoch_end: bool = False) -> None:
        # the same decision on every rank (saving is collective under DDP): no look at the file there
        if self.saved_step == trainer.global_step and not epoch_end and (trainer.world_size > 1 or self.last.exists()):
            return
        tmp = self.dirpath / f".last.ckpt.tmp{os.getpid()}"
        trainer.save_checkpoint(tmp)  # collective under DDP; rank 0 writes
        if trainer.global_rank == 0:
            os.replace(tmp, self.last)
            write_weights(lit, trainer, self.dirpath / "weights-last.safetensors")
            if epoch_end and self.every and (trainer.current_epoch + 1) % self.every == 0:
                write_weights(lit, trainer, self.dirpath / f"weights-epoch{trainer.current_epoch + 1:04d}.safetensors")
        self.saved_step = trainer.global_step

    def on_train_epoch_end(self, trainer: pl.Trainer, lit) -> None:
        done = trainer.fit_loop.epoch_loop.batch_progress.current.completed
        if done == 0 and trainer.global_step == 0:
            ds = getattr(getattr(trainer, "datamodule", None), "train_set", None)
            counts = dict(getattr(ds, "counts", {}) or {})
            read = counts.pop("read", None)
            detail = (f"read {read:,} rows of the training split, filtered out " +
                      ", ".join(f"{v:,} ({k})" for k, v in sorted(counts.items()) if k != "kept")
                      if read is not None else "no rows")
            raise EmptyTrainingSet(f"the training set yields no batch of data.batch_size="
                                   f"{getattr(ds, 'batch_size', '?')}: {detail}; check data.path, "
                                   f"data.filters and data.val_fraction")
        self.save(trainer, lit, epoch_end=True)

    def on_train_end(self, trainer: pl.Trainer, lit) -> None:
        self.save(trainer, lit)


class Interrupts(pl.Callback):
    """SIGINT and SIGTERM set a flag (a second SIGINT raises KeyboardInterrupt at once); at the end
    of the current training step (or epoch) ``last.ckpt`` is saved and :class:`TrainingInterrupted`
    raised. Installed by :meth:`install` (at the start of the run, so a signal during set-up is
    kept too), removed by :meth:`restore` after ``fit``.

    Under DDP every rank stops at the same step, whichever rank the signal reached (a SIGTERM to
    the launcher reaches only rank 0): at each step's and epoch's end the ranks take the maximum of
    their flags (one all-reduce of one integer, the only collective this adds), then all save
    (a collective) and raise together. Lightning's own SIGTERM handler is replaced on every rank:
    it ran a broadcast inside the signal handler, whenever the signal came, out of step with the
    other rank's collectives, and so deadlocked both ranks about one run in three. No collective
    runs on the exception path under DDP."""

    def __init__(self, checkpoint: RunCheckpoint | None):
        self.checkpoint, self.signum, self._old = checkpoint, None, {}

    def _handler(self, signum, frame):
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signum = signum

    def install(self) -> None:
        for s in (signal.SIGINT, signal.SIGTERM):
            try:
                self._old[s] = signal.signal(s, self._handler)
            except ValueError:  # not the main thread
                pass

    def restore(self) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old = {}

    def setup(self, trainer, lit, stage: str) -> None:
        if trainer.world_size <= 1:
            return  # one process: Lightning's SIGTERM path (SIGTERMException) is handled in on_exception
        conn = getattr(trainer, "_signal_connector", None)
        register = getattr(conn, "register_signal_handlers", None)
        if register is None:
            return

        def ours_after_lightnings() -> None:  # Lightning's SIGUSR1 (SLURM requeue) stays; SIGTERM is ours
            register()
            if "SIGTERM" in {s.name for s in self._old}:
                signal.signal(signal.SIGTERM, self._handler)

        conn.register_signal_handlers = ours_after_lightnings

    def _agreed(self, trainer) -> int:
        """The stop signal every rank agrees on (0: none): this rank's, or under DDP the largest of
        all ranks' (a collective: called where every rank is, at the same step)."""
        sig = int(self.signum or 0)
        if trainer.world_size > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
            t = torch.tensor([sig], dtype=torch.int64, device=trainer.strategy.root_device)
            torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.MAX)
            sig = int(t.item())
        return sig

    def _check(self, trainer, lit) -> None:
        sig = self._agreed(trainer)
        if sig:
            self.signum = self.signum or sig
            self.checkpoint.save(trainer, lit)
            raise TrainingInterrupted(self.signum, trainer.global_step, str(self.checkpoint.last))

    def on_train_batch_end(self, trainer, lit, outputs, batch, batch_idx) -> None:
        self._check(trainer, lit)

    def on_train_epoch_end(self, trainer, lit) -> None:
        self._check(trainer, lit)

    def on_exception(self, trainer, lit, exception: BaseException) -> None:
        """Lightning's own SIGTERM handling raises SIGTERMException (a SystemExit with status 0)
        at the end of an epoch or in validation: save last.ckpt there too (one process only: under
        DDP a collective here would wait for ranks that are not there)."""
        from pytorch_lightning.utilities.exceptions import SIGTERMException

        if isinstance(exception, SIGTERMException) and self.signum is None:
            self.signum = signal.SIGTERM
        if self.signum is not None and not isinstance(exception, TrainingInterrupted) and trainer.world_size <= 1:
            self.checkpoint.save(trainer, lit)


def _fmt_eta(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    s = int(round(seconds))
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


class Progress(pl.Callback):
    """Progress of the whole run. bar: a live tqdm bar on stderr (step / total steps, positions/s,
    ETA of the run); only where stderr is a terminal. Without the bar: one log line per epoch
    (superbatch) with epoch, step, train_loss, val_loss, val_spearman, lr, λ, positions/s, ETA."""

    def __init__(self, total_steps: int, positions_per_step: int, max_epochs: int | None, bar: bool):
        self.total, self.pps, self.max_epochs = total_steps, positions_per_step, max_epochs
        self.bar_wanted, self.bar = bar, None
        self.t0 = self.step0 = None
        self._shown = float("-inf")

    def _rate(self, trainer) -> tuple[float, float]:
        dt = time.perf_counter() - self.t0
        steps = trainer.global_step - self.step0
        pos_s = steps * self.pps / dt if dt > 0 else 0.0
        eta = (self.total - trainer.global_step) * dt / steps if steps > 0 else float("inf")
        return pos_s, max(eta, 0.0)

    def on_train_start(self, trainer, lit) -> None:
        self.t0, self.step0 = time.perf_counter(), trainer.global_step
        if self.bar_wanted and trainer.global_rank == 0:
            from tqdm import tqdm

            self.bar = tqdm(total=self.total, initial=trainer.global_step, unit="step", dynamic_ncols=True,
                            file=sys.stderr, desc="train")

    def on_train_batch_end(self, trainer, lit, outputs, batch, batch_idx) -> None:
        # the postfix (the step's loss: float() waits for a CUDA device) at most twice a second
        if self.bar is not None and time.perf_counter() - self._shown >= 0.5:
            self._shown = time.perf_counter()
            pos_s, _ = self._rate(trainer)
            loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
            self.bar.set_postfix_str(f"epoch {trainer.current_epoch + 1} loss {float(loss):.5f} {pos_s:,.0f} pos/s",
                                     refresh=False)
        if self.bar is not None:
            self.bar.update(trainer.global_step - self.bar.n)

    def line(self, trainer, lit) -> str:
        m = trainer.callback_metrics
        g = lambda k, f: format(float(m[k]), f) if k in m else "-"  # noqa: E731
        pos_s, eta = self._rate(trainer)
        ep = f"{trainer.current_epoch + 1}" + (f"/{self.max_epochs}" if self.max_epochs else "")
        lr = lit.current_lr() if hasattr(lit, "current_lr") else float("nan")
        lam = lit.current_lambda() if hasattr(lit, "current_lambda") else float("nan")
        return (f"epoch {ep}  step {trainer.global_step:,}/{self.total:,}  train_loss {g('train_loss', '.5f')}  "
                f"val_loss {g('val_loss', '.5f')}  val_spearman {g('val_spearman', '.3f')}  lr {lr:.3g}  "
                f"λ {lam:.3g}  {pos_s:,.0f} pos/s  ETA {_fmt_eta(eta)}")

    def on_train_epoch_end(self, trainer, lit) -> None:
        if trainer.global_rank != 0:
            return
        if self.bar is not None:
            self.bar.write(self.line(trainer, lit), file=sys.stderr)
        else:
            log.info(self.line(trainer, lit))

    def teardown(self, trainer, lit, stage) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class Plots(pl.Callback):
    """``<dirpath>/loss.png`` (train and val loss vs step), ``quality.png`` (val Spearman vs step)
    and ``schedule.png`` (lr and λ vs step), redrawn at every epoch end (matplotlib, Agg backend,
    atomic writes). The history is kept in checkpoints, so a resumed run's plots cover the whole run."""

    def __init__(self, dirpath: str, points: int = 2000):
        self.dirpath, self.points = Path(dirpath), points
        self.hist = {"train": [], "val": [], "sched": []}
        self._acc, self._n = 0.0, 0

    def state_dict(self) -> dict:
        return {"hist": self.hist}

    def load_state_dict(self, state: dict) -> None:
        self.hist = {k: [list(p) for p in v] for k, v in state.get("hist", {}).items()} or self.hist

    def on_train_batch_end(self, trainer, lit, outputs, batch, batch_idx) -> None:
        loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
        if loss is None:
            return
        # summed as a tensor on the loss's device: float() only when a point is recorded, so that
        # a CUDA step does not wait for the device at every step
        self._acc, self._n = self._acc + (loss.detach() if hasattr(loss, "detach") else float(loss)), self._n + 1
        every = max(1, int(getattr(lit, "total_steps", None) or 1) // self.points)
        if trainer.global_step % every == 0:
            self.hist["train"].append([trainer.global_step, float(self._acc) / self._n])
            self._acc, self._n = 0.0, 0
            if hasattr(lit, "current_lr"):
                self.hist["sched"].append([trainer.global_step, lit.current_lr(), lit.current_lambda()])

    def on_validation_end(self, trainer, lit) -> None:
        m = trainer.callback_metrics
        if trainer.sanity_checking or "val_loss" not in m:
            return
        self.hist["val"].append([trainer.global_step, float(m["val_loss"]),
                                 float(m["val_spearman"]) if "val_spearman" in m else float("nan")])

    def on_train_epoch_end(self, trainer, lit) -> None:
        if trainer.global_rank == 0:
            self.draw()

    def draw(self) -> None:
        import io

        import matplotlib

        matplotlib.use("Agg", force=False)
        from matplotlib.figure import Figure

        self.dirpath.mkdir(parents=True, exist_ok=True)

        def save(fig, name):
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=90)
            atomic_write_bytes(self.dirpath / name, buf.getvalue())

        tr, va, sc = self.hist["train"], self.hist["val"], self.hist["sched"]
        fig = Figure(figsize=(6, 3.6), tight_layout=True)
        ax = fig.add_subplot()
        if tr:
            ax.plot([p[0] for p in tr], [p[1] for p in tr], label="train_loss", lw=0.8)
        if va:
            ax.plot([p[0] for p in va], [p[1] for p in va], "o-", label="val_loss", ms=3)
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.set_yscale("log")
        if tr or va:  # a legend of nothing is a matplotlib warning (a run shorter than one point)
            ax.legend()
        ax.grid(alpha=0.3)
        save(fig, "loss.png")

        fig = Figure(figsize=(6, 3.6), tight_layout=True)
        ax = fig.add_subplot()
        pts = [p for p in va if math.isfinite(p[2])]
        if pts:
            ax.plot([p[0] for p in pts], [p[2] for p in pts], "o-", ms=3, color="tab:green")
        ax.set_xlabel("step")
        ax.set_ylabel("val_spearman (net vs dataset score)")
        ax.grid(alpha=0.3)
        save(fig, "quality.png")

        fig = Figure(figsize=(6, 3.6), tight_layout=True)
        ax = fig.add_subplot()
        if sc:
            ax.plot([p[0] for p in sc], [p[1] for p in sc], color="tab:blue", label="lr")
        ax.set_xlabel("step")
        ax.set_ylabel("lr", color="tab:blue")
        ax2 = ax.twinx()
        if sc:
            ax2.plot([p[0] for p in sc], [p[2] for p in sc], color="tab:orange", label="λ")
        ax2.set_ylabel("λ (WDL weight)", color="tab:orange")
        ax.grid(alpha=0.3)
        save(fig, "schedule.png")


# kept for configs that name it: weights only, now written by RunCheckpoint at every end
class WeightsCheckpoint(pl.Callback):
    """Deprecated alias: ``weights-last.safetensors`` after each training epoch."""

    def __init__(self, dirpath: str, every_n_epochs: int = 0):
        self.dirpath, self.every = Path(dirpath), every_n_epochs

    def on_train_epoch_end(self, trainer: pl.Trainer, lit) -> None:
        if trainer.global_rank == 0:
            write_weights(lit, trainer, self.dirpath / "weights-last.safetensors")


class BestCheckpoint(pl.callbacks.ModelCheckpoint):
    """Lightning's ModelCheckpoint with ``{epoch}`` in the file name counted from 1, as the
    progress line, the data log and ``weights-epoch<N>`` count (``best-epoch0001.ckpt`` is the
    first epoch's)."""

    def format_checkpoint_name(self, metrics, filename=None, ver=None, prefix=None) -> str:
        if "epoch" in metrics:
            metrics = dict(metrics)
            metrics["epoch"] = metrics["epoch"] + 1
        return super().format_checkpoint_name(metrics, filename=filename, ver=ver, prefix=prefix)
