"""CReLU: clamp(x, 0, 1) (DESIGN.md glossary; bullet's and Stockfish's clipped ReLU)."""
from __future__ import annotations

from .base import Activation, same


def _fwd(x):
    return tl.minimum(tl.maximum(x, 0.0), 1.0)  # noqa: F821  (tl: bound by nnue.kernels.activations)


def _grad(x):
    # clamp passes the gradient on 0 <= x <= 1 (torch's inclusive bounds)
    return tl.where((x >= 0.0) & (x <= 1.0), 1.0, 0.0)  # noqa: F821


SPEC = Activation(
    name="crelu", allowed=frozenset({"l0", "l1"}), width_rule="same width", width=same,
    float_ref=lambda x: x.clamp(0, 1),
    integer={"perspective": "v = clamp(acc, 0, QA); L1 sum of v", "deep_l0": "x0 = v (0..QA)",
             "hidden": "x = clamp(y, 0, QA)"},
    out_range={"deep_l0": (0, 255), "hidden": (0, 255)}, on_grid=True,
    l0_product=lambda v: v,
    l0_deep=lambda v, shift: v,
    hidden=lambda y, qa, shift: y.clamp(0, qa),
    triton_fwd=_fwd, triton_grad=_grad,
    c_l0_product="vi", c_l0_deep="vi", c_hidden="return c;",
)
