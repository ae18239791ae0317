"""Every activation of nnue-forge, one entry each: where it is allowed, its width rule, its float
reference, its integer rule and the C reference's code for it.

Torch only: the trainer (float model, QAT, export), the kernels (Triton codes, reference) and
inference (exact integer evaluation, header checks) all read this table, so adding an
activation is one entry here, its Triton branch (:mod:`nnue.kernels.activations`), its C branch
(``tests/c/nnue_eval.c``) and its tests.

Places (``allowed``):

* ``"l0"``: after the feature transformer, on the clamped accumulator ``v = clamp(acc, 0, QA)``
  (perspective and deep nets);
* ``"l1"``: after a deep net's L1 (and also its L2);
* ``"l2"``: after a deep net's L2 only (the gated units, which need two projections).

Integer conventions of the hidden (``"l1"``/``"l2"``) rules: the input is ``y = s >> log2(QB)``,
an integer at scale QA (real value y / QA), ``>>`` an arithmetic shift (floor), ``//`` floor
division; QA = 255 and l0_shift = 8 by default. ``C = 8·QA`` (2040) bounds the inputs of the
non-u8 activations (hardswish, swish, and both operands of the gated units): float and integer
nets clamp them to [−8, 8] (ŷ = clamp(y, −C, C)), so that every output fits int16 and the next
layer's worst-case sum is bounded.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

#: the clamp of the non-u8 hidden activations' inputs, in units of the activation scale
CLAMP = 8
#: swish: piecewise-linear knots every QA / SWISH_STEP_DIV of the input (0.2), over [−C, C]
SWISH_STEP_DIV = 5


@dataclass(frozen=True)
class Activation:
    """One activation.

    name: as configs and net headers spell it. code: the constexpr the Triton kernels branch on
    (:mod:`nnue.kernels.activations`). allowed: places (module docstring). width: outputs per
    perspective (L0) or per layer (hidden) from the input width; width_rule: the same in words.
    float_ref: the float function on activation-scale values (x = 1.0 at QA) that the float net
    computes (for the hidden entries, :func:`float_hidden` clamps the input to ±CLAMP first;
    None for the gated units, see :func:`hidden_gate`). integer: the exact integer rule, in
    words, per place ("perspective", "deep_l0", "hidden"). out_range: (lo, hi) of the integer
    output at QA = 255, l0_shift = 8 (per place). u8: whether the integer hidden output lies in
    0..255 (the int8 dense kernels' input; others take the exact float64 path). gated: two
    projections (the layer before has twice the outputs). c_code: the C reference's branch for
    it (``tests/c/nnue_eval.c`` holds it verbatim; the C tests check).
    """

    name: str
    code: int
    allowed: frozenset
    width_rule: str
    width: Callable[[int], int]
    float_ref: Callable[[torch.Tensor], torch.Tensor] | None
    integer: dict
    out_range: dict
    c_code: str
    u8: bool = True
    gated: bool = False
    gate: str | None = None


def _crelu(x):
    return x.clamp(0, 1)


def _screlu(x):
    return x.clamp(0, 1).square()


def _pairwise(x):
    h = x.shape[-1] // 2
    return x[..., :h].clamp(0, 1) * x[..., h:].clamp(0, 1)


def _hardswish(x):
    return x * (x / 6 + 0.5).clamp(0, 1)


def _swish(x):
    return x * torch.sigmoid(x)


_same = lambda n: n  # noqa: E731
_half = lambda n: n // 2  # noqa: E731

_TABLE: dict = {}


def _entry(name, code, allowed, width_rule, width, float_ref, integer, out_range, c_code, **kw):
    a = Activation(name, code, frozenset(allowed), width_rule, width, float_ref, integer, out_range,
                   c_code.strip("\n"), **kw)
    _TABLE[name] = a
    return a


_entry("crelu", 0, ("l0", "l1"), "same width", _same, _crelu,
       {"perspective": "v = clamp(acc, 0, QA); L1 sum of v", "deep_l0": "x0 = v (0..QA)",
        "hidden": "x = clamp(y, 0, QA)"},
       {"deep_l0": (0, 255), "hidden": (0, 255)},
       "    if (a == CRELU) return c;")
_entry("screlu", 1, ("l0", "l1"), "same width", _same, _screlu,
       {"perspective": "L1 sum of v·v, then / QA (truncating) before the bias",
        "deep_l0": "x0 = (v·v) >> l0_shift (0..254)", "hidden": "x = clamp(y, 0, QA)² >> l0_shift"},
       {"deep_l0": (0, 254), "hidden": (0, 254)},
       "    if (a == SCRELU) return (c * c) >> SHIFT_BITS;")
_entry("pairwise_crelu", 2, ("l0",), "half width: v[j]·v[j + H/2] for j < H/2 (H even)", _half, _pairwise,
       {"perspective": "L1 sum of v[j]·v[j + H/2] (j < H/2), then / QA (truncating) before the bias",
        "deep_l0": "x0[j] = (v[j]·v[j + H/2]) >> l0_shift (0..254)"},
       {"deep_l0": (0, 254)},
       "            if (ACT == PAIRWISE) x = (v[i] * v[i + H / 2]) >> SHIFT_BITS;  /* operands >= 0 */")
_entry("relu", 3, (), "same width", _same, torch.relu, {}, {}, "", )
_entry("hardswish", 4, ("l1",), "same width", _same, _hardswish,
       {"hidden": "ŷ = clamp(y, −8·QA, 8·QA); g = clamp(ŷ + 3·QA, 0, 6·QA); x = (ŷ·g) // (6·QA) "
                  "(floor; ŷ·g ≤ 2040·1530 fits int32)"},
       {"hidden": (-96, 2040)},
       "    if (a == HARDSWISH) return floor_div(yc * g, 6 * QA);", u8=False)
_entry("swish", 5, ("l1",), "same width", _same, _swish,
       {"hidden": "ŷ = clamp(y, −8·QA, 8·QA); piecewise linear through the knots "
                  "T[k] = round(QA·swish(−8 + k/5)), k = 0..80 (SWISH_TABLE): with d = QA/5 = 51, "
                  "i = min((ŷ + 8·QA) // d, 79), r = ŷ + 8·QA − d·i, x = T[i] + ((T[i+1] − T[i])·r + d // 2) // d (rounded). "
                  "An approximation of swish (export.json reports its error)"},
       {"hidden": (-71, 2039)},
       "    if (a == SWISH) return swish_pwl(yc);", u8=False)
_entry("none", 6, (), "same width", _same, lambda x: x, {}, {}, "")
_entry("swiglu", 7, ("l2",), "half of the layer's outputs: gate rows [0, N), linear rows [N, 2N)", _half,
       None,
       {"hidden": "g = hardswish(y[:N]) (its integer rule); b = clamp(y[N:], −8·QA, 8·QA); "
                  "x = (g·b) >> l0_shift (|g·b| ≤ 2040² fits int32)"},
       {"hidden": (-16256, 16256)},
       "            if (HACT2 == SWIGLU) x2[n] = (int32_t)floor_div(g * b, 1 << SHIFT_BITS);", u8=False, gated=True,
       gate="hardswish")
_entry("swiglu_swish", 8, ("l2",), "half of the layer's outputs: gate rows [0, N), linear rows [N, 2N)",
       _half, None,
       {"hidden": "g = swish(y[:N]) (its integer rule); b = clamp(y[N:], −8·QA, 8·QA); x = (g·b) >> l0_shift"},
       {"hidden": (-16256, 16256)},
       "            if (HACT2 == SWIGLU_SWISH) x2[n] = (int32_t)floor_div(g * b, 1 << SHIFT_BITS);", u8=False, gated=True,
       gate="swish")

ACTIVATIONS: dict[str, Activation] = dict(_TABLE)
#: Triton codes, name -> int (the kernels' ``ACT`` constexpr)
CODES = {a.name: a.code for a in ACTIVATIONS.values()}


def get(name: str) -> Activation:
    """The entry of ``name``. Raises ValueError naming the known ones."""
    try:
        return ACTIVATIONS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}") from None


def allowed(place: str) -> tuple[str, ...]:
    """Names allowed at ``place`` ("l0", "l1", "l2"; "l2" also takes everything "l1" does)."""
    places = {"l0": ("l0",), "l1": ("l1",), "l2": ("l1", "l2")}[place]
    return tuple(a.name for a in ACTIVATIONS.values() if a.allowed & set(places))


_PLACE_WORDS = {"l0": "after L0 (the feature transformer)", "l1": "after L1", "l2": "after L2"}


def check(name, place: str, what: str = "activation", key: str | None = None) -> Activation:
    """The entry of ``name`` if it is allowed at ``place``, else ValueError in one line naming
    where it is allowed and what is allowed here (``key``: the config key to set)."""
    names = allowed(place)
    if name not in names:
        where = ""
        if name in ACTIVATIONS:
            places = sorted(ACTIVATIONS[name].allowed)
            where = (f" ({name} is allowed {' and '.join(_PLACE_WORDS[p] for p in places)} only)" if places
                     else f" ({name} is a kernel op, not a net activation)")
        raise ValueError(f"{what} {name!r} is not allowed {_PLACE_WORDS[place]}{where}; "
                         f"{'set ' + key + ' to ' if key else ''}one of {', '.join(names)}")
    return ACTIVATIONS[name]


def l1_inputs(activation: str, hidden: int) -> int:
    """Width of L1's input for an L0 ``activation`` on H = ``hidden`` neurons per perspective:
    both perspectives' widths (2H, or H for pairwise_crelu)."""
    return 2 * get(activation).width(hidden)


# ------------------------------------------------------------------------------ integer rules

def int_l0_deep(name: str, v: torch.Tensor, shift: int) -> torch.Tensor:
    """Deep nets' integer L0 activation of one perspective: v = clamp(acc, 0, QA) (N, H) int32
    -> (N, width(H)) int32 (the ``deep_l0`` rule)."""
    if name == "crelu":
        return v
    if name == "screlu":
        return (v * v) >> shift
    if name == "pairwise_crelu":
        h = v.shape[-1] // 2
        return (v[..., :h] * v[..., h:]) >> shift
    raise ValueError(f"activation {name!r} has no L0 integer rule")


def int_l0_product(name: str, v: torch.Tensor) -> torch.Tensor:
    """Perspective nets' L1 input before the sum: v (crelu), v² (screlu), v[j]·v[j + H/2]
    (pairwise_crelu), in v's dtype; whether the L1 sum is divided by QA: :func:`divides_by_qa`."""
    if name == "screlu":
        return v * v
    if name == "pairwise_crelu":
        h = v.shape[-1] // 2
        return v[..., :h] * v[..., h:]
    if name == "crelu":
        return v
    raise ValueError(f"activation {name!r} has no L0 integer rule")


def divides_by_qa(name: str) -> bool:
    """Perspective nets: whether the L1 sum of ``name`` is divided by QA (its inputs are
    products of two values at scale QA)."""
    return name in ("screlu", "pairwise_crelu")


def swish_table(qa: int = 255) -> list[int]:
    """The knots of the integer swish: T[k] = round(qa·swish(−CLAMP + k/SWISH_STEP_DIV)) for
    k = 0..2·CLAMP·SWISH_STEP_DIV (81 values), rounding half away from zero. Pure Python
    (``math.exp``); the C reference holds the same values as a literal (tested)."""
    n = 2 * CLAMP * SWISH_STEP_DIV
    out = []
    for k in range(n + 1):
        x = -CLAMP + k / SWISH_STEP_DIV
        v = qa * x / (1.0 + math.exp(-x))
        out.append(int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1))
    return out


def _swish_int(y: torch.Tensor, qa: int) -> torch.Tensor:
    if qa % SWISH_STEP_DIV:
        raise ValueError(f"integer swish needs QA divisible by {SWISH_STEP_DIV}, got {qa}")
    d, c = qa // SWISH_STEP_DIV, CLAMP * qa
    t = torch.tensor(swish_table(qa), dtype=torch.int64)
    u = y.clamp(-c, c) + c
    i = torch.div(u, d, rounding_mode="floor").clamp(max=t.numel() - 2)
    r = u - d * i
    lo, hi = t[i], t[i + 1]
    return lo + torch.div((hi - lo) * r + d // 2, d, rounding_mode="floor")


def int_hidden(name: str, y: torch.Tensor, qa: int, shift: int) -> torch.Tensor:
    """The integer hidden activation ``name`` of y (N, M) int64 (scale QA) -> int64: (N, M), or
    (N, M/2) for a gated unit (gate columns first). The ``hidden`` rule of the entry."""
    a = get(name)
    if a.gated:
        m = y.shape[-1] // 2
        g = int_hidden(a.gate, y[..., :m], qa, shift)
        b = y[..., m:].clamp(-CLAMP * qa, CLAMP * qa)
        return (g * b) >> shift
    if name == "crelu":
        return y.clamp(0, qa)
    if name == "screlu":
        v = y.clamp(0, qa)
        return (v * v) >> shift
    if name == "hardswish":
        yc = y.clamp(-CLAMP * qa, CLAMP * qa)
        g = (yc + 3 * qa).clamp(0, 6 * qa)
        return torch.div(yc * g, 6 * qa, rounding_mode="floor")
    if name == "swish":
        return _swish_int(y, qa)
    raise ValueError(f"activation {name!r} has no hidden integer rule")


def hidden_max_abs(name: str, qa: int, shift: int) -> int:
    """The largest |output| of the integer hidden activation ``name`` (for the overflow audit)."""
    probe = torch.arange(-(CLAMP + 1) * qa, (CLAMP + 1) * qa + 1, dtype=torch.int64)
    a = get(name)
    if a.gated:
        g = int_hidden(a.gate, probe, qa, shift).abs().max()
        return int((g * CLAMP * qa) >> shift)
    return int(int_hidden(name, probe, qa, shift).abs().max())


def float_hidden(name: str, y: torch.Tensor, product_scale: float, act=None) -> torch.Tensor:
    """The float hidden activation the integer rule quantises: y (N, M) at activation scale ->
    (N, M) or (N, M/2) (gated). ``product_scale`` (QA / 2^l0_shift) multiplies every product of
    two activation-scale values, as the integer shift does. ``act(name, x)``: the elementwise
    op to use (e.g. the Triton kernels' dispatch); the spec's float reference when None."""
    a = get(name)
    f = act or (lambda n, x: get(n).float_ref(x))
    if a.gated:
        m = y.shape[-1] // 2
        return hidden_gate(a.gate, y[..., :m], y[..., m:], product_scale, act)
    if name == "screlu":
        return f("screlu", y) * product_scale
    if name in ("hardswish", "swish"):
        return f(name, y.clamp(-CLAMP, CLAMP))
    return f(name, y)


def hidden_gate(gate: str, a: torch.Tensor, b: torch.Tensor, product_scale: float, act=None) -> torch.Tensor:
    """gate(a)·clamp(b, ±CLAMP)·product_scale (the float side of the gated units)."""
    f = act or (lambda n, x: get(n).float_ref(x))
    return f(gate, a.clamp(-CLAMP, CLAMP)) * b.clamp(-CLAMP, CLAMP) * product_scale


def swish_error(qa: int = 255) -> dict:
    """How far the integer swish is from swish on its whole input range (every integer ŷ in
    [−8·QA, 8·QA]), in activation units (1.0 = QA): max and mean |int/QA − swish(ŷ/QA)|, and the
    mean signed error."""
    y = torch.arange(-CLAMP * qa, CLAMP * qa + 1, dtype=torch.int64)
    got = _swish_int(y, qa).double() / qa
    x = y.double() / qa
    d = got - x * torch.sigmoid(x)
    return {"max_abs": float(d.abs().max()), "mean_abs": float(d.abs().mean()), "mean_signed": float(d.mean()),
            "inputs": int(y.numel()), "knots": len(swish_table(qa))}
