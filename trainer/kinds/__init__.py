"""The net-kind registry of the trainer: one module per kind, each exporting ``KIND`` (a
:class:`~.spec.TrainerKind` holding the float model, quantise, audit and calibrate pieces and the
kind's inference side, :mod:`nnue.inference.kinds`), collected in :data:`KINDS` by plain imports.

Adding a kind: a module here, one under :mod:`nnue.inference.kinds`, a line in each registry, a
``conf/model/<kind>.yaml`` and its tests (docs/extending.md). The trainer builds a kind's net
from the settings of a model config or of a checkpoint's hparams (:func:`build`): ``kind``,
``hidden``, ``activation``, ``backend``, ``factoriser`` and the kind's own group (its
``layers_key``); nothing outside the kinds names one.
"""
from __future__ import annotations

from typing import Mapping

import torch

from nnue.spec.registry import registered

from . import deep, perspective, sfnnv5, sfnnv16, tiny
from nnue.pipeline import features
from .spec import TrainerKind

KINDS: dict[str, TrainerKind] = {k.name: k for k in (perspective.KIND, deep.KIND, tiny.KIND, sfnnv5.KIND, sfnnv16.KIND)}
#: the kind of a config or checkpoint that names none (``model.kind`` unset; runs from before kinds)
DEFAULT = perspective.KIND.name


def register(kind: TrainerKind):
    """Add ``kind`` to :data:`KINDS` for the duration of a ``with`` block (tests: the toy
    extensions). Raises ValueError if its name is taken."""
    return registered(KINDS, kind, "net kind")


def get(kind) -> TrainerKind:
    """The entry of ``kind``. Raises ValueError naming the known kinds."""
    try:
        return KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"net kind {kind!r}: one of {', '.join(KINDS)}") from None


def kind_of(cfg: Mapping) -> str:
    """The kind a model config or checkpoint hparams ``cfg`` names (:data:`DEFAULT` when unset)."""
    return cfg.get("kind") or DEFAULT


def layers_config(kind: str, cfg) -> dict:
    """The layer settings of a ``kind`` net from a model config or checkpoint hparams ``cfg``
    (a mapping): its ``layers_key`` group, {} when the kind has none or it is unset."""
    key = get(kind).layers_key
    return dict((cfg.get(key) if key else None) or {})


def check_kind_inputs(kind: str, feature_set: str, output_buckets: str, features_given: bool = False) -> None:
    """Raise ValueError naming the setting when ``kind`` requires another feature set or other
    output buckets (sfnnv5: halfkav2_hm and SFPieceCount<8>). ``features_given``: the feature set
    was set explicitly (``features=`` on the command line), against the one ``model=<kind>``
    brings."""
    k = get(kind)
    if k.features and feature_set != k.features:
        if features_given:
            raise ValueError(f"features={feature_set} conflicts with model={kind}, which brings its own feature set "
                             f"{k.features}: drop features=")
        raise ValueError(f"model.kind={kind} reads {k.features} features, not {feature_set}: use model={kind}, "
                         f"which brings them (or features={k.features})")
    if k.output_buckets and output_buckets != k.output_buckets:
        raise ValueError(f"model.kind={kind} has output buckets {k.output_buckets}, not {output_buckets} "
                         f"(model.output_buckets={k.output_buckets})")


def build_model(kind: str, feature_set: str, num_inputs: int, hidden: int, activation: str,
                num_buckets: int, backend: str = "auto", factoriser: bool = False,
                layers: dict | None = None, product_scale: float = 255 / 256, scale: float = 400.0,
                output_buckets: str | None = None) -> torch.nn.Module:
    """The float model of a ``kind`` net. layers: the kind's ``layers_key`` group
    ({"l1_outputs", "l2_outputs", "hidden_activation", "l2_activation"} for deep nets,
    {"l1_outputs", "hidden_activation"} for tiny nets). scale: SCALE (eval_cp = output·SCALE).
    Raises ValueError for an unknown kind or activation, or inputs the kind cannot take."""
    entry = get(kind)
    if output_buckets is not None:
        check_kind_inputs(kind, feature_set, output_buckets)
    factors = (features.factor_map(feature_set, num_inputs, partial=entry.partial_factoriser) if factoriser
               else None)
    arch = entry.float_arch.from_config(num_inputs, hidden, activation, num_buckets, layers or {}, product_scale,
                                        scale=scale)
    return entry.float_model(arch, backend, factors)


def build(net: Mapping, features, buckets, scheme, backend: str | None = None) -> torch.nn.Module:
    """The float model a model config's or a checkpoint's net settings describe: ``net`` holds
    ``kind`` (default :data:`DEFAULT`), ``hidden``, ``activation``, ``backend`` (default auto),
    ``factoriser`` and the kind's own group (``layers_key``); features: the
    :class:`~nnue.pipeline.features.FeatureSet`, buckets: the output buckets, scheme: the
    :class:`~nnue.spec.quant.QuantScheme` (its product scale QA / 2^l0_shift and SCALE);
    ``backend`` overrides the net's. Raises ValueError naming a missing or bad setting."""
    kind = kind_of(net)
    for key in ("hidden", "activation"):
        if net.get(key) is None:
            raise ValueError(f"model.{key} is missing: the {kind} net needs it")
    return build_model(kind, features.name, features.num_inputs, int(net["hidden"]), net["activation"],
                       buckets.count, backend or net.get("backend") or "auto", bool(net.get("factoriser")),
                       layers_config(kind, net), product_scale=scheme.qa / (1 << scheme.l0_shift),
                       scale=scheme.scale, output_buckets=buckets.name)
