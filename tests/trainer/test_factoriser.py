"""The chess768 factoriser: virtual material features, folded into the real weights at export."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from nnue.inference import load
from nnue.trainer.export import export, quantise
from nnue.spec.quant import QuantScheme
from nnue.trainer.kinds.perspective import Arch, PerspectiveNet
from nnue.trainer.model import factor_map


def _model(seed=0):
    torch.manual_seed(seed)
    m = PerspectiveNet(Arch(768, 16, "screlu", 8), backend="torch", factors=factor_map("chess768", 768))
    with torch.no_grad():
        m.ft.factor.uniform_(-0.5, 0.5)
    return m.eval()


def test_factor_map_groups_by_colour_and_piece_type():
    f = factor_map("chess768", 768)
    assert f.shape == (768,) and int(f.max()) == 11
    assert f[0].item() == 0 and f[64 * 5 + 63].item() == 5 and f[384].item() == 6
    with pytest.raises(ValueError):
        factor_map("nosuchset", 100)


@pytest.mark.parametrize("name,period", [("kb768hm4", 768), ("halfkp", 641), ("halfkav2_hm", 704)])
def test_king_sets_factorise_the_king_away(name, period):
    from nnue.pipeline.features import get_feature_set

    fs = get_feature_set(name)
    f = factor_map(name, fs.num_inputs)
    assert int(f.max()) == period - 1
    # every feature that the encoder produces maps to the same virtual feature whichever king
    # bucket it sits in: the virtual index is the king-independent part of the index
    assert torch.equal(f[:period], torch.arange(period)) and torch.equal(f[period:2 * period], torch.arange(period))


@pytest.mark.parametrize("name", ["kb768hm4", "halfkav2_hm"])
def test_factorised_king_set_trains_and_folds(name, tmp_path, sample_dataset):
    from nnue.pipeline.features import get_feature_set

    fs = get_feature_set(name)
    torch.manual_seed(0)
    m = PerspectiveNet(Arch(fs.num_inputs, 8, "crelu", 8), backend="torch", factors=factor_map(name, fs.num_inputs))
    with torch.no_grad():
        m.ft.factor.uniform_(-0.3, 0.3)
    hp = {"hidden": 8, "activation": "crelu", "features": name, "output_buckets": "MaterialCount<8>",
          "factoriser": True}
    save_file(m.state_dict(), str(tmp_path / "w.safetensors"),
              {"hparams": json.dumps(hp), "data": json.dumps({"path": str(sample_dataset), "val_fraction": 0.3})})
    r = export(tmp_path / "w.safetensors", tmp_path / "net", bias_correction=False)
    net = load(tmp_path / "net" / "net.safetensors")
    assert torch.equal(net.l0w.long(), torch.round(m.folded_ft_weight().double() * 255).long())
    assert r["cross_check"]["positions"] > 100 and r["cross_check"]["max_abs_diff_cp"] < 30


def test_folded_net_equals_factorised_net():
    m = _model()
    plain = PerspectiveNet(Arch(768, 16, "screlu", 8), backend="torch").eval()
    state = {k: v for k, v in m.state_dict().items() if k != "ft.factor"}
    state["ft.weight"] = m.folded_ft_weight().detach()
    plain.load_state_dict(state)
    g = torch.Generator().manual_seed(1)
    stm = torch.randint(-1, 768, (9, 32), generator=g, dtype=torch.int32)
    nstm = torch.randint(-1, 768, (9, 32), generator=g, dtype=torch.int32)
    bucket = torch.randint(0, 8, (9,), generator=g)
    torch.testing.assert_close(m(stm, nstm, bucket), plain(stm, nstm, bucket))
    q = quantise(m, QuantScheme())
    assert torch.equal(q["l0w"], torch.round(m.folded_ft_weight().double() * 255).long())


def test_gradient_reaches_the_virtual_features():
    m = _model().train()
    stm = torch.tensor([[0, 64, -1]], dtype=torch.int32)
    m(stm, stm, torch.zeros(1, dtype=torch.int64)).sum().backward()
    assert m.ft.factor.grad[0].abs().sum() > 0 and m.ft.factor.grad[1].abs().sum() > 0
    assert m.ft.factor.grad[2:].abs().sum() == 0


def test_clipping_bounds_the_folded_weight():
    m = _model()
    with torch.no_grad():
        m.ft.weight.fill_(1.9)
        m.ft.factor.fill_(0.5)
    m.clip_weights(1.98, 1.98)
    assert m.folded_ft_weight().abs().max() <= 1.98 + 1e-6


def test_export_folds_the_factoriser(tmp_path, sample_dataset):
    m = _model()
    hp = {"hidden": 16, "activation": "screlu", "features": "chess768", "output_buckets": "MaterialCount<8>",
          "factoriser": True}
    save_file(m.state_dict(), str(tmp_path / "w.safetensors"),
              {"hparams": json.dumps(hp), "data": json.dumps({"path": str(sample_dataset), "val_fraction": 0.2})})
    r = export(tmp_path / "w.safetensors", tmp_path / "net", bias_correction=False)
    net = load(tmp_path / "net" / "net.safetensors")
    assert tuple(net.l0w.shape) == (768, 16)  # plain layout: no virtual rows in the file
    assert torch.equal(net.l0w.long(), torch.round(m.folded_ft_weight().double() * 255).long())
    assert r["cross_check"]["mean_abs_diff_cp"] < 10
