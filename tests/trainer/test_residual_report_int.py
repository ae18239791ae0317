"""residual_report --net: the integer residual net's Spearman numbers are those of nnue.inference's
base + α·net on the held-out games (the header's α and the others), next to the float net's."""
from __future__ import annotations

import shutil

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from nnue.inference import evaluate, load
from nnue.pipeline.annotate import annotate
from nnue.pipeline.stream import Filters, PackedStream
from nnue.trainer.export import export
from nnue.trainer.metrics import spearman
from nnue.trainer.residual_report import residual_report
from nnue.trainer.train import run


def test_integer_numbers_are_nnue_inference_on_held_out_games(sample_dataset, tmp_path):
    import torch

    ds = tmp_path / "ds"
    shutil.copytree(sample_dataset, ds)
    annotate(ds, base="material", progress=False)
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=[
            "model=tiny", f"data.path={ds}", f"paths.output_dir={tmp_path / 'run'}", "data.val_fraction=0.2",
            "trainer.enable_progress_bar=false", "trainer.max_epochs=1", "data.positions_per_epoch=4096",
            "data.batch_size=256", "model.loss.target=residual"])
    run(cfg)
    ck = tmp_path / "run" / "checkpoints" / "last.ckpt"
    export(ck, tmp_path / "net")
    r = residual_report(ck, alphas=(1.0, 0.5), net=tmp_path / "net")
    i = r["integer"]
    assert i["residual"] == {"base": "material", "alpha": 0.5, "alpha_num": 128, "alpha_shift": 8}
    val = PackedStream([ds], 100_000, 0, "val", 0.2, Filters(), drop_last=False)
    b = next(iter(val))
    net = load(tmp_path / "net" / "net.safetensors")
    ev = evaluate(net, b["boards"])  # the material base computed by nnue.inference, α = ½ from the header
    assert torch.equal(b["base_eval"].long(), ev - evaluate(net, b["boards"], base=torch.zeros(len(ev))))
    assert i["spearman_base_plus_net"]["0.5"] == pytest.approx(spearman(ev.numpy(), b["score"].numpy()))
    assert abs(i["spearman_base_plus_net"]["1.0"] - r["spearman_base_plus_net"]["1.0"]) < 0.01
    assert i["mean_abs_int_minus_float_cp"] < 5
