"""The :class:`Activation` spec record and the constants its rules share (torch only).

Integer conventions of the hidden (``"l1"``/``"l2"``) rules: the input is ``y = s >> log2(QB)``,
an integer at scale QA (real value y / QA), ``>>`` an arithmetic shift (floor), ``//`` floor
division; QA = 255 and l0_shift = 8 by default. ``C = CLAMP·QA`` (2040) bounds the inputs of the
non-u8 activations (``clamp_input``, and both operands of the gated units): float and integer
nets clamp them to [−CLAMP, CLAMP] (ŷ = clamp(y, −C, C)), so that every output fits int16 and the
next layer's worst-case sum is bounded.

Triton code: ``triton_fwd`` and ``triton_grad`` are plain functions written in Triton's language
(``tl.…``) over an fp32 block ``x``. The spec modules import no Triton (inference imports them):
the name ``tl`` is unbound here and :func:`nnue.kernels.activations.triton_ops` binds it to
``triton.language`` when it JIT-compiles them, then passes them to the kernels as ``tl.constexpr``
arguments.

C code: the C reference (``tests/c/nnue_eval.c``) includes a header generated from the specs
(:func:`nnue.spec.activations.c_header`): the enum, the name parser and every branch below.
The C snippets see ``QA``, ``SHIFT_BITS``, ``CLAMPV`` (= C), ``floor_div(a, d)`` and
``clampv(y)`` of ``nnue_eval.c``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

#: the clamp of the non-u8 hidden activations' inputs, in units of the activation scale
CLAMP = 8

#: places (``Activation.allowed``): after the feature transformer ("l0", on v = clamp(acc, 0, QA));
#: after a deep net's L1 and L2 ("l1"); after a deep net's L2 only ("l2", the gated units)
PLACES = ("l0", "l1", "l2")


@dataclass(frozen=True)
class Activation:
    """One activation: everything every layer needs from it.

    Identity and places:
      name: as configs and net headers spell it. allowed: the places it may stand (:data:`PLACES`;
      empty for a kernel-only op). width: outputs per perspective (L0) or per layer from the input
      width; width_rule: the same in words. integer: the exact integer rule in words, per place
      ("perspective", "deep_l0", "hidden"). out_range: (lo, hi) of the integer output at QA = 255,
      l0_shift = 8, per place ("deep_l0", "hidden"). u8: the integer hidden output lies in 0..255
      (the int8 dense kernels' input; others take the exact float64 path).

    Float side (activation scale, x = 1.0 at QA):
      float_ref: (…) float tensor -> same shape (width rule applied for pairwise); None for the
      gated units. clamp_input: the float and integer nets clamp the input to ±CLAMP first.
      product: the output is a product of two activation-scale values, so the float hidden rule
      multiplies it by ``product_scale`` (QA / 2^l0_shift), as the integer shift does. on_grid:
      the float output of an input on the integer grid is on the grid too (a clamp: QAT needs no
      floor after it).

    Integer side (exact; int32/int64 tensors):
      l0_product: perspective nets, v = clamp(acc, 0, QA) (N, H) -> the L1 input before the sum
      (N, width(H)), v's dtype. divides_by_qa: the perspective L1 sum is divided by QA (truncating)
      before the bias. l0_deep: deep/tiny nets, (v, l0_shift) -> x0 (N, width(H)).
      hidden: (y int64 (N, M), qa, shift) -> int64 (N, M). gate: the gated units' gate (the name of
      an activation with a ``hidden`` rule); the output is ``gate(y[:N])·clamp(y[N:], ±C) >> shift``.
      approximation: ``qa -> dict`` of the integer rule's error against float_ref (export.json
      reports it), None when the integer rule is exact.

    Kernels: triton_fwd / triton_grad (module docstring); triton_pairs: the forward is
    ``fwd(a)·fwd(b)`` of the two halves of the accumulator (pairwise), its gradient by the product
    rule. triton_linear: the derivative is 1 everywhere (the fused FT saves no accumulator).

    C reference (module docstring), one snippet per rule, each optional:
      c_enum: the enum constant. c_support: file-scope definitions (tables, helpers).
      c_l0_product: int64 expression of ``vi = v[i]`` and ``vp = v[i + H/2]`` (perspective);
      c_l0_deep: int32 expression of ``vi``, ``vp`` (deep/tiny x0); c_hidden: a statement
      ``return …;`` of ``y`` (int64), ``c = clamp(y, 0, 255)``, ``yc = clampv(y)``;
      c_gated: an expression of the gate's output ``g`` and ``b = clampv(linear row)``.
    """

    name: str
    allowed: frozenset
    width_rule: str
    width: Callable[[int], int]
    float_ref: Callable[[torch.Tensor], torch.Tensor] | None
    integer: dict
    out_range: dict
    u8: bool = True
    clamp_input: bool = False
    product: bool = False
    on_grid: bool = False
    l0_product: Callable[[torch.Tensor], torch.Tensor] | None = None
    divides_by_qa: bool = False
    l0_deep: Callable[[torch.Tensor, int], torch.Tensor] | None = None
    hidden: Callable[[torch.Tensor, int, int], torch.Tensor] | None = None
    gate: str | None = None
    approximation: Callable[[int], dict] | None = None
    triton_fwd: Callable | None = None
    triton_grad: Callable | None = None
    triton_pairs: bool = False
    triton_linear: bool = False
    c_support: str = ""
    c_l0_product: str = ""
    c_l0_deep: str = ""
    c_hidden: str = ""
    c_gated: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def gated(self) -> bool:
        """Two projections (the layer before has twice the outputs: gate rows, then linear rows)."""
        return self.gate is not None

    @property
    def c_enum(self) -> str:
        return "ACT_" + self.name.upper()

    @property
    def elementwise(self) -> bool:
        """Has a Triton forward of one input (not pairwise, not gated)."""
        return self.triton_fwd is not None and not self.triton_pairs


def same(n: int) -> int:
    """Width rule: as many outputs as inputs."""
    return n


def half(n: int) -> int:
    """Width rule: half the inputs (pairwise products, gated units)."""
    return n // 2
