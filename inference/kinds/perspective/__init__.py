"""Net kind ``perspective``: feature transformer → activation → output buckets (bullet-style).

The kind's modules: :mod:`.net` (the integer net :class:`IntegerNet` and its exact evaluator),
:mod:`.compiled` (its numba kernels, imported on first use), :mod:`.bullet` (bullet's
``quantised.bin``, ``nnue export-net --to bullet``). The float side is
:mod:`nnue.trainer.kinds.perspective`.
"""
from __future__ import annotations

from ...exact import l0_rows
from ..spec import InferenceKind
from . import bullet
from .net import (IntegerNet, accumulator_layers, activations, evaluate, evaluate_accumulator,  # noqa: F401
                  evaluate_small, forward_int, l1_input, l1_plan, make_arch, output, sparse_forward, summary)


def c_args(a: dict) -> list[str]:
    """The C reference's arguments for a perspective net's architecture."""
    return ["--features", a["feature_set"], "--buckets", a["output_buckets"], "--perspective", str(a["hidden"]),
            a["activation"]]


KIND = InferenceKind("perspective", IntegerNet, make_arch, forward_int, evaluate, summary,
                     evaluate_small=evaluate_small, accumulator_table=l0_rows,
                     evaluate_accumulator=evaluate_accumulator, accumulator_layers=accumulator_layers,
                     sparse_forward=sparse_forward, c_args=c_args, targets={"bullet": bullet.write_bullet})
