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


def factor_map(feature_set: str, num_inputs: int) -> torch.Tensor:
    """The factoriser's virtual feature of every real feature: (num_inputs,) int64.

    * chess768: the (perspective-relative colour, piece type) group, ``i // 64``: 12 virtual
      features that count material, shared by every square, so that a small data set teaches
      the net piece values before piece-square detail;
    * king-bucketed 768 (``kb768…``): the piece-square feature without its king bucket,
      ``i % 768`` (bullet's usual factoriser);
    * halfkp: the piece-square feature without the king square, ``i % 641``;
    * halfkav2_hm: the piece-square feature without the king bucket, ``i % 704`` (nnue-pytorch's
      virtual "A" features).

    Raises ValueError for a feature set with no factoriser.
    """
    i = torch.arange(num_inputs)
    if feature_set == "chess768":
        return i // 64
    if feature_set.startswith("kb768"):
        return i % 768
    if feature_set == "halfkp":
        return i % 641
    if feature_set == "halfkav2_hm":
        return i % 704
    raise ValueError(f"no factoriser defined for feature set {feature_set!r} "
                     "(chess768, kb768..., halfkp, halfkav2_hm)")


class PerspectiveNet(nn.Module):
    """factors: optional (num_inputs,) int64 map of each feature to a virtual feature
    (:func:`factor_map`). The virtual weights ``ft.factor`` (V, H) are added to the real rows
    of their group in every forward pass and folded into ``ft.weight`` at export
    (:meth:`folded_ft_weight`): the exported net has the plain layout."""

    def __init__(self, arch: Arch, backend: str = "auto", factors: torch.Tensor | None = None):
        super().__init__()
        assert arch.activation in ACTIVATIONS
        self.arch, self.backend = arch, backend
        self.ft = FeatureTransformer(arch.num_inputs, arch.hidden)
        self.l1 = nn.Linear(arch.l1_inputs, arch.num_buckets)
        if factors is not None:
            if factors.shape != (arch.num_inputs,):
                raise ValueError(f"factor map must be ({arch.num_inputs},), got {tuple(factors.shape)}")
            self.register_buffer("factor_map", factors.long(), persistent=False)
            self.ft.factor = nn.Parameter(torch.zeros(int(factors.max()) + 1, arch.hidden))
        else:
            self.factor_map = None

    def folded_ft_weight(self) -> torch.Tensor:
        """The feature-transformer weights the net really uses: (F, H), virtual rows folded in."""
        if self.factor_map is None:
            return self.ft.weight
        return self.ft.weight + self.ft.factor[self.factor_map]

    def forward(self, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
        """stm, nstm: (B, A) int32 −1-padded; bucket: (B,) int64 -> (B,) float eval / SCALE."""
        h = sparse_ft_pair(self.folded_ft_weight(), self.ft.bias, stm, nstm, self.arch.activation, self.backend)
        return self.l1(h).gather(1, bucket.view(-1, 1)).squeeze(1)

    @torch.no_grad()
    def clip_weights(self, ft_limit: float, l1_limit: float) -> None:
        """Clamp weights in place so that they stay quantisable (limits from the QuantScheme):
        with a factoriser it is the folded weight that must stay within ``ft_limit``."""
        if self.factor_map is None:
            self.ft.weight.clamp_(-ft_limit, ft_limit)
        else:
            self.ft.factor.clamp_(-ft_limit, ft_limit)
            f = self.ft.factor[self.factor_map]
            torch.clamp(self.ft.weight, -ft_limit - f, ft_limit - f, out=self.ft.weight)
        self.ft.bias.clamp_(-ft_limit, ft_limit)
        self.l1.weight.clamp_(-l1_limit, l1_limit)
