"""Feature-transformer and activation ops with backend dispatch.

``backend``: ``"auto"`` (Triton on CUDA once its kernels land, the torch reference otherwise),
``"torch"`` (always the reference in :mod:`nnue.kernels.reference`). The reference is the CPU
path and the oracle every other backend is tested against.
"""
from __future__ import annotations

import torch

from . import reference
from .reference import ACTIVATIONS  # noqa: F401

BACKENDS = ("auto", "torch")


def sparse_ft_pair(weight: torch.Tensor, bias: torch.Tensor, stm: torch.Tensor, nstm: torch.Tensor,
                   activation: str, backend: str = "auto") -> torch.Tensor:
    """Both perspectives through the feature transformer and the activation, concatenated.

    weight (F, H), bias (H,), stm/nstm (B, A) int32 −1-padded -> (B, 2·H') with H' = H, or
    H/2 for pairwise_crelu; the stm half comes first.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r} not one of {BACKENDS}")
    halves = [reference.activate(activation, reference.sparse_ft(weight, bias, idx)) for idx in (stm, nstm)]
    return torch.cat(halves, dim=1)
