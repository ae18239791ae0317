"""Net kind ``perspective``: feature transformer → activation → output buckets (bullet-style).

Integer net :class:`nnue.inference.net.IntegerNet`, evaluator :mod:`nnue.inference.perspective`;
the float side is :mod:`nnue.trainer.kinds.perspective`.
"""
from __future__ import annotations

from .. import perspective as evaluator
from ..net import IntegerNet, make_arch
from .spec import InferenceKind


def c_args(a: dict) -> list[str]:
    """The C reference's arguments for a perspective net's architecture."""
    return ["--features", a["feature_set"], "--buckets", a["output_buckets"], "--perspective", str(a["hidden"]),
            a["activation"]]


KIND = InferenceKind("perspective", IntegerNet, evaluator, make_arch, c_args)
