"""Integer net files: what every kind's integer net shares (:class:`NetFile`: the header, the
``.safetensors`` writer and the raw engine-file writer) and the JSON field checks of the header
and of checkpoint hparams.

Standalone: torch, numpy and safetensors, plus the torch-only pipeline modules
(:mod:`nnue.pipeline.features`, :mod:`nnue.pipeline.atomic`) and :mod:`nnue.spec` (no
Lightning, Hydra or pyarrow). Each kind's integer net class and evaluator live with the kind
(:mod:`nnue.inference.kinds`), on the shared core :mod:`nnue.inference.exact`; loading and the
header checks in :mod:`nnue.inference.loader`; the entry points in :mod:`nnue.inference.api`.

Files: ``net.safetensors`` (the kind's tensors, e.g. ``l0w`` (F, H), ``l0b`` (H,), ``l1w``
(B, L1), ``l1b`` (B,), all int16 for a perspective net; metadata: one key, ``nnue_forge``,
holding a JSON object with ``format``, ``format_version``, ``architecture``, ``feature_set``,
``feature_hash``, ``output_buckets``, ``quantisation`` and ``provenance``) and the engine file
(the kind's ``engine_file``: :meth:`NetFile.write_bin`). Every decoded header field is
type-checked on load (:func:`nnue.inference.loader.check_header`).
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save as st_save

from nnue.pipeline.atomic import atomic_write_bytes
from nnue.pipeline.features import FeatureSet, get_feature_set, parse_output_buckets
from nnue.spec.quant import QuantScheme

FORMAT = "nnue-forge-integer-net"
FORMAT_VERSION = 1
META_KEY = "nnue_forge"


class NetFormatError(ValueError):
    """A net file is unreadable or does not match what was asked of it (names the field)."""


class NetFile:
    """What every integer net shares: header, metadata, the ``.safetensors`` writer and the raw
    ``.bin`` writer. Subclasses define ``arch``, ``scheme``, ``provenance``, :meth:`tensors`
    (name -> tensor, in file order) and :meth:`raw_layout` (a one-line description), and
    ``kind``, the name of their kind (:mod:`nnue.inference.kinds`)."""

    #: architecture field -> type, as :func:`check_header` checks them
    ARCH_FIELDS = {"kind": str, "feature_set": str, "feature_hash": str, "num_inputs": int, "hidden": int,
                   "activation": str, "output_buckets": str, "num_buckets": int, "l1_inputs": int}
    #: architecture field -> place of :mod:`nnue.spec.activations` its activation must be allowed at
    ARCH_ACTIVATIONS = {"activation": "l0"}

    @property
    def features(self) -> FeatureSet:
        return get_feature_set(self.arch["feature_set"])

    @property
    def buckets(self):
        return parse_output_buckets(self.arch["output_buckets"])

    def header(self) -> dict:
        """The metadata the file carries (one JSON object; see :func:`load`)."""
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION, "architecture": self.arch,
            "feature_set": self.arch["feature_set"], "feature_hash": self.arch["feature_hash"],
            "output_buckets": self.arch["output_buckets"], "quantisation": self.scheme.to_dict(),
            "provenance": self.provenance,
        }

    def metadata(self) -> dict[str, str]:
        # One key holding sorted JSON: safetensors stores metadata in a hash map whose order
        # varies from call to call, so several keys would make identical nets differ in bytes.
        return {META_KEY: json.dumps(self.header(), sort_keys=True)}

    def tensors(self) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def file_bytes(self) -> bytes:
        """The bytes of ``net.safetensors`` (what :meth:`save` writes)."""
        return st_save({k: v.contiguous() for k, v in self.tensors().items()}, self.metadata())

    def save(self, path: str | Path) -> None:
        """Write ``net.safetensors`` atomically (byte-identical for identical nets)."""
        atomic_write_bytes(Path(path), self.file_bytes())

    def raw_bytes(self) -> bytes:
        """The raw engine layout (:meth:`raw_layout`): every tensor of :meth:`tensors` in order,
        little-endian, row-major, no header, zero-padded to a multiple of 64 bytes."""
        le = {torch.int8: "i1", torch.int16: "<i2", torch.int32: "<i4"}
        raw = b"".join(t.contiguous().numpy().astype(le[t.dtype]).tobytes() for t in self.tensors().values())
        return raw + bytes(-len(raw) % 64)

    def write_bin(self, path: str | Path) -> None:
        """Write the engine file (:meth:`raw_bytes`; the kind's ``engine_file``) atomically."""
        atomic_write_bytes(Path(path), self.raw_bytes())


def json_type_name(v) -> str:
    return {type(None): "null", dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(v), type(v).__name__)


def json_is(v, types) -> bool:
    """isinstance, where a JSON boolean is not a number."""
    types = types if isinstance(types, tuple) else (types,)
    return isinstance(v, types) and not (isinstance(v, bool) and bool not in types)


_WANT = {int: "an integer", str: "a string", dict: "an object", bool: "true or false", (int, float): "a number"}


def field_problem(obj: dict, name: str, types, optional: bool = False) -> str | None:
    """What is wrong with the JSON field ``obj[name]`` against ``types`` (a type or a tuple; a
    JSON boolean is not a number): ``"is missing"``, ``"is a string ("x"), expected an integer"``,
    or None when it is fine (or absent and ``optional``). The one copy of the field rule that the
    net header (:func:`header_field`) and the checkpoint's hparams (``nnue.trainer.export``) use."""
    if name not in obj:
        return None if optional else "is missing"
    v = obj[name]
    if not json_is(v, types):
        return f"is {json_type_name(v)} ({json.dumps(v)[:40]}), expected {_WANT.get(types, types)}"
    return None


def quant_problem(quant: dict) -> tuple[str, str] | None:
    """The first field of a quantisation object (a header's ``quantisation``, a checkpoint's
    ``quant``) that :class:`~nnue.spec.quant.QuantScheme` cannot take: (field, what is wrong), or None."""
    for name in quant:
        types = QuantScheme.FIELD_TYPES.get(name)
        if types is None:
            return name, f"is not a field of the quantisation scheme this build reads ({', '.join(QuantScheme.FIELD_TYPES)})"
        why = field_problem(quant, name, types)
        if why:
            return name, why
    return None


def header_field(path, obj: dict, name: str, types, where: str = "", optional: bool = False):
    """``obj[name]`` checked against ``types``; NetFormatError naming file and field otherwise."""
    why = field_problem(obj, name, types, optional)
    if why:
        raise NetFormatError(f"{path}: field {where + name!r} {why}")
    return obj.get(name)
