"""Test helpers: float perspective nets with chosen weights, written as weights checkpoints."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from nnue.trainer.model import Arch, PerspectiveNet


def make_model(activation: str, hidden: int = 32, buckets: int = 8, seed: int = 0,
               ft_scale: float = 0.3, l1_scale: float = 1.0) -> PerspectiveNet:
    """A random perspective net whose evals spread over both signs (chess768 inputs)."""
    torch.manual_seed(seed)
    m = PerspectiveNet(Arch(768, hidden, activation, buckets), backend="torch")
    with torch.no_grad():
        m.ft.weight.uniform_(-ft_scale, ft_scale)
        m.ft.bias.uniform_(0.0, 0.6)
        m.l1.weight.uniform_(-l1_scale, l1_scale)
        m.l1.bias.uniform_(-0.2, 0.2)
    return m.eval()


def write_weights(model: PerspectiveNet, path: Path, data_path=None, val_fraction: float = 0.2) -> Path:
    """Write ``model`` as a weights checkpoint (the trainer's WeightsCheckpoint layout)."""
    a = model.arch
    hp = {"hidden": a.hidden, "activation": a.activation, "features": "chess768",
          "output_buckets": f"MaterialCount<{a.num_buckets}>", "quant": None, "loss": None}
    meta = {"hparams": json.dumps(hp)}
    if data_path is not None:
        meta["data"] = json.dumps({"path": str(data_path), "val_fraction": val_fraction})
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path), meta)
    return path
