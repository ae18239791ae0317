"""Net kind ``deep``: feature transformer → L0 activation → per output bucket L1 → L2 → out
(Stockfish-style layer stacks).

The kind's modules: :mod:`.net` (the integer net :class:`DeepIntegerNet` and its exact
evaluator), :mod:`.compiled` (its numba kernel, imported on first use). The float side is
:mod:`nnue.trainer.kinds.deep`.
"""
from __future__ import annotations

from ...exact import l0_rows
from ..spec import InferenceKind
from .net import (DeepIntegerNet, evaluate, evaluate_accumulator, evaluate_small, forward_after_l1,  # noqa: F401
                  forward_from_accumulators, forward_int, l2_activation, make_deep_arch, sparse_forward, summary)


def c_args(a: dict) -> list[str]:
    """The C reference's arguments for a deep net's architecture."""
    h1 = a["hidden_activation"]
    return ["--features", a["feature_set"], "--buckets", a["output_buckets"], "--deep", str(a["hidden"]),
            a["activation"], str(a["l1_outputs"]), str(a["l2_outputs"]), h1, a.get("l2_activation") or h1]


KIND = InferenceKind("deep", DeepIntegerNet, make_deep_arch, forward_int, evaluate, summary,
                     evaluate_small=evaluate_small, forward_from_accumulators=forward_from_accumulators,
                     accumulator_table=l0_rows, evaluate_accumulator=evaluate_accumulator,
                     sparse_forward=sparse_forward, c_args=c_args)
