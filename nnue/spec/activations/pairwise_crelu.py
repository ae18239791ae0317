"""Pairwise CReLU: crelu(v[j])·crelu(v[j + H/2]) for j < H/2, the two halves of one perspective's
accumulator multiplied (DESIGN.md glossary; Stockfish's SFNNv6+ L0). Allowed after L0 only."""
from __future__ import annotations

from .base import Activation, half
from .crelu import SPEC as CRELU


def _pairs(v):
    h = v.shape[-1] // 2
    return v[..., :h] * v[..., h:]


def _float(x):
    h = x.shape[-1] // 2
    return x[..., :h].clamp(0, 1) * x[..., h:].clamp(0, 1)


SPEC = Activation(
    name="pairwise_crelu", allowed=frozenset({"l0"}),
    width_rule="half width: v[j]·v[j + H/2] for j < H/2 (H even)", width=half,
    float_ref=_float,
    integer={"perspective": "L1 sum of v[j]·v[j + H/2] (j < H/2), then / QA (truncating) before the bias",
             "deep_l0": "x0[j] = (v[j]·v[j + H/2]) >> l0_shift (0..254)"},
    out_range={"deep_l0": (0, 254)},
    product=True,
    l0_product=_pairs, divides_by_qa=True,
    l0_deep=lambda v, shift: _pairs(v) >> shift,
    # the fused FT applies crelu to both halves and multiplies them (product rule backward)
    triton_fwd=CRELU.triton_fwd, triton_grad=CRELU.triton_grad, triton_pairs=True,
    c_l0_product="vi * vp", c_l0_deep="(vi * vp) >> SHIFT_BITS",  # operands >= 0
)
