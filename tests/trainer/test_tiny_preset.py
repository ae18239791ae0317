"""The tiny-net preset (conf/model/tiny.yaml: chess768 -> 2·16 CReLU -> 32 CReLU -> 1, QAT, 5 MiB
budget) trains one batch (fast_dev_run), exports within its byte budget, and evaluates exactly as
the C reference does; as a residual net (model.loss.target=residual on a material-annotated
dataset) its header carries base and α and the C reference adds the base the same way."""
from __future__ import annotations

import shutil

import pytest
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra

from nnue.trainer.checks import check_train_args
from nnue.inference import evaluate, load
from nnue.pipeline.annotate import annotate
from nnue.trainer.export import ExportError, export
from nnue.trainer.train import run
from tests.cref import c_args_for_arch, run_c


def _train(overrides, tmp_path):
    assert check_train_args(overrides) is None
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=overrides)
    return run(cfg)


@pytest.mark.parametrize("residual", [False, True])
def test_tiny_preset_trains_and_exports_exactly(residual, sample_dataset, tmp_path, c_eval, fens, boards):
    ds = sample_dataset
    extra = []
    if residual:
        ds = tmp_path / "ds"
        shutil.copytree(sample_dataset, ds)
        annotate(ds, base="material", progress=False)
        extra = ["model.loss.target=residual", "model.alpha=0.5"]
    metrics = _train(["model=tiny", f"data.path={ds}", f"paths.output_dir={tmp_path / 'run'}",
                      "data.val_fraction=0.2", "data.batch_size=512", "debug=fast",
                      "trainer.enable_progress_bar=false", *extra], tmp_path)
    assert metrics.get("train_loss", 0) > 0, metrics
    weights = tmp_path / "run" / "checkpoints" / "weights-last.safetensors"
    r = export(weights, tmp_path / "net")
    arch = r["architecture"]
    assert (arch["kind"], arch["hidden"], arch["l1_inputs"], arch["l1_outputs"], arch["num_buckets"]) == ("tiny", 16, 32, 32, 1)
    assert r["bytes"]["max_bytes"] == 5 * 2**20 and r["bytes"]["net.safetensors"] < 2**20
    assert r["calibration"].get("output_bias_shift_cp") is not None
    assert abs(r["cross_check"]["mean_signed_diff_cp"]) <= 1.0, r["cross_check"]
    assert [x["weight"] for x in r["layers"]] == ["int16", "int8", "int8"]
    net = load(tmp_path / "net" / "net.safetensors", expect={"kind": "tiny"})
    assert (net.arch.get("residual") or {}).get("alpha") == (0.5 if residual else None)
    theirs = run_c(c_eval, tmp_path / "net" / "net.bin", c_args_for_arch(net.arch), fens)
    assert evaluate(net, boards).tolist() == theirs
    with pytest.raises(ExportError, match=r"net.safetensors would be [\d,]+ bytes .* over model.max_bytes = 4,096"):
        export(weights, tmp_path / "small", max_bytes=4096)
    assert not (tmp_path / "small" / "net.safetensors").exists()


def test_tiny_config_errors(sample_dataset):
    base = ["model=tiny", f"data.path={sample_dataset}"]
    assert "model.max_bytes=-3" in check_train_args(base + ["model.max_bytes=-3"])
    assert "model.alpha=0.3" in check_train_args(base + ["model.alpha=0.3"])
    assert "model.tiny.l1_outputs" in check_train_args(base + ["model.tiny.l1_outputs=0"])
    assert "swiglu" in check_train_args(base + ["model.tiny.hidden_activation=swiglu"])
