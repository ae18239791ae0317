"""The side-by-side benchmarks against nnue-pytorch (``nnue bench train_vs_npa``, ``learn_vs_npa``)
without nnue-pytorch: the step clock's arithmetic, the wrapper that adds it to a ``train.py``
(run here on a stand-in trainer with nnue-pytorch's callback interface), our side's ``nnue
train`` overrides composing and instantiating the clock callback, and the held-out metrics."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from nnue.bench import bench_learn_vs_npa, bench_train_vs_npa, step_timer

BENCH = Path(bench_train_vs_npa.__file__).resolve().parent


def test_step_clock_report(monkeypatch, tmp_path):
    # start at t=10, then steps ending at 12, 13, 15, 16 (wall) with CPU 1, 2.5, 3, 5, 6
    stamps = iter([(10.0, 1.0, 5.0), (12.0, 2.5, 6.0), (13.0, 3.0, 7.0), (15.0, 5.0, 8.0), (16.0, 6.0, 9.0)])
    monkeypatch.setattr(step_timer.StepClock, "now", staticmethod(lambda: next(stamps)))
    c = step_timer.StepClock(str(tmp_path / "c.json"), warmup=1, batch=100)
    c.start()
    c.start()   # a second epoch's start changes nothing
    for _ in range(4):
        c.step_end()
    c.write()
    r = json.loads((tmp_path / "c.json").read_text())
    assert r["steps"] == 4 and r["timed_steps"] == 3 and r["warmup_wall_s"] == 2.0
    assert r["timed_wall_s"] == 4.0 and r["timed_cpu_s"] == 3.5
    assert r["positions_per_s"] == 75.0 and r["positions_per_cpu_s"] == round(300 / 3.5, 1)
    assert r["step_s"] == [1.0, 2.0, 1.0] and r["median_step_s"] == 1.0
    assert r["load1_at_step_end"] == [7.0, 8.0, 9.0]


def test_npa_wrapper_adds_the_clock_to_an_unchanged_train_py(tmp_path):
    """bench/npa_timed_train.py on a stand-in for nnue-pytorch's source folder: its train.main()
    builds train.SimpleTrainer (the name the wrapper replaces) and fits 5 batches."""
    src = tmp_path / "src"
    (src / "trainer").mkdir(parents=True)
    (src / "trainer" / "__init__.py").write_text("")
    (src / "trainer" / "engine.py").write_text(textwrap.dedent("""
        class SimpleTrainer:
            def __init__(self, callbacks=None):
                self.callbacks = list(callbacks or [])
            def _call(self, hook, *a):
                for cb in self.callbacks:
                    m = getattr(cb, hook, None)
                    if m is not None:
                        m(*a)
            def fit(self, n):
                self._call("on_train_epoch_start", self)
                for i in range(n):
                    self._call("on_train_batch_end", self, None, i, {})
                self._call("on_train_end", self)
    """))
    (src / "train.py").write_text(textwrap.dedent("""
        import sys
        from trainer.engine import SimpleTrainer
        def main():
            assert sys.argv[0] == "train.py" and "--clock-out" not in sys.argv, sys.argv
            SimpleTrainer(callbacks=[]).fit(int(sys.argv[sys.argv.index("--steps") + 1]))
    """))
    out = tmp_path / "clock.json"
    subprocess.run([sys.executable, str(BENCH / "npa_timed_train.py"), "--clock-out", str(out), "--clock-warmup", "2",
                    "data.binpack", "--batch-size", "64", "--steps", "5"], cwd=src, check=True,
                   env=bench_train_vs_npa.npa_env("default", src))
    r = json.loads(out.read_text())
    assert r["steps"] == 5 and r["timed_steps"] == 3 and r["batch"] == 64 and r["positions_per_s"] > 0


@pytest.mark.filterwarnings("ignore:.*ConfigStore schema:UserWarning")
def test_ours_command_composes_and_instantiates_the_clock(tmp_path):
    from hydra import compose, initialize_config_module
    from hydra.utils import instantiate
    import pytorch_lightning as pl

    cmd = bench_train_vs_npa.ours_command("/data/ds", str(tmp_path / "run"), str(tmp_path / "clock.json"), 256, 2, 3,
                                          ["model.hidden=64"])
    i = cmd.index("train")
    assert cmd[:i] == [sys.executable, "-m", "nnue.cli"]
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=cmd[i + 1:])
    assert cfg.model.kind == "sfnnv16" and cfg.model.backend == "numba" and cfg.optimizer.sparse_ft is True
    assert cfg.data.positions_per_epoch == 5 * 256 and cfg.trainer.max_epochs == 1 and cfg.model.hidden == 64
    cb = instantiate(cfg.callbacks.clock)
    assert isinstance(cb, pl.Callback) and cb.clock.batch == 256 and cb.clock.warmup == 2


@pytest.mark.filterwarnings("ignore:.*ConfigStore schema:UserWarning")
def test_learn_overrides_compose(tmp_path):
    """learn_vs_npa's nnue train overrides exist in the config tree (lr, schedule, loss)."""
    from hydra import compose, initialize_config_module

    seen = {}

    def fake_sh(cmd, log, cwd=None, env=None):
        seen.setdefault("cmds", []).append(cmd)
        raise RuntimeError("stop here")

    class A:
        batch, epoch_steps, steps, lr, seed, overrides = 128, 5, 20, 8.75e-4, 7, []

    mp = pytest.MonkeyPatch()
    mp.setattr(bench_learn_vs_npa, "sh", fake_sh)
    try:
        with pytest.raises(RuntimeError, match="stop here"):
            bench_learn_vs_npa.train_ours(tmp_path, "/data/ds", A)
    finally:
        mp.undo()
    cmd = seen["cmds"][0]
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=cmd[cmd.index("train") + 1:])
    assert cfg.scheduler.kind == "step" and cfg.scheduler.gamma == 0.992 and cfg.optimizer.lr == 8.75e-4
    assert cfg.model.loss.wdl_lambda == 0.0 and cfg.model.loss.power == 2.5 and cfg.optimizer.weight_decay == 0.0
    assert cfg.trainer.max_epochs == 4 and cfg.data.positions_per_epoch == 5 * 128 and cfg.seed == 7


def test_heldout_metrics():
    score = torch.tensor([-300.0, -20.0, 0.0, 15.0, 250.0, 900.0])
    rows = {"score": score, "result": torch.tensor([0.0, 0.5, 0.5, 0.5, 1.0, 1.0])}
    exact = bench_learn_vs_npa.metrics(score.long(), rows)
    assert exact["spearman_vs_score"] == 1.0 and exact["wdl_loss_lambda0_power2.5"] == 0.0
    assert exact["share_same_sign_as_score"] == 1.0
    flipped = bench_learn_vs_npa.metrics(-score.long(), rows)
    assert flipped["spearman_vs_score"] == -1.0
    assert flipped["wdl_loss_lambda0.1_power2"] > exact["wdl_loss_lambda0.1_power2"] > 0
