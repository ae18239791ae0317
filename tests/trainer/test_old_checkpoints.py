"""Checkpoints written before the net kinds moved into their module pairs still load: their hparams
(the net's settings flat, with the unused kinds' groups null: ``deep``, ``tiny``, ``sfnnv5``) build
the same net through today's ``LitNNUE`` and ``nnue export``, and the export gives the integer net
the old code exported, tensor for tensor (tests/data/pre_kinds/README.md says how they were made)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from nnue.inference import load
from nnue.trainer.checkpoint import load_ckpt
from nnue.trainer.export import export
from nnue.trainer.lit import LitNNUE

OLD = Path(__file__).resolve().parents[1] / "data" / "pre_kinds"
KINDS = ("perspective", "deep", "tiny")


@pytest.mark.parametrize("kind", KINDS)
def test_old_checkpoint_exports_the_same_integer_net(kind, tmp_path):
    r = export(OLD / kind / "last.ckpt", tmp_path / "net", max_positions=0)
    assert r["architecture"]["kind"] == kind
    ours, theirs = load(tmp_path / "net" / "net.safetensors"), load(OLD / kind / "net.safetensors")
    assert type(ours) is type(theirs) and ours.arch == theirs.arch and ours.scheme == theirs.scheme
    for name, t in theirs.tensors().items():
        assert torch.equal(getattr(ours, name), t), name
    assert (tmp_path / "net" / "net.bin").read_bytes() == theirs.raw_bytes()


@pytest.mark.parametrize("kind", KINDS)
def test_old_hparams_build_the_same_module(kind):
    """``LitNNUE(**hparams)`` of an old checkpoint: the net's settings arrive as one mapping, the
    old keys included, and the Lightning state dict loads strictly; the hparams it saves are the
    old ones (so a checkpoint it writes reads the same way)."""
    ck = load_ckpt(OLD / kind / "last.ckpt")
    hp = dict(ck["hyper_parameters"])
    assert {"deep", "tiny", "sfnnv5"} <= hp.keys() and hp["kind"] == kind
    lit = LitNNUE(**hp)
    assert lit.model.arch.kind == kind
    lit.load_state_dict(ck["state_dict"], strict=True)
    assert dict(lit.hparams) == hp
    assert torch.equal(lit.model.ft.weight, ck["state_dict"]["model.ft.weight"])
