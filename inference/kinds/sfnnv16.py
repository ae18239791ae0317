"""Net kind ``sfnnv16``: Stockfish 19's network (Full_Threats + PP_3Wide + HalfKAv2_hm → 2×L1
pairwise → 8 layer stacks of 32 → 32 → 1 with squared and clipped activations and a skip).

Integer net and evaluator :mod:`nnue.inference.sfnnv16`, the engine file
:mod:`nnue.inference.sfnnue19`; the float side is :mod:`nnue.trainer.kinds.sfnnv16`. Neither
the incremental accumulator nor the block-sparse L1 path handles it (threat features change
with every move of any piece: the one-position path evaluates from scratch).
"""
from __future__ import annotations

from .. import sfnnv16 as evaluator
from .spec import InferenceKind


def c_args(a: dict) -> list[str]:
    """The C reference's arguments for an sfnnv16 net (it reads the ``.nnue`` file itself)."""
    return ["--sfnnv16", str(a["hidden"])]


KIND = InferenceKind("sfnnv16", evaluator.SFNNv16IntegerNet, evaluator, evaluator.make_sfnnv16_arch, c_args,
                     incremental=False, sparse_l1=False)
