"""Test helpers: float perspective nets with chosen weights, written as weights checkpoints."""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from nnue.inference.net import IntegerNet, QuantScheme, make_arch
from nnue.pipeline.features import get_feature_set
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


def make_int_net(fs_name: str, act: str = "screlu", hidden: int = 64, buckets: int = 8, seed: int = 0,
                 dead: float = 0.0, bias: tuple[int, int] = (-100, 250)) -> IntegerNet:
    """A random integer net with an exported net's magnitudes: FT weights in ±150 (±0.6 at QA),
    biases in ``bias``, L1 weights in ±128 (the screlu audit's limit), bucket biases ±3000. Every
    accumulator fits int16 (250 + 32·150) and every L1 sum int32 (128 · 65025 · 128).
    dead: the fraction of neurons (chosen at random) given a bias of −8000, so they never fire."""
    fs = get_feature_set(fs_name)
    arch = make_arch(fs_name, hidden, act, f"MaterialCount<{buckets}>")
    g = torch.Generator().manual_seed(seed)
    l0w = torch.randint(-150, 151, (fs.num_inputs, hidden), generator=g).to(torch.int16)
    l0b = torch.randint(bias[0], bias[1] + 1, (hidden,), generator=g).to(torch.int16)
    l0b[torch.randperm(hidden, generator=g)[: int(dead * hidden)]] = -8000
    l1w = torch.randint(-128, 129, (buckets, arch["l1_inputs"]), generator=g).to(torch.int16)
    l1b = torch.randint(-3000, 3001, (buckets,), generator=g).to(torch.int16)
    return IntegerNet(arch, QuantScheme(), l0w, l0b, l1w, l1b)
