"""What inference needs of a net kind: one :class:`InferenceKind` object per kind.

A leaf module (dataclasses only), so that the kind modules, the registry
(:mod:`nnue.inference.kinds`) and the trainer's kinds can all import it without a cycle.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Callable


@dataclass(frozen=True)
class InferenceKind:
    """The inference side of one net kind.

    * ``name``: the header's ``architecture.kind`` (and the trainer's ``model.kind``);
    * ``integer``: the integer net class (:class:`nnue.inference.net.NetFile` subclass) with
      ``ARCH_FIELDS``, ``tensor_specs(arch)`` and the file writers;
    * ``evaluator``: the module with ``forward_int(net, stm, nstm, bucket, return_parts)`` and
      ``evaluate(net, boards, chunk)`` (exact integer evaluation), and, for nets whose layers
      after the feature transformer run from accumulators, ``forward_from_accumulators``;
      a kind whose accumulators are not the ``l0w``/``l0b`` sums of an
      :class:`~nnue.inference.net.IntegerNet` (sfnnv5: FT and PSQT columns in one table) also
      gives ``accumulator_table(net)`` (the int32 rows the incremental accumulator adds) and
      ``evaluate_accumulator(net, acc, stm, bucket, layers=None)`` (one position's eval from
      them; ``layers``: what the optional ``accumulator_layers(net)`` returns, kept by the
      caller so that the net is not looked at again on every call);
    * ``arch_builder``: ``(feature_set=, output_buckets=, **header_args) -> architecture dict``;
    * ``c_args``: the C reference's arguments (after NET.bin) for an ``architecture`` dict, or
      None when the C reference has no such kind;
    * ``incremental``: whether :class:`nnue.inference.IncrementalAccumulator` and the
      one-position path :func:`nnue.inference.incremental.evaluate_one` handle the kind;
    * ``sparse_l1``: whether the block-sparse L1 path (:mod:`nnue.inference.sparse_l1`) does.
    """

    name: str
    integer: type
    evaluator: ModuleType
    arch_builder: Callable[..., dict]
    c_args: Callable[[dict], list[str]] | None = None
    incremental: bool = True
    sparse_l1: bool = True

    @property
    def forward_from_accumulators(self):
        """The evaluator's ``forward_from_accumulators``, None when the kind has none."""
        return getattr(self.evaluator, "forward_from_accumulators", None)

    @property
    def accumulator_table(self):
        """The evaluator's ``accumulator_table(net) -> (w (F, H) int32, b (H,) int32)`` NumPy
        arrays, None when the accumulators are an IntegerNet's ``l0w``/``l0b`` sums."""
        return getattr(self.evaluator, "accumulator_table", None)

    @property
    def accumulator_layers(self):
        """The evaluator's ``accumulator_layers(net)`` (what ``evaluate_accumulator`` takes as
        ``layers``), None when the kind has none."""
        return getattr(self.evaluator, "accumulator_layers", None)

    @property
    def evaluate_accumulator(self):
        """The evaluator's ``evaluate_accumulator(net, acc, stm, bucket, layers=None) -> int``
        (centipawns, stm POV, from the (2, H) int32 accumulators of one position, white's
        first), None when the kind has none."""
        return getattr(self.evaluator, "evaluate_accumulator", None)

    @property
    def evaluates_in_check(self) -> bool:
        """Whether the kind's engine gives a position in check an eval (the evaluator's
        ``EVAL_IN_CHECK``, default True): Stockfish does not, and ``nnue eval`` then prints
        ``none`` for it as the engine does."""
        return bool(getattr(self.evaluator, "EVAL_IN_CHECK", True))
