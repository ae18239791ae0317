"""Every activation of nnue-forge: one module each, collected here by plain imports.

Each module (``crelu.py``, ``screlu.py``, …) exports one complete :class:`~.base.Activation`,
``SPEC``: where it is allowed, its width rule, its float rule and clamp, its exact integer
rule(s) and output bound, its approximation report (None when exact), its Triton forward and
gradient and its C reference code. Everything that used to dispatch on the name asks the spec;
this module is the registry and the rules that every activation shares (the gated units, the
float clamp, the overflow probe), plus :func:`c_header`, the C reference's generated activation
code.

Adding an activation: one module exporting ``SPEC``, one line in :data:`_BUILTIN`, and its tests
(docs/extending.md). A test may add one at run time with :func:`register` (a context manager).

Torch only: the trainer (float model, QAT, export), the kernels and inference all read this.
Places (``allowed``): ``"l0"`` after the feature transformer, on the clamped accumulator
``v = clamp(acc, 0, QA)`` (perspective and deep nets); ``"l1"`` after a deep net's L1 (and also
its L2); ``"l2"`` after a deep net's L2 only (the gated units, which need two projections).
Integer conventions: :mod:`.base`.
"""
from __future__ import annotations

import torch

from ..registry import registered
from . import crelu, hardswish, none, pairwise_crelu, relu, screlu, swiglu, swiglu_swish, swish
from .base import CLAMP, PLACES, Activation  # noqa: F401  (re-exported)

#: the registry's built-in entries, in the order of the C enum
_BUILTIN = (crelu.SPEC, screlu.SPEC, pairwise_crelu.SPEC, relu.SPEC, hardswish.SPEC, swish.SPEC, none.SPEC,
            swiglu.SPEC, swiglu_swish.SPEC)

#: name -> spec; :func:`register` adds to it (tests)
ACTIVATIONS: dict[str, Activation] = {a.name: a for a in _BUILTIN}

#: swish's knots and step (kept under their old names)
SWISH_STEP_DIV = swish.STEP_DIV
swish_table = swish.table
swish_error = swish.error


def register(spec: Activation):
    """Add ``spec`` to the registry for the duration of a ``with`` block (tests: the toy
    extensions). Raises ValueError if the name is taken or a gated unit's gate is unknown."""
    if spec.gate is not None and (spec.gate not in ACTIVATIONS or ACTIVATIONS[spec.gate].hidden is None):
        raise ValueError(f"activation {spec.name!r}: gate {spec.gate!r} has no hidden integer rule")
    return registered(ACTIVATIONS, spec, "activation")


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


def check_l0_width(activation: str, hidden: int) -> None:
    """Raise ValueError when H = ``hidden`` does not split as the L0 activation's width rule
    needs (a half-width rule such as pairwise_crelu needs an even H)."""
    a = get(activation)
    if 2 * a.width(hidden) != a.width(2 * hidden):
        raise ValueError(f"{activation} needs an even hidden size")


# ------------------------------------------------------------------------------ integer rules

def _l0(name: str) -> Activation:
    a = get(name)
    if a.l0_product is None or a.l0_deep is None:
        raise ValueError(f"activation {name!r} has no L0 integer rule")
    return a


def int_l0_deep(name: str, v: torch.Tensor, shift: int) -> torch.Tensor:
    """Deep nets' integer L0 activation of one perspective: v = clamp(acc, 0, QA) (N, H) int32
    -> (N, width(H)) int32 (the ``deep_l0`` rule of the spec)."""
    return _l0(name).l0_deep(v, shift)


def int_l0_product(name: str, v: torch.Tensor) -> torch.Tensor:
    """Perspective nets' L1 input before the sum: v (crelu), v² (screlu), v[j]·v[j + H/2]
    (pairwise_crelu), in v's dtype; whether the L1 sum is divided by QA: :func:`divides_by_qa`."""
    return _l0(name).l0_product(v)


def divides_by_qa(name: str) -> bool:
    """Perspective nets: whether the L1 sum of ``name`` is divided by QA (its inputs are
    products of two values at scale QA)."""
    return get(name).divides_by_qa


def int_hidden(name: str, y: torch.Tensor, qa: int, shift: int) -> torch.Tensor:
    """The integer hidden activation ``name`` of y (N, M) int64 (scale QA) -> int64: (N, M), or
    (N, M/2) for a gated unit (gate columns first): ``gate(y[:M/2])·clamp(y[M/2:], ±CLAMP·QA)
    >> shift``. Raises ValueError for an activation without a hidden rule."""
    a = get(name)
    if a.gated:
        m = y.shape[-1] // 2
        g = int_hidden(a.gate, y[..., :m], qa, shift)
        b = y[..., m:].clamp(-CLAMP * qa, CLAMP * qa)
        return (g * b) >> shift
    if a.hidden is None:
        raise ValueError(f"activation {name!r} has no hidden integer rule")
    return a.hidden(y, qa, shift)


def hidden_max_abs(name: str, qa: int, shift: int) -> int:
    """The largest |output| of the integer hidden activation ``name`` (for the overflow audit),
    probed on every integer input in ±(CLAMP + 1)·QA."""
    probe = torch.arange(-(CLAMP + 1) * qa, (CLAMP + 1) * qa + 1, dtype=torch.int64)
    a = get(name)
    if a.gated:
        g = int_hidden(a.gate, probe, qa, shift).abs().max()
        return int((g * CLAMP * qa) >> shift)
    return int(int_hidden(name, probe, qa, shift).abs().max())


def float_hidden(name: str, y: torch.Tensor, product_scale: float, act=None) -> torch.Tensor:
    """The float hidden activation the integer rule quantises: y (N, M) at activation scale ->
    (N, M) or (N, M/2) (gated). ``product_scale`` (QA / 2^l0_shift) multiplies every product of
    two activation-scale values (``Activation.product``), as the integer shift does; inputs of a
    ``clamp_input`` rule are clamped to ±CLAMP first. ``act(name, x)``: the elementwise op to use
    (e.g. the Triton kernels' dispatch); the spec's float reference when None."""
    a = get(name)
    f = act or (lambda n, x: get(n).float_ref(x))
    if a.gated:
        m = y.shape[-1] // 2
        return hidden_gate(a.gate, y[..., :m], y[..., m:], product_scale, act)
    out = f(name, y.clamp(-CLAMP, CLAMP) if a.clamp_input else y)
    return out * product_scale if a.product else out


def hidden_gate(gate: str, a: torch.Tensor, b: torch.Tensor, product_scale: float, act=None) -> torch.Tensor:
    """gate(a)·clamp(b, ±CLAMP)·product_scale (the float side of the gated units)."""
    f = act or (lambda n, x: get(n).float_ref(x))
    return f(gate, a.clamp(-CLAMP, CLAMP)) * b.clamp(-CLAMP, CLAMP) * product_scale


def approximation(name: str):
    """The approximation report of ``name`` (``qa -> dict``): its own, or its gate's for a gated
    unit; None when its integer rule is exact."""
    a = get(name)
    return a.approximation or (get(a.gate).approximation if a.gated else None)


# ------------------------------------------------------------------------------ the C reference

def _c_switch(fn: str, args: str, rows: list[tuple[str, str]], fail: str, prologue: str = "") -> str:
    cases = "".join(f"    case {e}: {{\n" + "".join(f"        {ln}\n" for ln in body.splitlines()) + "    }\n"
                    for e, body in rows)
    return (f"static {fn}({args}) {{\n{prologue}    switch (a) {{\n{cases}    default: break;\n    }}\n"
            f"    die(\"{fail}\");\n    return 0;\n}}\n")


def c_header() -> str:
    """The C reference's activation code, generated from the registry (``tests/c/nnue_eval.c``
    includes it as ``nnue_acts.h``, after its helpers): the enum ``ACT_<NAME>``, the parser
    ``parse_act(name, place)`` (place 0 after L0, 1 after L1, 2 after L2) and the rules
    ``act_l0_half``, ``act_l0_divides``, ``act_l0_product``, ``act_l0_deep``, ``hidden_act``,
    ``act_gate`` and ``act_gated``. Net activations only (kernel ops have no C code)."""
    specs = [a for a in ACTIVATIONS.values() if a.allowed]
    out = ["/* Generated by nnue.spec.activations.c_header() from the activation specs: do not edit. */",
           "enum { " + ", ".join(a.c_enum for a in specs) + " };", ""]
    out += [a.c_support + "\n" for a in specs if a.c_support]
    parse = ["/* place 0: after L0; 1: after L1; 2: after L2 */", "static int parse_act(const char *s, int place) {"]
    for a in specs:
        places = [i for i, p in enumerate(PLACES) if p in a.allowed or (p == "l2" and "l1" in a.allowed)]
        cond = " || ".join(f"place == {i}" for i in places)
        parse.append(f"    if (({cond}) && !strcmp(s, \"{a.name}\")) return {a.c_enum};")
    parse += ["    die(\"unknown activation\");", "    return -1;", "}", ""]
    out += parse
    l0 = [a for a in specs if "l0" in a.allowed]
    half = [a.c_enum for a in l0 if 2 * a.width(1) != a.width(2)]
    div = [a.c_enum for a in l0 if a.divides_by_qa]
    out.append("static int act_l0_half(int a) { return " + (" || ".join(f"a == {e}" for e in half) or "0") + "; }")
    out.append("static int act_l0_divides(int a) { return " + (" || ".join(f"a == {e}" for e in div) or "0")
               + "; }\n")
    out.append("/* perspective nets: the L1 input before the sum, from vi = v[i] and vp = v[i + H/2] */")
    out.append(_c_switch("int64_t act_l0_product", "int a, int64_t vi, int64_t vp",
                         [(a.c_enum, f"(void)vp;\nreturn {a.c_l0_product};") for a in l0], "not an L0 activation"))
    out.append("/* deep and tiny nets: x0 from vi = v[i] and vp = v[i + H/2] */")
    out.append(_c_switch("int32_t act_l0_deep", "int a, int32_t vi, int32_t vp",
                         [(a.c_enum, f"(void)vp;\nreturn {a.c_l0_deep};") for a in l0], "not an L0 activation"))
    hid = [a for a in specs if a.c_hidden]
    out.append("/* the hidden activation a of y = floor(s / 64) (the gated units' gates too) */")
    out.append(_c_switch("int64_t hidden_act", "int64_t y, int a", [(a.c_enum, a.c_hidden) for a in hid],
                         "not a hidden activation",
                         "    int64_t c = y < 0 ? 0 : y > 255 ? 255 : y;\n    int64_t yc = clampv(y);\n"
                         "    (void)c; (void)yc;\n"))
    gated = [a for a in specs if a.gated]
    out.append("/* gated units: the gate's activation, or -1 for an ungated one */")
    out.append("static int act_gate(int a) {\n" + "".join(f"    if (a == {a.c_enum}) return {get(a.gate).c_enum};\n"
                                                      for a in gated) + "    return -1;\n}\n")
    out.append("/* gated units: the output of gate output g and b = clampv(linear row) */")
    out.append(_c_switch("int64_t act_gated", "int a, int64_t g, int64_t b", [(a.c_enum, f"return {a.c_gated};")
                                                                            for a in gated], "not a gated unit"))
    return "\n".join(out)
