"""The CPU fast path by default (nnue.trainer.fast_path): model.backend=auto and optimizer.sparse_ft=auto
resolved from the device, the world size, the kind and the optimiser; what the user set is kept; the
training log says which, once; a default CPU run trains on the compiled feature transformer with the
row-sparse AdamW, and a GPU, DDP or uncovered-kind config keeps the old defaults."""
from __future__ import annotations

import dataclasses
import logging

import pytest
import torch

from nnue.trainer import kinds
from nnue.trainer.fast_path import decide
from tests.trainer.test_train_runs import ckpt, train

ADAMW = {"_target_": "torch.optim.AdamW", "_partial_": True, "lr": 0.001, "weight_decay": 0.01,
         "betas": [0.9, 0.999], "sparse_ft": "auto"}
SCHEDULEFREE = {"_target_": "schedulefree.AdamWScheduleFree", "_partial_": True, "lr": 0.0025}
CPU = {"accelerator": "cpu", "devices": 1}


def model(**kw) -> dict:
    return {"kind": "perspective", "activation": "screlu", "backend": "auto", "qat": False, **kw}


def test_cpu_one_device_takes_the_fast_path():
    d = decide(model(), ADAMW, CPU)
    assert (d.backend, d.sparse_ft) == ("numba", True)
    assert d.note.startswith("CPU fast path:") and "model.backend=torch optimizer.sparse_ft=false" in d.note


@pytest.mark.parametrize("kind,activation", [("perspective", "crelu"), ("perspective", "pairwise_crelu"),
                                             ("deep", "screlu"), ("tiny", "crelu"), ("sfnnv5", "pairwise_crelu"),
                                             ("sfnnv16", "pairwise_crelu")])
def test_every_kind_and_l0_activation_is_covered(kind, activation):
    assert decide(model(kind=kind, activation=activation), ADAMW, CPU).backend == "numba"


def test_sfnnv16_takes_the_fast_path_under_qat_too():
    """Stockfish 19's kind: its compiled feature transformer does QAT (its default)."""
    d = decide(model(kind="sfnnv16", activation="pairwise_crelu", qat=True), ADAMW, CPU)
    assert (d.backend, d.sparse_ft) == ("numba", True)


@pytest.mark.parametrize("accelerator", ["gpu", "cuda"])
def test_gpu_keeps_auto_and_the_dense_optimiser(accelerator):
    d = decide(model(), ADAMW, {"accelerator": accelerator, "devices": 1})
    assert (d.backend, d.sparse_ft) == ("auto", False)
    assert f"training on {accelerator}" in d.note and "\n" not in d.note


def test_accelerator_auto_follows_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert decide(model(), ADAMW, {"accelerator": "auto"}).backend == "numba"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert decide(model(), ADAMW, {"accelerator": "auto"}).backend == "auto"


@pytest.mark.parametrize("trainer", [{"accelerator": "cpu", "devices": 2}, {"accelerator": "cpu", "devices": 1, "num_nodes": 2},
                                     {"accelerator": "cpu", "devices": -1}, {"accelerator": "cpu", "devices": [0, 1]}])
def test_ddp_on_cpu_compiles_the_ft_but_keeps_the_dense_optimiser(trainer):
    d = decide(model(), ADAMW, trainer)
    assert (d.backend, d.sparse_ft) == ("numba", False)
    assert "devices: optimizer.sparse_ft=auto -> false" in d.note


def test_sfnnv5_under_qat_keeps_the_reference():
    d = decide(model(kind="sfnnv5", activation="pairwise_crelu", qat=True), ADAMW, CPU)
    assert (d.backend, d.sparse_ft) == ("torch", False)
    assert "sfnnv5 kind's compiled feature transformer does not cover QAT" in d.note
    # the perspective kind's compiled path does QAT
    assert decide(model(qat=True), ADAMW, CPU).backend == "numba"


def test_a_kind_without_a_compiled_path_keeps_the_reference():
    """A kind whose record declares no compiled_ft (a new kind) trains on the torch reference."""
    toy = dataclasses.replace(kinds.get("perspective"), name="toy_no_compiled", compiled_ft=None)
    with kinds.register(toy):
        d = decide(model(kind="toy_no_compiled"), ADAMW, CPU)
    assert (d.backend, d.sparse_ft) == ("torch", False)
    assert "toy_no_compiled kind has no compiled CPU feature transformer" in d.note


def test_every_registered_kind_declares_its_compiled_path():
    """Each kind's record says whether its compiled feature transformer covers its default config
    (a kind added without the field trains on the torch reference, which the test above checks)."""
    assert all(kinds.get(k).compiled_ft is not None for k in kinds.KINDS)


def test_unresolved_qat_auto_counts_as_off():
    d = decide(model(kind="sfnnv5", activation="pairwise_crelu", qat="auto"), ADAMW, CPU)
    assert (d.backend, d.sparse_ft) == ("numba", True)


@pytest.mark.parametrize("optimizer,trainer,why", [
    ({**ADAMW, "amsgrad": True}, CPU, "amsgrad"),
    ({**ADAMW, "_target_": "torch.optim.SGD", "momentum": 0.9}, CPU, "needs optimizer=adamw"),
    (ADAMW, {**CPU, "gradient_clip_val": 1.0}, "gradient_clip_val"),
])
def test_optimisers_the_row_sparse_adamw_cannot_replace(optimizer, trainer, why):
    d = decide(model(), optimizer, trainer)
    assert (d.backend, d.sparse_ft) == ("numba", False)
    assert why in d.note


def test_schedule_free_has_no_sparse_key():
    d = decide(model(), SCHEDULEFREE, CPU)
    assert (d.backend, d.sparse_ft) == ("numba", None)


@pytest.mark.parametrize("backend,sparse,want", [
    ("torch", "auto", ("torch", False)), ("torch", False, ("torch", False)), ("numba", "auto", ("numba", True)),
    ("auto", False, ("numba", False)), ("numba", True, ("numba", True)), ("triton", "auto", ("triton", False)),
])
def test_what_the_user_set_is_kept(backend, sparse, want):
    d = decide(model(backend=backend), {**ADAMW, "sparse_ft": sparse}, CPU)
    assert (d.backend, d.sparse_ft) == want
    if backend != "auto" or sparse != "auto":
        assert not d.note.startswith("CPU fast path")


def test_default_cpu_run_trains_on_the_fast_path_and_says_so_once(sample_dataset, tmp_path, caplog):
    """``nnue train`` with nothing about backends: the compiled FT and RowSparseAdamW, logged in one line;
    config.yaml records what ran."""
    out = tmp_path / "run"
    with caplog.at_level(logging.INFO, logger="nnue.trainer"):
        m = train(sample_dataset, out, **{"trainer.max_epochs": 1})
    assert m["global_step"] > 0
    lines = [r.getMessage() for r in caplog.records if "fast path" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("CPU fast path: compiled feature transformer"), lines
    states = ckpt(out)["optimizer_states"][0]["state"].values()
    assert any("row_step" in s for s in states)  # RowSparseAdamW's state
    cfg = (out / "config.yaml").read_text()
    assert "backend: numba" in cfg and "sparse_ft: true" in cfg


def test_reference_path_when_asked(sample_dataset, tmp_path, caplog):
    out = tmp_path / "run"
    with caplog.at_level(logging.INFO, logger="nnue.trainer"):
        train(sample_dataset, out, **{"trainer.max_epochs": 1, "model.backend": "torch"})
    lines = [r.getMessage() for r in caplog.records if "optimizer.sparse_ft=auto -> false" in r.getMessage()]
    assert len(lines) == 1 and "model.backend=torch" in lines[0]
    states = ckpt(out)["optimizer_states"][0]["state"].values()
    assert not any("row_step" in s for s in states) and any("exp_avg" in s for s in states)


def test_default_sfnnv16_run_trains_on_the_fast_path(sample_dataset, tmp_path, caplog):
    """``model=sfnnv16`` with nothing about backends (QAT on, its default): the compiled feature
    transformer and RowSparseAdamW, as its record declares."""
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    from nnue.trainer.train import run

    GlobalHydra.instance().clear()
    with initialize_config_module(config_module="nnue.conf", version_base="1.3"):
        cfg = compose("train", overrides=[
            "model=sfnnv16", "model.hidden=64", f"data.path={sample_dataset}", f"paths.output_dir={tmp_path / 'run'}",
            "data.val_fraction=0.2", "trainer.enable_progress_bar=false", "trainer.max_epochs=1",
            "data.positions_per_epoch=1024", "data.batch_size=256"])
    with caplog.at_level(logging.INFO, logger="nnue.trainer"):
        m = run(cfg)
    assert m["global_step"] > 0
    lines = [r.getMessage() for r in caplog.records if "fast path" in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("CPU fast path: compiled feature transformer"), lines
    states = ckpt(tmp_path / "run")["optimizer_states"][0]["state"].values()
    assert any("row_step" in s for s in states)
    assert ckpt(tmp_path / "run")["hyper_parameters"]["qat"] is True
