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
    * ``arch_builder``: ``(feature_set=, output_buckets=, **header_args) -> architecture dict``;
    * ``c_args``: the C reference's arguments (after NET.bin) for an ``architecture`` dict, or
      None when the C reference has no such kind;
    * ``incremental``: whether :class:`nnue.inference.IncrementalAccumulator` and the
      block-sparse L1 path (:mod:`nnue.inference.sparse_l1`) handle the kind.
    """

    name: str
    integer: type
    evaluator: ModuleType
    arch_builder: Callable[..., dict]
    c_args: Callable[[dict], list[str]] | None = None
    incremental: bool = True

    @property
    def forward_from_accumulators(self):
        """The evaluator's ``forward_from_accumulators``, None when the kind has none."""
        return getattr(self.evaluator, "forward_from_accumulators", None)
