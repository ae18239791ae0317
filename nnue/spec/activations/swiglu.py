"""SwiGLU with a Hard-Swish gate: hardswish(a)·b over the two halves of a deep net's L2 outputs
(Shazeer 2020, "GLU Variants Improve Transformer"; Viridithas's gated L2). Allowed after L2 only."""
from __future__ import annotations

from .base import Activation, half

SPEC = Activation(
    name="swiglu", allowed=frozenset({"l2"}),
    width_rule="half of the layer's outputs: gate rows [0, N), linear rows [N, 2N)", width=half,
    float_ref=None,
    integer={"hidden": "g = hardswish(y[:N]) (its integer rule); b = clamp(y[N:], −8·QA, 8·QA); "
                       "x = (g·b) >> l0_shift (|g·b| ≤ 2040² fits int32)"},
    out_range={"hidden": (-16256, 16256)}, u8=False, product=True, gate="hardswish",
    c_gated="floor_div(g * b, 1 << SHIFT_BITS)",
)
