"""Net kind ``deep``: feature transformer → L0 activation → per output bucket L1 → L2 → out.

Integer net and evaluator :mod:`nnue.inference.deep`; the float side is
:mod:`nnue.trainer.kinds.deep`.
"""
from __future__ import annotations

from .. import deep as evaluator
from .spec import InferenceKind


def c_args(a: dict) -> list[str]:
    """The C reference's arguments for a deep net's architecture."""
    h1 = a["hidden_activation"]
    return ["--features", a["feature_set"], "--buckets", a["output_buckets"], "--deep", str(a["hidden"]),
            a["activation"], str(a["l1_outputs"]), str(a["l2_outputs"]), h1, a.get("l2_activation") or h1]


KIND = InferenceKind("deep", evaluator.DeepIntegerNet, evaluator, evaluator.make_deep_arch, c_args)
