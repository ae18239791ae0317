"""Export: quantisation, overflow audit, file round trips, float-vs-integer cross-check."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from nnue.inference import NetFormatError, evaluate, forward_int, load
from nnue.inference.kinds.perspective import IntegerNet, make_arch
from nnue.spec.quant import QuantScheme
from nnue.trainer.export import ExportError, audit, export, quantise
from tests.netfiles import make_model, write_weights

ACTS = ["crelu", "screlu", "pairwise_crelu"]


@pytest.mark.parametrize("act", ACTS)
def test_export_files_and_round_trip(act, tmp_path, sample_dataset):
    ck = write_weights(make_model(act), tmp_path / "w.safetensors", sample_dataset)
    r = export(ck, tmp_path / "net", bias_correction=False)
    net = load(tmp_path / "net" / "net.safetensors")
    q = quantise(make_model(act), QuantScheme())
    for k in ("l0w", "l0b", "l1w", "l1b"):
        assert torch.equal(getattr(net, k), q[k].to(torch.int16)), k
    # raw layout: sizes and order
    raw = (tmp_path / "net" / "net.bin").read_bytes()
    H, L1 = 32, (32 if act == "pairwise_crelu" else 64)  # pairwise: 2 × H/2 products
    n = 768 * H + H + 8 * L1 + 8
    assert len(raw) == n * 2 + (-(n * 2) % 64) and len(raw) % 64 == 0
    arr = np.frombuffer(raw[: n * 2], dtype="<i2")
    assert np.array_equal(arr[: 768 * H].reshape(768, H), net.l0w.numpy())
    assert np.array_equal(arr[768 * H + H: 768 * H + H + 8 * L1].reshape(8, L1), net.l1w.numpy())
    assert raw[n * 2:] == bytes(len(raw) - n * 2)
    # export -> load -> save is byte-identical
    net.save(tmp_path / "again.safetensors")
    assert (tmp_path / "again.safetensors").read_bytes() == (tmp_path / "net" / "net.safetensors").read_bytes()
    meta = json.loads((tmp_path / "net" / "export.json").read_text())
    assert meta["architecture"]["activation"] == act and meta["quantisation"]["qa"] == 255
    assert r["cross_check"]["positions"] > 300 and not r["calibration"]["bias_correction"]


def test_bias_correction_removes_the_mean_rounding_error(tmp_path, sample_dataset):
    model = make_model("screlu", hidden=64, ft_scale=0.1, l1_scale=0.5, seed=3)
    # all 38 games as "validation": ~1,400 positions calibrate and ~1,400 check, ~170 a bucket
    # (with the default 20% of games the per-bucket means are too noisy to test at 1 cp)
    ck = write_weights(model, tmp_path / "w.safetensors", sample_dataset, val_fraction=1.0)
    plain = export(ck, tmp_path / "plain", bias_correction=False, max_positions=4000)
    fixed = export(ck, tmp_path / "fixed", max_positions=4000)
    a, b = load(tmp_path / "plain" / "net.safetensors"), load(tmp_path / "fixed" / "net.safetensors")
    assert torch.equal(a.l1w, b.l1w) and torch.equal(a.l0w, b.l0w)
    assert fixed["calibration"]["bias_correction"] and fixed["calibration"]["positions"] > 100
    # measured on positions the correction did not see
    assert abs(fixed["cross_check"]["mean_signed_diff_cp"]) < 1.0
    assert abs(fixed["cross_check"]["mean_signed_diff_cp"]) <= abs(plain["cross_check"]["mean_signed_diff_cp"]) + 0.1


def test_float_and_integer_evals_agree(tmp_path, sample_dataset):
    ck = write_weights(make_model("screlu", hidden=64, ft_scale=0.1, l1_scale=0.5), tmp_path / "w.safetensors",
                       sample_dataset)
    c = export(ck, tmp_path / "net")["cross_check"]
    # QB = 64 rounds output weights to 1/64: a few cp of quantisation error is expected
    assert c["mean_abs_diff_cp"] < 8.0 and c["max_abs_diff_cp"] < 50
    assert abs(c["mean_signed_diff_cp"]) < 1.5


@pytest.mark.parametrize("act", ACTS)
def test_integer_eval_equals_dequantised_float_net(act, tmp_path, sample_dataset):
    """With the quantised weights put back into a float net, float and integer evals differ only
    by the integer divisions' truncation (< 2 cp): the integer formula is the float formula."""
    model = make_model(act, hidden=48, ft_scale=0.2, l1_scale=1.5)
    ck = write_weights(model, tmp_path / "w.safetensors", sample_dataset)
    export(ck, tmp_path / "net")
    net = load(tmp_path / "net" / "net.safetensors")
    s = net.scheme
    deq = make_model(act, hidden=48).double()
    with torch.no_grad():
        deq.ft.weight.copy_(net.l0w.double() / s.qa)
        deq.ft.bias.copy_(net.l0b.double() / s.qa)
        deq.l1.weight.copy_(net.l1w.double() / s.qb)
        deq.l1.bias.copy_(net.l1b.double() / (s.qa * s.qb))
    from nnue.pipeline.batch import to_sparse_batch
    from nnue.trainer.export import validation_boards

    boards, scores = validation_boards({"path": str(sample_dataset), "val_fraction": 1.0}, 4000)
    b = to_sparse_batch({"boards": boards, "score": scores, "result": scores}, net.features, net.buckets)
    with torch.no_grad():
        f = deq(b.stm_indices, b.nstm_indices, b.bucket) * s.scale
    i = evaluate(net, boards).double()
    assert (i - f).abs().max() < 2.0
    assert (i - f).abs().mean() < 1.0


def test_load_refuses_mismatching_header(tmp_path, sample_dataset):
    ck = write_weights(make_model("crelu"), tmp_path / "w.safetensors", sample_dataset)
    export(ck, tmp_path / "net")
    path = tmp_path / "net" / "net.safetensors"
    with pytest.raises(NetFormatError, match="feature_set"):
        load(path, expect={"feature_set": "halfkp"})
    with pytest.raises(NetFormatError, match="format"):
        load(ck)  # a float weights file is not an integer net
    net = load(path)
    net.arch = dict(net.arch, feature_hash="0000000000000000")
    net.save(tmp_path / "tampered.safetensors")
    with pytest.raises(NetFormatError, match="feature_hash"):
        load(tmp_path / "tampered.safetensors")


def test_audit_refuses_accumulator_overflow_and_clip_repairs(tmp_path, sample_dataset):
    m = make_model("crelu")
    with torch.no_grad():
        m.ft.weight[:, 5] = 4.5  # 32 active × round(4.5·255) = 36,736 > 32,767
    ck = write_weights(m, tmp_path / "w.safetensors", sample_dataset)
    with pytest.raises(ExportError, match=r"l0 accumulator.*neuron 5"):
        export(ck, tmp_path / "net")
    assert not (tmp_path / "net" / "net.safetensors").exists()
    r = export(ck, tmp_path / "net", clip=True)
    assert r["audit"]["clipped"]["l0w"] > 0 and r["audit"]["accumulator_worst_case"] <= 32767


def test_audit_refuses_screlu_output_weights_beyond_int16_product():
    m = make_model("screlu")
    with torch.no_grad():
        m.l1.weight[3, 7] = 2.5  # round(2.5·64) = 160 > 32767 // 255 = 128
    with pytest.raises(ExportError, match="l1w"):
        audit(quantise(m, QuantScheme()), m.arch, QuantScheme(), 32)
    q, rep = audit(quantise(m, QuantScheme()), m.arch, QuantScheme(), 32, clip=True)
    assert int(q["l1w"].abs().max()) <= 128 and rep["clipped"]["l1w"] == 1


def test_integer_eval_raises_on_int32_overflow():
    H = 64
    net = IntegerNet(
        arch=make_arch("chess768", H, "screlu", "MaterialCount<1>"),
        scheme=QuantScheme(), l0w=torch.full((768, H), 1000, dtype=torch.int16),
        l0b=torch.zeros(H, dtype=torch.int16), l1w=torch.full((1, 2 * H), 32767, dtype=torch.int16),
        l1b=torch.zeros(1, dtype=torch.int16))
    idx = torch.arange(32, dtype=torch.int32).view(1, 32)
    with pytest.raises(OverflowError, match="int32"):
        forward_int(net, idx, idx, torch.zeros(1, dtype=torch.int64))


def test_evaluate_is_exact_against_int64_reference(tmp_path, sample_dataset):
    """The float32 embedding-bag accumulator equals an int64 gather-sum exactly."""
    ck = write_weights(make_model("screlu", ft_scale=1.9), tmp_path / "w.safetensors", sample_dataset)
    export(ck, tmp_path / "net", clip=True)
    net = load(tmp_path / "net" / "net.safetensors")
    from nnue.inference.exact import accumulators
    from nnue.pipeline.features import get_feature_set
    from nnue.trainer.export import validation_boards

    boards, _ = validation_boards({"path": str(sample_dataset), "val_fraction": 1.0}, 3000)
    stm, _ = get_feature_set("chess768").encode(boards)
    acc = accumulators(net, stm).long()
    w = torch.cat([net.l0w.long(), torch.zeros(1, net.l0w.shape[1], dtype=torch.long)])
    ref = w[stm.long().where(stm >= 0, torch.tensor(768))].sum(1) + net.l0b.long()
    assert torch.equal(acc, ref)
    assert evaluate(net, boards).dtype == torch.int64
