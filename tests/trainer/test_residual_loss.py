"""target=residual: the loss on teacher − base, its config checks, and a training run on an annotated dataset."""
from __future__ import annotations

import shutil

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from nnue.trainer.checks import check_train_args
from nnue.pipeline.annotate import annotate
from nnue.pipeline.batch import SparseBatch
from nnue.trainer.loss import check_loss_config, residual_loss, training_loss, wdl_loss

NAN = float("nan")


def test_cp_space_is_mse_on_teacher_minus_base_and_skips_nulls():
    y = torch.tensor([0.5, -0.25, 1.0, 0.1], requires_grad=True)
    base = torch.tensor([100.0, -50.0, NAN, 30.0])
    teacher = torch.tensor([320.0, -100.0, 10.0, NAN])
    result = torch.tensor([1.0, 0.0, 0.5, 0.5])
    loss = residual_loss(y, base, teacher, result, scale=400.0, space="cp")
    want = (((0.5 * 400 - 220) / 400) ** 2 + ((-0.25 * 400 + 50) / 400) ** 2) / 2
    torch.testing.assert_close(loss, torch.tensor(want))
    loss.backward()
    assert y.grad[2] == 0 and y.grad[3] == 0 and y.grad[0] != 0  # null rows take no part
    # power
    l3 = residual_loss(y.detach(), base, teacher, result, 400.0, "cp", power=3.0)
    torch.testing.assert_close(l3, torch.tensor((abs((200 - 220) / 400) ** 3 + abs((-100 + 50) / 400) ** 3) / 2))


def test_sigma_space_is_the_wdl_loss_of_base_plus_net():
    g = torch.Generator().manual_seed(1)
    y = torch.randn(257, generator=g)
    base = torch.randint(-900, 900, (257,), generator=g).float()
    teacher = torch.randint(-1500, 1500, (257,), generator=g).float()
    result = torch.randint(0, 3, (257,), generator=g).float() / 2
    for lam, power in ((0.0, 2.0), (0.3, 2.0), (0.1, 2.5)):
        got = residual_loss(y, base, teacher, result, 400.0, "sigma", lam, power)
        want = wdl_loss(y + base / 400.0, teacher, result, 400.0, lam, power)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)


def test_no_valid_row_is_zero_with_gradient():
    y = torch.zeros(3, requires_grad=True)
    loss = residual_loss(y, torch.full((3,), NAN), torch.zeros(3), torch.zeros(3), space="cp")
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(y.grad, torch.zeros(3))


def _batch(**kw) -> SparseBatch:
    z = torch.zeros(4)
    return SparseBatch(torch.zeros((4, 1), dtype=torch.int32), torch.zeros((4, 1), dtype=torch.int32),
                       kw.get("score", z), kw.get("result", z), torch.zeros(4, dtype=torch.int64),
                       kw.get("base_eval"), kw.get("teacher_eval"))


def test_training_loss_dispatch_and_missing_columns():
    y = torch.tensor([0.1, 0.2, -0.3, 0.0])
    score, base, teach = torch.tensor([50.0, 0, -20, 10]), torch.tensor([10.0, 5, 0, 0]), torch.tensor([1.0, 2, 3, 4])
    b = _batch(score=score, base_eval=base, teacher_eval=teach)
    torch.testing.assert_close(training_loss(y, b, 400.0), wdl_loss(y, score, b.result, 400.0))
    torch.testing.assert_close(training_loss(y, b, 400.0, "residual", "cp", "teacher_eval", 0.0),
                               residual_loss(y, base, teach, b.result, 400.0, "cp"))
    torch.testing.assert_close(training_loss(y, b, 400.0, "residual", "cp", "score", 0.0),
                               residual_loss(y, base, score, b.result, 400.0, "cp"))
    with pytest.raises(ValueError, match="needs a base_eval column"):
        training_loss(y, _batch(), 400.0, "residual")
    with pytest.raises(ValueError, match="needs a teacher_eval column"):
        training_loss(y, _batch(base_eval=base), 400.0, "residual", teacher="teacher_eval")


@pytest.mark.parametrize("cfg,msg", [
    ({"target": "resid"}, "model.loss.target=resid"),
    ({"residual_space": "pawns"}, "model.loss.residual_space=pawns"),
    ({"teacher": "nnue"}, "model.loss.teacher=nnue"),
    ({"target": "residual", "residual_space": "cp"}, "model.loss.wdl_lambda=0.1"),
    ({"lamda": 0.1}, "model.loss.lamda: unknown key"),
    ({"wdl_lambda": 2}, "must be in"),
])
def test_config_errors(cfg, msg):
    with pytest.raises(ValueError, match=msg):
        check_loss_config(cfg)


def test_config_defaults():
    assert check_loss_config(None) == dict(wdl_lambda=0.1, power=2.0, target="wdl", residual_space="sigma",
                                           teacher="score", teacher_weight=0.5)


def test_train_refuses_residual_without_base_eval(sample_dataset):
    err = check_train_args(["experiment=demo", f"data.path={sample_dataset}", "model.loss.target=residual"])
    assert err and "no base_eval column" in err and "nnue annotate" in err


@pytest.mark.parametrize("space,lam", [("cp", 0.0), ("sigma", 0.1)])
def test_residual_fast_dev_run(sample_dataset, tmp_path, space, lam):
    from nnue.trainer.train import run

    ds = tmp_path / "ds"
    shutil.copytree(sample_dataset, ds)
    annotate(ds, base="material", progress=False)
    overrides = ["experiment=demo", f"data.path={ds}", f"paths.output_dir={tmp_path / 'run'}",
                 "data.val_fraction=0.2", "debug=fast", "trainer.enable_progress_bar=false", "model.hidden=16",
                 "model.loss.target=residual", f"model.loss.residual_space={space}", f"model.loss.wdl_lambda={lam}"]
    assert check_train_args(overrides) is None
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    metrics = run(cfg)
    assert metrics["train_loss"] > 0


def test_residual_report_on_a_short_run(sample_dataset, tmp_path):
    """residual_report: its base column is the annotated material count, and α scales the net."""
    import numpy as np

    from nnue.pipeline.stream import Filters, PackedStream
    from nnue.trainer.metrics import spearman
    from nnue.trainer.residual_report import residual_report
    from nnue.trainer.train import run

    ds = tmp_path / "ds"
    shutil.copytree(sample_dataset, ds)
    annotate(ds, base="material", progress=False)
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=[
            "experiment=demo", f"data.path={ds}", f"paths.output_dir={tmp_path / 'run'}", "data.val_fraction=0.2",
            "trainer.enable_progress_bar=false", "model.hidden=16", "trainer.max_epochs=1",
            "data.positions_per_epoch=4096", "model.loss.target=residual"])
    run(cfg)
    r = residual_report(tmp_path / "run" / "checkpoints" / "last.ckpt", alphas=(1.0, 0.5, 0.0))
    val = PackedStream([ds], 100_000, 0, "val", 0.2, Filters(), drop_last=False)
    b = next(iter(val))
    assert r["validation_positions"] == len(b["score"]) > 100
    assert r["spearman_base"] == pytest.approx(spearman(b["base_eval"].numpy(), b["score"].numpy()))
    assert r["spearman_base_plus_net"]["0.0"] == pytest.approx(r["spearman_base"])
    assert r["base"].startswith("material") and np.isfinite(r["spearman_base_plus_net"]["0.5"])
