"""A callback for the DDP signal tests: one rank sends itself a signal at a chosen moment (an
event of the training loop, not a time), as a signal from outside reaches one process.

    +callbacks.sig._target_=tests.trainer.ddp_signal.SignalAt +callbacks.sig.rank=0
    +callbacks.sig.at=batch +callbacks.sig.step=5 +callbacks.sig.signum=15

``at``: ``batch`` (the end of the training step that reaches ``step``), ``validation`` (the start
of the first validation after ``step``) or ``fit_start``. ``pids``: a folder where every rank
writes ``rank<R>.pid`` at the start of fit (so the test can check every rank is gone).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytorch_lightning as pl


class SignalAt(pl.Callback):
    def __init__(self, rank: int = 0, at: str = "batch", step: int = 3, signum: int = 15, pids: str | None = None):
        self.rank, self.at, self.step, self.signum, self.pids = rank, at, step, signum, pids
        self.sent = False

    def _send(self, trainer) -> None:
        if not self.sent and trainer.global_rank == self.rank:
            self.sent = True
            os.kill(os.getpid(), self.signum)

    def on_fit_start(self, trainer, lit) -> None:
        if self.pids:
            Path(self.pids).mkdir(parents=True, exist_ok=True)
            (Path(self.pids) / f"rank{trainer.global_rank}.pid").write_text(str(os.getpid()))
        if self.at == "fit_start":
            self._send(trainer)

    def on_train_batch_end(self, trainer, lit, outputs, batch, batch_idx) -> None:
        if self.at == "batch" and trainer.global_step >= self.step:
            self._send(trainer)

    def on_validation_start(self, trainer, lit) -> None:
        if self.at == "validation" and trainer.global_step >= self.step and not trainer.sanity_checking:
            self._send(trainer)


class PackAt(pl.Callback):
    """Pack ``input`` into ``dataset`` at the end of epoch ``epoch`` (counted from 0), as
    ``nnue pack --watch`` does while a run trains: the new part joins at the next epoch."""

    def __init__(self, input: str, dataset: str, epoch: int = 1):
        self.input, self.dataset, self.epoch = input, dataset, epoch

    def on_train_epoch_end(self, trainer, lit) -> None:
        if trainer.current_epoch == self.epoch and trainer.global_rank == 0:
            from nnue.pipeline.pack import pack

            pack([self.input], self.dataset, progress=False)
