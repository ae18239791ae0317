"""Identity ("none"): a kernel op only (the fused feature transformer without an activation)."""
from __future__ import annotations

from .base import Activation, same


def _fwd(x):
    return x


def _grad(x):
    return tl.full(x.shape, 1.0, tl.float32)  # noqa: F821  (tl: bound by nnue.kernels.activations)


SPEC = Activation(name="none", allowed=frozenset(), width_rule="same width", width=same, float_ref=lambda x: x,
                  integer={}, out_range={}, triton_fwd=_fwd, triton_grad=_grad, triton_linear=True)
