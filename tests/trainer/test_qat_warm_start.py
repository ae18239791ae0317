"""QAT on by default for warm starts of engine kinds (``model.qat=auto``): a fine-tune of a net an
engine loads (sfnnv5, sfnnv16) trains on the engine's integer grids unless told otherwise, and
``nnue export`` warns, with the fix, when the float and integer nets are far apart."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from omegaconf import OmegaConf

from nnue.inference.kinds.sfnnv5.codec import nnue_bytes
from nnue.trainer import export as export_mod
from nnue.trainer.lit import resolve_qat
from nnue.trainer.train import run

from ..engines.test_sfnnv5 import random_int_net


@pytest.mark.parametrize("model,init,qat,want", [
    ({"kind": "sfnnv5"}, "ck.safetensors", "auto", True),
    ({"kind": "sfnnv5"}, None, "auto", False),
    ({"kind": "sfnnv16"}, "ck.safetensors", "auto", True),
    ({"kind": "perspective"}, "ck.safetensors", "auto", False),
    ({}, "ck.safetensors", "auto", False),
    ({"kind": "sfnnv5"}, "ck.safetensors", False, False),
    ({"kind": "perspective"}, None, True, True),
])
def test_auto_is_on_for_warm_starts_of_engine_kinds(model, init, qat, want):
    got, why = resolve_qat(OmegaConf.create(model | {"qat": qat}), init)
    assert got is want
    assert (why is None) == (qat != "auto")
    if why:
        assert f"QAT {'on' if want else 'off'}" in why


def _cmd(*args):
    return subprocess.run([sys.executable, "-m", "nnue.cli", *map(str, args)], capture_output=True, text=True)


def test_a_fine_tune_of_an_imported_sfnnv5_net_trains_with_qat(sample_dataset, tmp_path):
    (tmp_path / "small.nnue").write_bytes(nnue_bytes(random_int_net(64)))
    r = _cmd("import-net", tmp_path / "small.nnue", "-o", tmp_path / "imp")
    assert r.returncode == 0, r.stderr
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=[
            "model=sfnnv5", "model.hidden=64", "model.factoriser=false", f"data.path={sample_dataset}",
            f"paths.output_dir={tmp_path / 'run'}", f"init_weights={tmp_path / 'imp' / 'checkpoint.safetensors'}",
            "data.val_fraction=0.2", "trainer.enable_progress_bar=false", "trainer.max_epochs=1",
            "data.positions_per_epoch=4096", "data.batch_size=1024"])
    assert cfg.model.qat == "auto"
    run(cfg)
    ck = torch.load(tmp_path / "run" / "checkpoints" / "last.ckpt", map_location="cpu",
                    weights_only=True)
    assert ck["hyper_parameters"]["qat"] is True


def test_export_warns_of_a_large_float_vs_int_gap(sample_dataset, tmp_path, monkeypatch):
    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=[
            "experiment=demo", f"data.path={sample_dataset}", f"paths.output_dir={tmp_path / 'run'}",
            "data.val_fraction=0.2", "trainer.enable_progress_bar=false", "trainer.max_epochs=1",
            "data.positions_per_epoch=4096", "model.hidden=32"])
    run(cfg)
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    r = export_mod.export(ckpt, tmp_path / "net", data_path=str(sample_dataset))
    gap = r["cross_check"]["mean_abs_diff_cp"]
    assert gap < export_mod.GAP_WARN_CP and "warning" not in r["cross_check"]
    monkeypatch.setattr(export_mod, "GAP_WARN_CP", gap / 2)  # the same net, judged against a lower bar
    r = export_mod.export(ckpt, tmp_path / "net2", data_path=str(sample_dataset))
    w = r["cross_check"]["warning"]
    assert f"{gap:.1f} cp from the float net" in w and "model.qat=true" in w, w
    assert json.loads((tmp_path / "net2" / "export.json").read_text())["cross_check"]["warning"] == w
