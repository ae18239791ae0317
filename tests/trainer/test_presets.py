"""The model presets of issue 11 (conf/model/viridithas.yaml, conf/model/plentychess.yaml) train
one batch (fast_dev_run), export, and evaluate exactly as the C reference does; block sparsity
is logged for them as for every net kind."""
from __future__ import annotations

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from nnue.inference import evaluate, load
from nnue.trainer.export import export
from nnue.trainer.train import run
from tests.cref import c_args_for_arch, run_c

PRESETS = {"viridithas": ("pairwise_crelu", "hardswish", "swiglu"),
           "plentychess": ("pairwise_crelu", "crelu", "screlu")}


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_preset_trains_and_exports_exactly(preset, sample_dataset, tmp_path, c_eval, fens, boards):
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=[
            f"model={preset}", f"data.path={sample_dataset}", f"paths.output_dir={tmp_path}",
            "data.val_fraction=0.2", "data.batch_size=512", "debug=fast", "trainer.enable_progress_bar=false",
            "model.hidden=32"])
    metrics = run(cfg)
    assert metrics.get("train_loss", 0) > 0, metrics
    assert "val_block_sparsity" in metrics and 0.0 <= metrics["val_block_sparsity"] <= 1.0
    weights = tmp_path / "checkpoints" / "weights-last.safetensors"
    r = export(weights, tmp_path / "net", data_path=str(sample_dataset))
    l0, l1, l2 = PRESETS[preset]
    arch = r["architecture"]
    assert (arch["kind"], arch["activation"], arch["hidden_activation"], arch["l2_activation"]) == ("deep", l0, l1, l2)
    assert arch["num_buckets"] == 8  # layer stacks by output bucket
    assert abs(r["cross_check"]["mean_signed_diff_cp"]) <= 1.0, r["cross_check"]
    net = load(tmp_path / "net" / "net.safetensors", expect={"l2_activation": l2, "hidden": 32})
    theirs = run_c(c_eval, tmp_path / "net" / "net.bin", c_args_for_arch(net.arch), fens)
    assert evaluate(net, boards).tolist() == theirs
