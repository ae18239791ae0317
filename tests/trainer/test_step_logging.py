"""The training step reports its scalars (train_loss, lr, wdl_lambda) to Lightning only on the
steps where something reads them (``LitNNUE._report_step``: Lightning's ``self.log`` costs
0.3-0.7 ms a call). Every reader must see what it saw when every step reported: the logger the same
values at the same steps, ``callback_metrics`` the last step's values at every epoch end and at the
run's end, the same epoch mean of λ; a callback that monitors a training metric gets every step.

Each case trains twice from the same seed on the same batches, once as shipped and once with a
module that reports at every step (the behaviour before), and compares what each reader saw."""
from __future__ import annotations

import math

import pytest
import pytorch_lightning as pl
import torch
from pytorch_lightning.loggers.logger import Logger

from nnue.trainer.lit import LitNNUE


class MemoryLogger(Logger):
    """Every ``log_metrics`` call, in order: (step, {name: value})."""

    def __init__(self):
        super().__init__()
        self.rows: list[tuple[int, dict]] = []

    name = "memory"
    version = 0

    @property
    def experiment(self):
        return None

    def log_metrics(self, metrics, step=None):
        self.rows.append((step, {k: float(v) for k, v in metrics.items()}))

    def log_hyperparams(self, params, *args, **kwargs):
        pass


class EpochEnds(pl.Callback):
    """callback_metrics at each epoch end, as the Progress line reads them."""

    def __init__(self, monitor: str | None = None):
        self.seen: list[dict] = []
        self.monitor = monitor   # only looked at by LitNNUE.on_train_start

    def on_train_epoch_end(self, trainer, lit):
        self.seen.append({k: float(v) for k, v in trainer.callback_metrics.items()})


class EveryStep(LitNNUE):
    """The step as it was: every scalar to self.log at every step."""

    def _report_step(self) -> bool:
        return True


class Counting(LitNNUE):
    reports = 0

    def _report_step(self) -> bool:
        r = super()._report_step()
        type(self).reports += r
        return r


def run(cls, dataset, tmp_path, *, epoch_positions, max_steps=-1, log_every=3, monitor=None):
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra
    from hydra.utils import instantiate

    from nnue.trainer.callbacks import plain

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=[
            f"data.path={dataset}", "data.batch_size=256", "data.shuffle_buffer=1024", "data.val_fraction=0.0",
            f"data.positions_per_epoch={epoch_positions if epoch_positions else 'null'}",
            "features=chess768", "model.hidden=16", "model.backend=torch",
            "wdl_lambda.start=0.2", "wdl_lambda.end=0.9"])
    torch.manual_seed(0)
    dm = instantiate(cfg.data)
    dm.setup("fit")
    m = dict(plain(cfg.model))
    m.pop("_target_")
    lit = cls(**m, optimizer=instantiate(cfg.optimizer), scheduler=plain(cfg.get("scheduler")),
              lambda_schedule=plain(cfg.get("wdl_lambda")))
    total = max_steps if max_steps > 0 else 2 * (epoch_positions or 4015) // 256
    lit.set_run_length(total, None, float(cfg.optimizer.lr))
    logger, ends = MemoryLogger(), EpochEnds(monitor)
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_epochs=2, max_steps=max_steps, limit_val_batches=0,
                         num_sanity_val_steps=0, logger=logger, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, log_every_n_steps=log_every,
                         callbacks=[ends], default_root_dir=str(tmp_path))
    trainer.fit(lit, datamodule=dm)
    final = {k: float(v) for k, v in trainer.callback_metrics.items()}
    return logger.rows, ends.seen, final, trainer.global_step


def same(a, b):
    """Equal structures of floats (the two runs train the same weights on the same batches)."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    return a == b


@pytest.mark.parametrize("epoch_positions,max_steps", [
    (256 * 7, -1),     # fixed-length epochs of 7 steps: the epoch's last step is not a logging step
    (None, -1),        # one-pass epochs: their length is not known in advance
    (256 * 7, 10),     # max_steps ends the run in the middle of the second epoch
])
def test_readers_see_what_every_step_reporting_gave(sample_dataset, tmp_path, epoch_positions, max_steps):
    Counting.reports = 0
    got = run(Counting, sample_dataset, tmp_path / "a", epoch_positions=epoch_positions, max_steps=max_steps)
    want = run(EveryStep, sample_dataset, tmp_path / "b", epoch_positions=epoch_positions, max_steps=max_steps)
    rows, ends, final, steps = got
    assert steps == want[3] and steps >= 10
    assert any("train_loss" in r for _, r in rows) and any("wdl_lambda_epoch" in r or "wdl_lambda" in r
                                                           for _, r in rows), rows
    assert same(rows, want[0]), (rows, want[0])         # the logger: same steps, same values
    assert same(ends, want[1]), (ends, want[1])         # every epoch end: last step's loss and lr, mean λ
    assert same(final, want[2]), (final, want[2])       # the run's metrics (metrics.json)
    assert {"train_loss", "lr", "wdl_lambda"} <= final.keys()
    assert Counting.reports < steps                     # and it did skip steps


def test_a_monitored_training_metric_reports_every_step(sample_dataset, tmp_path):
    Counting.reports = 0
    _, _, _, steps = run(Counting, sample_dataset, tmp_path, epoch_positions=256 * 7, monitor="train_loss")
    assert Counting.reports == steps == 14


class Loss:
    """A step's loss as Lightning hands it to callbacks, counting every read back to the host
    (float(): on CUDA a wait for the device)."""

    reads = 0

    def __init__(self, value: float):
        self.t = torch.tensor(value)

    def detach(self):
        return self.t.detach()

    def __float__(self):
        type(self).reads += 1
        return float(self.t)


def test_plots_running_mean_without_reading_each_step_back(tmp_path):
    from types import SimpleNamespace

    from nnue.trainer.callbacks import Plots

    plots = Plots(str(tmp_path), points=4)        # a point every 40 // 4 = 10 steps
    lit = SimpleNamespace(total_steps=40, current_lr=lambda: 1e-3, current_lambda=lambda: 0.5)
    values = [0.5 + 0.01 * i for i in range(1, 41)]
    Loss.reads = 0
    for step, v in enumerate(values, 1):
        plots.on_train_batch_end(SimpleNamespace(global_step=step), lit, {"loss": Loss(v)}, None, step - 1)
    assert Loss.reads == 0
    got = plots.hist["train"]
    assert [p[0] for p in got] == [10, 20, 30, 40]
    for (step, mean), k in zip(got, range(4)):   # float32 sums of 10 values: tolerance 1e-6
        assert math.isclose(mean, sum(values[10 * k:10 * k + 10]) / 10, rel_tol=1e-6)


def test_plots_of_a_run_shorter_than_one_point_draw_without_warnings(tmp_path):
    """A run shorter than the plot's first point (e.g. nnue bench train's) drew a legend of
    nothing: matplotlib's "No artists with labels" warning."""
    import warnings

    from nnue.trainer.callbacks import Plots

    plots = Plots(str(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plots.draw()
    assert {p.name for p in tmp_path.iterdir()} == {"loss.png", "quality.png", "schedule.png"}
