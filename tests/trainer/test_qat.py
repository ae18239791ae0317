"""Quantisation-aware training and the L1 activation penalty."""
from __future__ import annotations

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from nnue.inference import evaluate
from nnue.inference.kinds.deep import DeepIntegerNet, make_deep_arch
from nnue.inference.kinds.perspective import IntegerNet, make_arch
from nnue.inference.api import boards_from_fens
from nnue.spec.quant import QuantScheme
from nnue.trainer.export import quantise
from nnue.trainer.model import fake_quant
from nnue.trainer.train import run
from tests.netfiles import make_deep_model, make_model
from tests.samples import SAMPLE


def test_fake_quant_values_and_straight_through_gradient():
    t = torch.tensor([0.1234, -0.5, 1.9, 0.0078125], requires_grad=True)
    q = fake_quant(t, 64)
    assert torch.equal(q.detach(), torch.round(t.detach() * 64) / 64)
    q.sum().backward()
    assert torch.equal(t.grad, torch.ones(4))
    # floor mode: the integer net's right shift of products (exact multiples stay put)
    x = torch.tensor([13 / 255, 12.9 / 255, 0.5])
    assert torch.allclose(fake_quant(x, 255, "floor") * 255, torch.tensor([13.0, 12.0, 127.0]))


def _boards(n):
    fens = [line[4:].strip() for line in open(SAMPLE) if line.startswith("fen ")]
    return boards_from_fens(fens[:: max(1, len(fens) // n)][:n])


def _int_net(model, scheme):
    q = quantise(model, scheme)
    a = model.arch
    if hasattr(a, "l1_outputs"):
        arch = make_deep_arch("chess768", a.hidden, a.activation, "MaterialCount<8>", a.l1_outputs,
                              a.l2_outputs, a.hidden_activation)
        specs = DeepIntegerNet.tensor_specs(arch)
        return DeepIntegerNet(arch, scheme, *(q[k].to(dt) for k, (dt, _) in specs.items()))
    arch = make_arch("chess768", a.hidden, a.activation, "MaterialCount<8>")
    return IntegerNet(arch, scheme, *(q[k].to(torch.int16) for k in ("l0w", "l0b", "l1w", "l1b")))


@pytest.mark.parametrize("kind", ["perspective", "deep"])
def test_qat_forward_tracks_the_integer_net(kind):
    """With QAT the float forward computes (almost) what the exported integer net computes: it is
    closer to the integer evals than the plain float forward of the same weights."""
    scheme = QuantScheme()
    model = (make_model("screlu", hidden=32, ft_scale=0.1, l1_scale=0.5, seed=5) if kind == "perspective"
             else make_deep_model("pairwise_crelu", 32, hidden_activation="screlu", seed=5, dense_scale=0.3))
    net = _int_net(model, scheme)
    boards = _boards(600)
    stm, nstm = net.features.encode(boards)
    bucket = net.buckets.of(boards)
    ints = evaluate(net, boards).double()
    with torch.no_grad():
        plain = model(stm, nstm, bucket).double() * scheme.scale
        model.enable_qat(scheme)
        qat = model(stm, nstm, bucket).double() * scheme.scale
    d_plain, d_qat = (plain - ints).abs(), (qat - ints).abs()
    assert plain.std() > 30
    assert d_qat.mean() < d_plain.mean(), (float(d_qat.mean()), float(d_plain.mean()))
    # what is left: the truncating divisions (perspective) / the final truncation (deep), ≤ 1 cp
    # per step, and float ties at the rounding points on a few positions
    assert d_qat.mean() < 1.5 and float((d_qat < 2).double().mean()) > 0.95, float(d_qat.mean())


def _train(sample_dataset, tmp_path, *extra):
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=[
            "experiment=demo", f"data.path={sample_dataset}", f"paths.output_dir={tmp_path}",
            "data.val_fraction=0.2", "trainer.enable_progress_bar=false", "trainer.max_epochs=2",
            "data.positions_per_epoch=16384", "model.hidden=32", *extra])
    return run(cfg)


def test_activation_penalty_makes_l0_sparser(sample_dataset, tmp_path):
    base = _train(sample_dataset, tmp_path / "a", "model.activation=crelu")
    sparse = _train(sample_dataset, tmp_path / "b", "model.activation=crelu", "model.act_l1=0.05")
    assert 0 <= sparse["val_l0_density"] < 0.8 * base["val_l0_density"], (sparse, base)
    assert sparse["val_block_sparsity"] > base["val_block_sparsity"]


def test_qat_training_runs_and_exports_closer(sample_dataset, tmp_path):
    from nnue.trainer.export import export

    m = _train(sample_dataset, tmp_path / "q", "model.qat=true")
    assert m["train_loss"] > 0
    r = export(tmp_path / "q" / "checkpoints" / "last.ckpt", tmp_path / "net")
    # the cross-check compares with the QAT forward the net was trained as
    assert r["cross_check"]["mean_abs_diff_cp"] < 2.0, r["cross_check"]
