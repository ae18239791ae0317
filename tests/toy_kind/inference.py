"""Net kind ``toy``, inference side (``inference/kinds/toy.py`` in a real kind): its record, an
:class:`~nnue.inference.kinds.spec.InferenceKind`. The toy is the tiny net under a new name (its
integer net class, arch builder and evaluator are tiny's), so that the C reference can evaluate it;
a real kind writes its own. Registered with ``nnue.inference.kinds.register(KIND)`` (a real kind:
one line in ``inference/kinds/__init__.py``)."""
from __future__ import annotations

from dataclasses import dataclass

from nnue.inference.kinds import tiny
from nnue.inference.kinds.spec import InferenceKind


@dataclass
class ToyIntegerNet(tiny.TinyIntegerNet):
    """The integer net: tiny's tensors and file layout, ``architecture.kind`` "toy"."""

    kind = "toy"


def make_toy_arch(**kw) -> dict:
    """The header's ``architecture`` object (tiny's, kind "toy")."""
    return tiny.make_tiny_arch(**kw) | {"kind": "toy"}


KIND = InferenceKind("toy", ToyIntegerNet, make_toy_arch, tiny.forward_int, tiny.evaluate, tiny.summary,
                     forward_from_accumulators=tiny.forward_from_accumulators,
                     accumulator_table=tiny.KIND.accumulator_table, evaluate_accumulator=tiny.evaluate_accumulator,
                     sparse_forward=tiny.sparse_forward, c_args=tiny.c_args)
