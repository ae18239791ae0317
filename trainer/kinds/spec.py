"""What the trainer needs of a net kind: one :class:`TrainerKind` object per kind (a leaf module)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from nnue.inference.kinds.spec import InferenceKind


@dataclass(frozen=True)
class TrainerKind:
    """The trainer side of one net kind (its inference side is ``inference``).

    * ``float_arch``: the arch dataclass, with ``from_config(num_inputs, hidden, activation,
      num_buckets, layers, product_scale)`` and ``header_args()``;
    * ``float_model``: the ``nn.Module``, built as ``float_model(arch, backend, factors)``;
    * ``quantise(model, scheme)``: float state -> int64 tensors named as the integer class's
      ``tensor_specs``;
    * ``audit(q, arch, scheme, max_active, clip)``: (tensors, report), ExportError on overflow;
    * ``calibrate(model, q, net, scheme, stm, nstm, bucket)``: (tensors to replace, report);
    * ``layers_key``: the ``model.`` config group holding the sizes after L0 (None: none);
    * ``features`` / ``output_buckets``: what the kind requires (None: any);
    * ``partial_factoriser``: the float model takes a factoriser map with −1 on rows that have no
      virtual row (sfnnv16: only its HalfKAv2_hm rows are factorised).
    """

    name: str
    inference: InferenceKind
    float_arch: type
    float_model: type
    quantise: Callable
    audit: Callable
    calibrate: Callable
    layers_key: str | None = None
    features: str | None = None
    output_buckets: str | None = None
    partial_factoriser: bool = False
