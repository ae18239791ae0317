"""ReLU: max(x, 0). A kernel op only (no place in a net: its output is unbounded)."""
from __future__ import annotations

import torch

from .base import Activation, same


def _fwd(x):
    return tl.maximum(x, 0.0)  # noqa: F821  (tl: bound by nnue.kernels.activations)


def _grad(x):
    # strict, as torch's threshold_backward
    return tl.where(x > 0.0, 1.0, 0.0)  # noqa: F821


SPEC = Activation(name="relu", allowed=frozenset(), width_rule="same width", width=same, float_ref=torch.relu,
                  integer={}, out_range={}, triton_fwd=_fwd, triton_grad=_grad)
