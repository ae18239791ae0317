"""Hard-Swish: x·clamp(x/6 + 1/2, 0, 1) (Howard et al. 2019, "Searching for MobileNetV3"; DESIGN.md
glossary), after a deep net's hidden layers, its input clamped to ±CLAMP."""
from __future__ import annotations

import torch

from .base import CLAMP, Activation, same


def _fwd(x):
    return x * tl.minimum(tl.maximum(x / 6.0 + 0.5, 0.0), 1.0)  # noqa: F821  (tl: bound by the kernels)


def _grad(x):
    # s + x·s' with s = clamp(x/6 + 1/2, 0, 1)
    t = x / 6.0 + 0.5
    s = tl.minimum(tl.maximum(t, 0.0), 1.0)  # noqa: F821
    return s + tl.where((t >= 0.0) & (t <= 1.0), x / 6.0, 0.0)  # noqa: F821


def _hidden(y, qa, shift):
    yc = y.clamp(-CLAMP * qa, CLAMP * qa)
    g = (yc + 3 * qa).clamp(0, 6 * qa)
    return torch.div(yc * g, 6 * qa, rounding_mode="floor")


SPEC = Activation(
    name="hardswish", allowed=frozenset({"l1"}), width_rule="same width", width=same,
    float_ref=lambda x: x * (x / 6 + 0.5).clamp(0, 1),
    integer={"hidden": "ŷ = clamp(y, −8·QA, 8·QA); g = clamp(ŷ + 3·QA, 0, 6·QA); x = (ŷ·g) // (6·QA) "
                       "(floor; ŷ·g ≤ 2040·1530 fits int32)"},
    out_range={"hidden": (-96, 2040)}, u8=False, clamp_input=True,
    hidden=_hidden,
    triton_fwd=_fwd, triton_grad=_grad,
    c_hidden="int64_t g = yc + 3 * QA < 0 ? 0 : yc + 3 * QA > 6 * QA ? 6 * QA : yc + 3 * QA;\n"
             "return floor_div(yc * g, 6 * QA);",
)
