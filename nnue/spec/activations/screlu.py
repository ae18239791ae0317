"""SCReLU: clamp(x, 0, 1)² (DESIGN.md glossary; bullet's squared clipped ReLU)."""
from __future__ import annotations

from .base import Activation, same


def _fwd(x):
    c = tl.minimum(tl.maximum(x, 0.0), 1.0)  # noqa: F821  (tl: bound by nnue.kernels.activations)
    return c * c


def _grad(x):
    # 2·clamp(x, 0, 1) on 0 <= x <= 1
    return tl.where((x >= 0.0) & (x <= 1.0), 2.0 * x, 0.0)  # noqa: F821


def _hidden(y, qa, shift):
    v = y.clamp(0, qa)
    return (v * v) >> shift


SPEC = Activation(
    name="screlu", allowed=frozenset({"l0", "l1"}), width_rule="same width", width=same,
    float_ref=lambda x: x.clamp(0, 1).square(),
    integer={"perspective": "L1 sum of v·v, then / QA (truncating) before the bias",
             "deep_l0": "x0 = (v·v) >> l0_shift (0..254)", "hidden": "x = clamp(y, 0, QA)² >> l0_shift"},
    out_range={"deep_l0": (0, 254), "hidden": (0, 254)},
    product=True,
    l0_product=lambda v: v * v, divides_by_qa=True,
    l0_deep=lambda v, shift: (v * v) >> shift,
    hidden=_hidden,
    triton_fwd=_fwd, triton_grad=_grad,
    c_l0_product="vi * vi", c_l0_deep="(vi * vi) >> SHIFT_BITS", c_hidden="return (c * c) >> SHIFT_BITS;",
)
