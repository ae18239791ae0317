"""Every experiment config composes and runs one batch (lightning-hydra-template style)."""
from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

import nnue.conf
from nnue.trainer.train import run

EXPERIMENTS = sorted(p.stem for p in (Path(nnue.conf.__file__).parent / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("experiment", EXPERIMENTS)
@pytest.mark.parametrize("activation", ["crelu", "screlu", "pairwise_crelu"])
def test_experiment_fast_dev_run(experiment, activation, sample_dataset, tmp_path):
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=[
            f"experiment={experiment}", f"data.path={sample_dataset}", f"paths.output_dir={tmp_path}",
            "data.val_fraction=0.2", "debug=fast", "trainer.enable_progress_bar=false",
            f"model.activation={activation}", "model.hidden=16"])
    metrics = run(cfg)
    assert metrics["train_loss"] > 0 and (tmp_path / "metrics.json").exists()


def test_resume_from_last_checkpoint(sample_dataset, tmp_path):
    GlobalHydra.instance().clear()
    common = [f"data.path={sample_dataset}", f"paths.output_dir={tmp_path}", "data.val_fraction=0.2",
              "trainer.enable_progress_bar=false", "model.hidden=16", "data.batch_size=512",
              "experiment=demo"]
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        first = compose("train", overrides=common + ["trainer.max_epochs=2"])
        second = compose("train", overrides=common + ["trainer.max_epochs=3",
                                                      f"ckpt_path={tmp_path}/checkpoints/last.ckpt"])
    assert run(first)["epochs"] == 2
    m = run(second)
    assert m["epochs"] == 3 and m["global_step"] > 0
