"""Net kind ``sfnnv5``: Stockfish 15.1's network (HalfKAv2_hm → 2×L1 pairwise → 8 layer stacks).

Integer net and evaluator :mod:`nnue.inference.sfnnv5`, the engine file
:mod:`nnue.inference.sfnnue`; the float side is :mod:`nnue.trainer.kinds.sfnnv5`. The
incremental accumulator and the one-position path handle it (its FT + PSQT rows and its
one-position eval: ``accumulator_table``, ``evaluate_accumulator``); the block-sparse L1 path
does not (``sparse_l1=False``: its L1 is the layer stacks' fc_0, evaluated densely).
"""
from __future__ import annotations

from .. import sfnnv5 as evaluator
from .spec import InferenceKind


def c_args(a: dict) -> list[str]:
    """The C reference's arguments for an sfnnv5 net (it reads the ``.nnue`` file itself)."""
    return ["--sfnnv5", str(a["hidden"])]


KIND = InferenceKind("sfnnv5", evaluator.SFNNv5IntegerNet, evaluator, evaluator.make_sfnnv5_arch, c_args,
                     sparse_l1=False)
