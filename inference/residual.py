"""Residual nets: integer nets whose eval is added to a base eval, ``eval = base + α·net``.

A net of any kind (:mod:`nnue.inference.kinds`) is residual when its header's architecture holds a
``residual`` object (written by ``nnue export`` for a run trained with
``model.loss.target=residual``; type-checked on load by :func:`check`)::

    "residual": {"base": "material" | "stockfish-classical",
                 "alpha": 0.5, "alpha_num": 128, "alpha_shift": 8}

**Integer rule** (exact, all int64): the net's own integer eval ``n`` (centipawns, side-to-move
POV, as its kind computes it), the base ``b`` (int16 centipawns, side-to-move POV), and
α = ``alpha_num / 2^alpha_shift`` (``alpha_shift`` = 8: α is a multiple of 1/256, 0 < α ≤ 4)::

    eval = b + ((alpha_num · n + 2^(alpha_shift − 1)) >> alpha_shift)

``>>`` is an arithmetic shift (floor), so α·n is rounded to the nearest integer, halves
upwards (toward +∞): α = ½ and n = 3 give 2, n = −3 gives −1. α = 1 (``alpha_num`` 256) adds
``n`` itself. Nothing is clamped.

**Bases**: ``material`` is computed here from the packed board (:func:`material_base`: P N B R
Q K = 100 300 300 500 900 0 cp, the rule of ``nnue annotate --base material``);
``stockfish-classical`` is Stockfish 15.1's classical static eval, which only the engine
computes: the caller passes it (``nnue eval`` asks the engine, or reads the dataset's
``base_eval`` column); an evaluation without it raises :class:`BaseMissingError`.

Torch-only (imports :mod:`nnue.pipeline.features.board_tensor`, no pyarrow).
"""
from __future__ import annotations

import math

import torch

#: Bases a residual net may name; "material" is the only one computed here.
BASES = ("material", "stockfish-classical")
#: Piece values of the ``material`` base, centipawns, P N B R Q K (as nnue annotate's).
MATERIAL_CP = (100, 300, 300, 500, 900, 0)
ALPHA_SHIFT = 8
ALPHA_MAX = 4.0
INT16_MAX = 32767


class BaseMissingError(ValueError):
    """A residual net was evaluated without the base its eval is added to (one line)."""


def header(base: str, alpha: float) -> dict:
    """The ``residual`` object of a net's architecture for base ``base`` and α ``alpha``.

    Raises ValueError for an unknown base, or an α that is not a multiple of 1/256 in (0, 4]."""
    if base not in BASES:
        raise ValueError(f"residual base {base!r}: one of {', '.join(BASES)}")
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise ValueError(f"residual alpha {alpha!r}: a number in (0, {ALPHA_MAX:g}]") from None
    num = a * (1 << ALPHA_SHIFT)
    if not (math.isfinite(a) and 0 < a <= ALPHA_MAX) or num != round(num):
        raise ValueError(f"residual alpha {alpha!r}: a multiple of 1/{1 << ALPHA_SHIFT} in (0, {ALPHA_MAX:g}] "
                         f"(the integer net computes α·net as alpha_num·net >> {ALPHA_SHIFT}), e.g. 0.5 or 1")
    return {"base": base, "alpha": a, "alpha_num": int(num), "alpha_shift": ALPHA_SHIFT}


def check(where: str, r) -> str | None:
    """Why a decoded ``residual`` header object is not one this build reads (None if it is).
    ``where``: the field's name in messages."""
    if not isinstance(r, dict):
        return f"field {where!r} is {type(r).__name__}, expected an object"
    want = {"base": str, "alpha": (int, float), "alpha_num": int, "alpha_shift": int}
    for k, t in want.items():
        v = r.get(k)
        if k not in r:
            return f"field '{where}.{k}' is missing"
        if not isinstance(v, t) or isinstance(v, bool):
            return f"field '{where}.{k}' is {type(v).__name__} ({str(v)[:40]}), expected " \
                   f"{'a string' if t is str else 'an integer' if t is int else 'a number'}"
    extra = sorted(set(r) - set(want))
    if extra:
        return f"field '{where}.{extra[0]}' is not a field this build reads ({', '.join(want)})"
    if r["base"] not in BASES:
        return f"field '{where}.base' is {r['base']!r}, which this build does not know (known: {', '.join(BASES)})"
    if r["alpha_shift"] != ALPHA_SHIFT:
        return f"field '{where}.alpha_shift' is {r['alpha_shift']}, this build reads {ALPHA_SHIFT}"
    if not 0 < r["alpha_num"] <= ALPHA_MAX * (1 << ALPHA_SHIFT):
        return f"field '{where}.alpha_num' is {r['alpha_num']}, expected 1..{int(ALPHA_MAX) << ALPHA_SHIFT}"
    if r["alpha"] != r["alpha_num"] / (1 << ALPHA_SHIFT):
        return (f"field '{where}.alpha' is {r['alpha']}, but alpha_num / 2^alpha_shift is "
                f"{r['alpha_num'] / (1 << ALPHA_SHIFT)}: the header contradicts itself")
    return None


def of(net) -> dict | None:
    """The ``residual`` object of ``net`` (None for a plain net)."""
    return net.arch.get("residual")


def combine(net_cp: torch.Tensor, base_cp: torch.Tensor, alpha_num: int, alpha_shift: int = ALPHA_SHIFT) -> torch.Tensor:
    """The integer rule of the module docstring: ``base + ((alpha_num·net + 2^(s−1)) >> s)``.

    net_cp, base_cp: (N,) integer tensors, centipawns, stm POV -> (N,) int64."""
    n = net_cp.to(torch.int64)
    half = 1 << (alpha_shift - 1) if alpha_shift else 0
    return base_cp.to(torch.int64) + ((n * alpha_num + half) >> alpha_shift)


def material_base(boards: torch.Tensor) -> torch.Tensor:
    """Material balance of packed boards, side-to-move POV: (N, 32) uint8 -> (N,) int64
    centipawns (P N B R Q K = 100 300 300 500 900 0, clamped to ±32767). Raises ValueError on a
    wrong shape or dtype."""
    from nnue.pipeline.features.board_tensor import black_to_move, decode_squares

    occupied, code, _ = decode_squares(boards)
    value = torch.tensor(MATERIAL_CP)[code & 7] * occupied
    white = torch.where((code >> 3) == 1, -value, value).sum(1)
    return torch.where(black_to_move(boards), -white, white).clamp(-INT16_MAX, INT16_MAX)


def base_for(net, boards: torch.Tensor, base: torch.Tensor | None) -> torch.Tensor:
    """The base of each position for a residual net: ``base`` when given ((N,) integers,
    centipawns, stm POV), else computed when the net's base is ``material``. Raises
    BaseMissingError naming the base otherwise, ValueError for a base of the wrong length."""
    r = of(net)
    if base is not None:
        base = torch.as_tensor(base)
        if base.shape != (boards.shape[0],):
            raise ValueError(f"base has shape {tuple(base.shape)}, expected ({boards.shape[0]},): one base per position")
        if base.is_floating_point() and not torch.isfinite(base).all():
            raise BaseMissingError(f"residual net (base {r['base']}): {int((~torch.isfinite(base)).sum())} "
                                   f"position(s) have no base (NaN)")
        return base.to(torch.int64)
    if r["base"] == "material":
        return material_base(boards)
    raise BaseMissingError(f"residual net: its eval is {r['base']} + {r['alpha']:g}·net and no {r['base']} base "
                           f"was given (nnue eval reads it from Stockfish 15.1, or from the dataset's base_eval column)")
