"""model.loss.teacher with the plain WDL target (it was honoured only with target=residual, and
silently ignored otherwise): the teacher's centipawns, or a blend, replace the search score; a
loss setting that would change nothing is refused; a run trains a different net with it."""
from __future__ import annotations

import shutil

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from nnue.trainer.checks import check_train_args
from nnue.pipeline.annotate import annotate
from nnue.pipeline.batch import SparseBatch
from nnue.trainer.loss import check_loss_config, training_loss, wdl_loss
from nnue.pipeline.parts import read_part

NAN = float("nan")


def _batch(score, result, teacher=None) -> SparseBatch:
    n = len(score)
    return SparseBatch(torch.zeros((n, 1), dtype=torch.int32), torch.zeros((n, 1), dtype=torch.int32),
                       score, result, torch.zeros(n, dtype=torch.int64), None, teacher)


def test_wdl_target_uses_the_teacher_and_the_blend():
    g = torch.Generator().manual_seed(3)
    y = torch.randn(64, generator=g)
    score = torch.randint(-800, 800, (64,), generator=g).float()
    teacher = torch.randint(-800, 800, (64,), generator=g).float()
    result = torch.randint(0, 3, (64,), generator=g).float() / 2
    b = _batch(score, result, teacher)
    plain = training_loss(y, b, 400.0)
    torch.testing.assert_close(plain, wdl_loss(y, score, result, 400.0))
    t = training_loss(y, b, 400.0, teacher="teacher_eval")
    torch.testing.assert_close(t, wdl_loss(y, teacher, result, 400.0))
    assert not torch.isclose(t, plain)  # the setting changes the loss
    bl = training_loss(y, b, 400.0, teacher="blend", teacher_weight=0.25)
    torch.testing.assert_close(bl, wdl_loss(y, 0.75 * score + 0.25 * teacher, result, 400.0))


def test_null_teacher_rows_are_left_out():
    y = torch.tensor([0.3, -0.2, 0.9], requires_grad=True)
    b = _batch(torch.tensor([10.0, 20, 30]), torch.tensor([1.0, 0.5, 0]), torch.tensor([100.0, NAN, -50]))
    loss = training_loss(y, b, 400.0, teacher="teacher_eval")
    keep = torch.tensor([0, 2])
    torch.testing.assert_close(loss, wdl_loss(y.detach()[keep], torch.tensor([100.0, -50]), torch.tensor([1.0, 0]), 400.0))
    loss.backward()
    assert y.grad[1] == 0 and y.grad[0] != 0


def test_teacher_needs_its_column():
    b = _batch(torch.zeros(2), torch.zeros(2))
    with pytest.raises(ValueError, match="needs a teacher_eval column"):
        training_loss(torch.zeros(2), b, 400.0, teacher="blend")


@pytest.mark.parametrize("cfg,msg", [
    ({"teacher_weight": 0.3}, "teacher_weight=0.3 has no effect with model.loss.teacher=score"),
    ({"teacher": "teacher_eval", "teacher_weight": 0.9}, "has no effect with model.loss.teacher=teacher_eval"),
    ({"teacher": "blend", "teacher_weight": 1.0}, "is model.loss.teacher=teacher_eval"),
    ({"teacher": "blend", "teacher_weight": 0}, "is model.loss.teacher=score"),
    ({"teacher": "blend", "teacher_weight": 1.5}, r"a number in \[0, 1\]"),
    ({"residual_space": "cp"}, "residual_space=cp has no effect with model.loss.target=wdl"),
])
def test_settings_without_effect_are_refused(cfg, msg):
    with pytest.raises(ValueError, match=msg):
        check_loss_config(cfg)


def teacher_net(folder):
    """A small random perspective net (chess768 -> 16x2 CReLU -> 1) to annotate with."""
    from nnue.inference.kinds.perspective import IntegerNet, make_arch
    from nnue.spec.quant import QuantScheme

    folder.mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(7)
    arch = make_arch("chess768", 16, "crelu", "MaterialCount<1>")
    return IntegerNet(arch, QuantScheme(), torch.randint(-60, 60, (768, 16), generator=g).to(torch.int16),
                      torch.randint(0, 100, (16,), generator=g).to(torch.int16),
                      torch.randint(-64, 64, (1, 32), generator=g).to(torch.int16), torch.zeros(1, dtype=torch.int16))


def test_annotate_with_a_net_teacher_is_its_integer_eval(sample_dataset, tmp_path):
    from nnue.inference import evaluate
    from nnue.pipeline.board import boards_from_bytes

    ds = tmp_path / "ds"
    shutil.copytree(sample_dataset, ds)
    net = teacher_net(tmp_path / "t")
    net.save(tmp_path / "t" / "net.safetensors")
    annotate(ds, teacher=str(tmp_path / "t" / "net.safetensors"), progress=False)
    for part in ds.glob("part-*.parquet"):
        t = read_part(part)
        want = evaluate(net, torch.from_numpy(boards_from_bytes(t.column("board")))).clamp(-32767, 32767)
        got = torch.tensor(t.column("teacher_eval").to_numpy(), dtype=torch.int64)
        assert torch.equal(got, want)
    with pytest.raises(ValueError, match="or the path of a net"):
        annotate(ds, teacher=str(tmp_path / "nothing-here"), progress=False)


def test_train_with_the_teacher_trains_another_net(sample_dataset, tmp_path):
    """The issue's case: the same recipe with model.loss.teacher=teacher_eval on an annotated
    dataset must not train bit for bit the same net; without the column it is refused."""
    from nnue.trainer.train import run

    base = ["experiment=demo", "data.val_fraction=0.2", "trainer.enable_progress_bar=false", "model.hidden=16",
            "trainer.max_epochs=1", "data.positions_per_epoch=2048", "data.batch_size=512"]
    err = check_train_args(base + [f"data.path={sample_dataset}", "model.loss.teacher=teacher_eval"])
    assert err and "teacher_eval" in err and "nnue annotate" in err
    ds = tmp_path / "ds"
    shutil.copytree(sample_dataset, ds)
    teacher_net(tmp_path / "teacher").save(tmp_path / "teacher" / "net.safetensors")
    r = annotate(ds, teacher=str(tmp_path / "teacher"), progress=False)  # our integer inference as the teacher
    assert r["columns"]["teacher_eval"]["nulls"] == 0 and r["columns"]["teacher_eval"]["source"] == "net:teacher"
    states = []
    for teacher in ("score", "teacher_eval"):
        out = tmp_path / teacher
        overrides = base + [f"data.path={ds}", f"paths.output_dir={out}", f"model.loss.teacher={teacher}"]
        assert check_train_args(overrides) is None
        GlobalHydra.instance().clear()
        with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
            run(compose("train", overrides=overrides))
        from safetensors.torch import load_file
        states.append(load_file(str(out / "checkpoints" / "weights-last.safetensors")))
    assert not torch.equal(states[0]["l1.weight"], states[1]["l1.weight"])
