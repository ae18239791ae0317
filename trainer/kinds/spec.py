"""What the trainer needs of a net kind: one :class:`TrainerKind` object per kind (a leaf module)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from nnue.inference.kinds.spec import InferenceKind


@dataclass(frozen=True)
class TrainerKind:
    """The trainer side of one net kind (its inference side is ``inference``).

    * ``float_arch``: the arch dataclass, with ``from_config(num_inputs, hidden, activation,
      num_buckets, layers, product_scale, scale)`` and ``header_args()`` (the inference
      kind's ``arch_builder`` arguments);
    * ``float_model``: the ``nn.Module``, built as ``float_model(arch, backend, factors)``, with
      ``forward_with_activations``, ``clip_weights``, ``enable_qat`` and ``folded_ft_weight``;
    * ``quantise(model, scheme)``: float state -> int64 tensors named as the integer class's
      ``tensor_specs``;
    * ``audit(q, arch, scheme, max_active, clip)``: (tensors, report), ExportError on overflow;
    * ``calibrate(model, q, net, scheme, stm, nstm, bucket)``: (tensors to replace, report);
    * ``layers_key``: the ``model.`` config group the kind reads its sizes after L0 from (the
      checkpoint's hparams keep it under the same key; None: the kind has none);
    * ``features`` / ``output_buckets``: what the kind requires (None: any). A kind with one
      feature set brings it: ``conf/model/<kind>.yaml`` selects it in its defaults list;
    * ``import_checkpoint(net)``: an integer net read from an engine's file (``nnue import-net``)
      -> (float state dict, checkpoint hparams) of this kind, whose ``quantise`` gives the net
      back; None when the kind has no engine file to import.
    * ``partial_factoriser``: the float model takes a factoriser map with −1 on rows that have no
      virtual row (sfnnv16: only its HalfKAv2_hm rows are factorised);
    * ``compiled_ft(activation, qat) -> bool``: whether the float model's ``backend="numba"``
      computes the feature transformer compiled (:mod:`nnue.kernels.sparse_ft_numba`) for that L0
      activation, under QAT or not; what ``model.backend=auto`` on the CPU asks
      (:mod:`nnue.trainer.fast_path`). None: the kind has no compiled CPU feature transformer and
      trains on the torch reference unless ``model.backend=numba`` is set.
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
    import_checkpoint: Callable | None = None
    partial_factoriser: bool = False
    compiled_ft: Callable[[str, bool], bool] | None = None
