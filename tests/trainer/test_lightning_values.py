"""Issue 20 item 11: every trainer value is checked before anything is written, Lightning's own
too (val_check_interval and the like): one line, status 2, no run folder."""
from __future__ import annotations

import subprocess
import sys

import pytest

NNUE = [sys.executable, "-m", "nnue.cli"]
BASE = ["experiment=demo", "model.hidden=16", "data.positions_per_epoch=2048", "trainer.max_epochs=1"]


@pytest.mark.parametrize("arg,needle", [
    ("+trainer.val_check_interval=0", "trainer.val_check_interval=0"),           # ZeroDivisionError mid-run, status 1
    ("+trainer.val_check_interval=1000", "more than the 8 training batches"),  # Lightning: after the folder
    ("+trainer.val_check_interval=1.5", "trainer.val_check_interval=1.5"),
    ("+trainer.val_check_interval=-1", "trainer.val_check_interval=-1"),
    ("+trainer.val_check_interval=abc", "Lightning refuses it"),
    ("+trainer.gradient_clip_val=-1", "trainer.gradient_clip_val=-1"),
    ("+trainer.gradient_clip_algorithm=foo", "trainer.gradient_clip_algorithm='foo'"),
    ("+trainer.precision=99", "trainer.precision"),
    ("+trainer.max_time=abc", "trainer.max_time='abc'"),
    ("+trainer.overfit_batches=1.5", "overfit_batches"),
    ("+trainer.detect_anomaly=maybe", "trainer.detect_anomaly='maybe'"),
    ("+trainer.benchmark=yes", "trainer.benchmark='yes'"),
    ("+trainer.profiler=nope", "trainer.profiler='nope'"),
    ("+trainer.strategy=nope", "trainer.strategy='nope'"),
])
def test_lightning_values_refused_before_anything_is_written(sample_dataset, tmp_path, arg, needle):
    from nnue.trainer.checks import check_train_args

    out = tmp_path / "out"
    err = check_train_args([*BASE, f"data.path={sample_dataset}", f"paths.output_dir={out}", arg])
    assert err and "\n" not in err and needle in err, err
    assert not out.exists()


def test_values_lightning_accepts_pass(sample_dataset, tmp_path):
    from nnue.trainer.checks import check_train_args

    for arg in ("+trainer.val_check_interval=0.5", "+trainer.val_check_interval=4", "+trainer.gradient_clip_val=1.0",
                "+trainer.val_check_interval=20 +trainer.check_val_every_n_epoch=null"):
        err = check_train_args([*BASE, f"data.path={sample_dataset}", f"paths.output_dir={tmp_path / 'o'}",
                                *arg.split()])
        assert err is None, (arg, err)


def test_cli_status_2_one_line_no_folder(sample_dataset, tmp_path):
    out = tmp_path / "out"
    r = subprocess.run([*NNUE, "train", *BASE, f"data.path={sample_dataset}", f"paths.output_dir={out}",
                        "+trainer.val_check_interval=1000"], capture_output=True, text=True)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and err[0].startswith("nnue train: error:"), r.stderr
    assert not out.exists()


def test_fraction_on_a_one_pass_epoch_refused_and_its_suggestion_trains(sample_dataset, tmp_path):
    """``val_check_interval=0.5`` on a one-pass epoch (an iterable stream without a length):
    Lightning refused it after the run folder was written (MisconfigurationException, status 1).
    Now one line before anything is written, suggesting a batch count, which then trains."""
    import re

    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from nnue.trainer.checks import check_train_args
    from nnue.trainer.train import run

    out = tmp_path / "out"
    args = [*BASE, "data.positions_per_epoch=null", f"data.path={sample_dataset}", f"paths.output_dir={out}"]
    err = check_train_args([*args, "+trainer.val_check_interval=0.5"])
    assert err and "\n" not in err and "a one-pass epoch (data.positions_per_epoch=null) has none" in err, err
    assert not out.exists()
    k = int(re.search(r"trainer\.val_check_interval=(\d+):", err).group(1))
    assert check_train_args([*args, f"+trainer.val_check_interval={k}"]) is None
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=[*args, f"+trainer.val_check_interval={k}", "data.val_batch_size=4096",
                                          "trainer.enable_progress_bar=false"])
    m = run(cfg)
    assert m["global_step"] > 0 and m["val_loss"] > 0
