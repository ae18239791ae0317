"""The perspective net as a plain ``nn.Module``: feature transformer → activation → output buckets.

Forward: ``acc_p = bias + Σ W[f]`` for each perspective p (shared weights), ``h = [act(acc_stm),
act(acc_nstm)]``, ``y = L1_b(h)`` for the output bucket b of each position. ``y`` is the eval in
units of SCALE: ``eval_cp = y · SCALE``. State-dict layout (kept identical for every kernel
backend): ``ft.weight (F, H)``, ``ft.bias (H,)``, ``l1.weight (B_out, L1_in)``, ``l1.bias (B_out,)``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from nnue.kernels import ACTIVATIONS, sparse_ft_pair

PERSPECTIVE_ACTIVATIONS = ("crelu", "screlu", "pairwise_crelu")


@dataclass(frozen=True)
class Arch:
    """Architecture of a perspective net. num_inputs: feature count F; hidden: H per
    perspective; activation: crelu|screlu|pairwise_crelu; num_buckets: output buckets."""

    num_inputs: int
    hidden: int
    activation: str
    num_buckets: int

    def __post_init__(self):
        if self.activation not in PERSPECTIVE_ACTIVATIONS:
            raise ValueError(f"activation {self.activation!r}: perspective nets support "
                             f"{', '.join(PERSPECTIVE_ACTIVATIONS)}")
        if self.activation == "pairwise_crelu" and self.hidden % 2:
            raise ValueError("pairwise_crelu needs an even hidden size")

    @property
    def l1_inputs(self) -> int:
        return self.hidden if self.activation == "pairwise_crelu" else 2 * self.hidden

    def to_dict(self) -> dict:
        return asdict(self)


class FeatureTransformer(nn.Module):
    def __init__(self, num_inputs: int, hidden: int, max_active: int = 32):
        super().__init__()
        bound = 1.0 / math.sqrt(max_active)
        self.weight = nn.Parameter(torch.empty(num_inputs, hidden).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(hidden).uniform_(-bound, bound))


class PerspectiveNet(nn.Module):
    def __init__(self, arch: Arch, backend: str = "auto"):
        super().__init__()
        assert arch.activation in ACTIVATIONS
        self.arch, self.backend = arch, backend
        self.ft = FeatureTransformer(arch.num_inputs, arch.hidden)
        self.l1 = nn.Linear(arch.l1_inputs, arch.num_buckets)

    def forward(self, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
        """stm, nstm: (B, A) int32 −1-padded; bucket: (B,) int64 -> (B,) float eval / SCALE."""
        h = sparse_ft_pair(self.ft.weight, self.ft.bias, stm, nstm, self.arch.activation, self.backend)
        return self.l1(h).gather(1, bucket.view(-1, 1)).squeeze(1)

    @torch.no_grad()
    def clip_weights(self, ft_limit: float, l1_limit: float) -> None:
        """Clamp weights in place so that they stay quantisable (limits from the QuantScheme)."""
        self.ft.weight.clamp_(-ft_limit, ft_limit)
        self.ft.bias.clamp_(-ft_limit, ft_limit)
        self.l1.weight.clamp_(-l1_limit, l1_limit)
