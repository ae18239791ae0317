"""Net kind ``tiny``: chess768-sized feature transformer → one hidden layer → out (the 5 MiB MLP).

Integer net and evaluator :mod:`nnue.inference.tiny`; the float side is
:mod:`nnue.trainer.kinds.tiny`.
"""
from __future__ import annotations

from .. import tiny as evaluator
from .spec import InferenceKind


def c_args(a: dict) -> list[str]:
    """The C reference's arguments for a tiny net's architecture."""
    return ["--features", a["feature_set"], "--buckets", a["output_buckets"], "--tiny", str(a["hidden"]),
            a["activation"], str(a["l1_outputs"]), a["hidden_activation"]]


KIND = InferenceKind("tiny", evaluator.TinyIntegerNet, evaluator, evaluator.make_tiny_arch, c_args)
