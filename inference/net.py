"""Integer net files: the classes every kind shares, the ``.safetensors`` / ``.bin`` writers, and
:func:`load` with its header checks.

Standalone: torch, numpy and safetensors, plus the torch-only pipeline modules
(:mod:`nnue.pipeline.features`, :mod:`nnue.pipeline.atomic`) and :mod:`nnue.spec` (no
Lightning, Hydra or pyarrow). Evaluation lives in :mod:`nnue.inference.perspective` and
:mod:`nnue.inference.deep` on the shared core :mod:`nnue.inference.exact`; the entry points in
:mod:`nnue.inference.api` (re-exported here under their old names).

Files: ``net.safetensors`` (tensors ``l0w`` (F, H), ``l0b`` (H,), ``l1w`` (B, L1), ``l1b`` (B,),
all int16 for a perspective net; metadata: one key, ``nnue_forge``, holding a JSON object with
``format``, ``format_version``, ``architecture``, ``feature_set``, ``feature_hash``,
``output_buckets``, ``quantisation`` and ``provenance``) and the raw ``net.bin``
(:meth:`NetFile.write_bin`). Every decoded header field is type-checked on load
(:func:`check_header`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save as st_save

from nnue.pipeline.atomic import atomic_write_bytes
from nnue.pipeline.features import FeatureSet, get_feature_set, parse_output_buckets
from nnue.spec import activations as acts
from nnue.spec import kinds
from nnue.spec.quant import QuantScheme  # noqa: F401  (re-exported: the scheme lives in nnue.spec)

from .exact import INT32_MAX, INT32_MIN  # noqa: F401  (re-exported)

FORMAT = "nnue-forge-integer-net"
FORMAT_VERSION = 1
META_KEY = "nnue_forge"


class NetFormatError(ValueError):
    """A net file is unreadable or does not match what was asked of it (names the field)."""


class NetFile:
    """What every integer net shares: header, metadata, the ``.safetensors`` writer and the raw
    ``.bin`` writer. Subclasses define ``arch``, ``scheme``, ``provenance``, :meth:`tensors`
    (name -> tensor, in file order) and :meth:`raw_layout` (a one-line description)."""

    kind = "perspective"
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
        atomic_write_bytes(Path(path), self.raw_bytes())


@dataclass
class IntegerNet(NetFile):
    """An exported integer perspective net.

    arch: {"kind": "perspective", "feature_set", "feature_hash", "num_inputs", "hidden",
    "activation", "output_buckets", "num_buckets", "l1_inputs"}. l0w: (F, H) int16; l0b: (H,)
    int16; l1w: (B, L1) int16 (first L1/2 weigh the stm half); l1b: (B,) int16.
    """

    arch: dict
    scheme: QuantScheme
    l0w: torch.Tensor
    l0b: torch.Tensor
    l1w: torch.Tensor
    l1b: torch.Tensor
    provenance: dict = field(default_factory=dict)

    kind = "perspective"

    def tensors(self) -> dict[str, torch.Tensor]:
        return {"l0w": self.l0w, "l0b": self.l0b, "l1w": self.l1w, "l1b": self.l1b}

    @staticmethod
    def raw_layout() -> str:
        return "l0w int16[F][H] | l0b int16[H] | l1w int16[B][L1] | l1b int16[B] | zeros to a multiple of 64 B"

    @staticmethod
    def tensor_specs(arch: dict) -> dict[str, tuple[torch.dtype, tuple]]:
        """name -> (dtype, shape) of every tensor a net of ``arch`` holds."""
        return {"l0w": (torch.int16, (arch["num_inputs"], arch["hidden"])),
                "l0b": (torch.int16, (arch["hidden"],)),
                "l1w": (torch.int16, (arch["num_buckets"], arch["l1_inputs"])),
                "l1b": (torch.int16, (arch["num_buckets"],))}


def make_arch(feature_set: str, hidden: int, activation: str, output_buckets: str) -> dict:
    """The ``arch`` dict of an :class:`IntegerNet` (written into the header) for a perspective
    net: feature set by name (its hash and input count looked up), H per perspective, the
    activation and the output-bucket spec (e.g. "MaterialCount<8>"). Raises KeyError/ValueError
    for unknown names."""
    fs = get_feature_set(feature_set)
    buckets = parse_output_buckets(output_buckets)
    return {"kind": "perspective", "feature_set": fs.name, "feature_hash": fs.hash, "num_inputs": fs.num_inputs,
            "hidden": hidden, "activation": activation, "output_buckets": buckets.name,
            "num_buckets": buckets.count, "l1_inputs": acts.l1_inputs(activation, hidden)}




def json_type_name(v) -> str:
    return {type(None): "null", dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(v), type(v).__name__)


def _is(v, types) -> bool:
    """isinstance, where a JSON boolean is not a number."""
    types = types if isinstance(types, tuple) else (types,)
    return isinstance(v, types) and not (isinstance(v, bool) and bool not in types)


_WANT = {int: "an integer", str: "a string", dict: "an object", (int, float): "a number"}


def _field(path, obj: dict, name: str, types, where: str = "", optional: bool = False):
    """``obj[name]`` checked against ``types``; NetFormatError naming file and field otherwise."""
    full = f"{where}{name}"
    if name not in obj:
        if optional:
            return None
        raise NetFormatError(f"{path}: field {full!r} is missing")
    v = obj[name]
    if not _is(v, types):
        raise NetFormatError(f"{path}: field {full!r} is {json_type_name(v)} ({json.dumps(v)[:40]}), "
                             f"expected {_WANT.get(types, types)}")
    return v


def check_header(path, meta) -> tuple[dict, QuantScheme, type]:
    """Check a decoded ``nnue_forge`` header object field by field: presence, JSON type, and the
    values this build can read (format, version, kind, activations allowed where they stand,
    feature set and output buckets known, the duplicated top-level fields agreeing with the
    architecture, the derived sizes matching the feature set, buckets and activation).

    Returns (architecture, scheme, integer class of the kind). Raises NetFormatError naming
    the file and the field: never KeyError, AttributeError or TypeError."""
    if not isinstance(meta, dict):
        raise NetFormatError(f"{path}: metadata {META_KEY!r} is {json_type_name(meta)}, expected an object")
    fmt = meta.get("format")
    if fmt != FORMAT:
        raise NetFormatError(f"{path}: field 'format' is {fmt!r}, expected {FORMAT!r}")
    if not _is(meta.get("format_version"), int) or meta["format_version"] != FORMAT_VERSION:
        raise NetFormatError(f"{path}: field 'format_version' is {meta.get('format_version')!r}, "
                             f"this build reads {FORMAT_VERSION}")
    arch = _field(path, meta, "architecture", dict)
    kind = _field(path, arch, "kind", str, "architecture.", optional=True) or "perspective"
    if kind not in kinds.KINDS:
        raise NetFormatError(f"{path}: field 'architecture.kind' is {kind!r}, expected one of "
                             f"{', '.join(repr(k) for k in kinds.KINDS)}")
    cls = kinds.get(kind).load("integer")
    optional = getattr(cls, "ARCH_OPTIONAL", {})
    for name, types in cls.ARCH_FIELDS.items():
        _field(path, arch, name, types, "architecture.", optional=name == "kind" or name in optional)
    for name, place in cls.ARCH_ACTIVATIONS.items():
        v = arch.get(name, optional.get(name) and arch.get(optional[name]))
        if v not in acts.ACTIVATIONS:
            raise NetFormatError(f"{path}: field 'architecture.{name}' names activation {v!r}, which this "
                                 f"build does not know (known: {', '.join(acts.allowed(place))})")
        try:
            acts.check(v, place)
        except ValueError as e:
            raise NetFormatError(f"{path}: field 'architecture.{name}': {e}") from None
    if "residual" in arch:  # base + α·net (nnue.inference.residual)
        from . import residual

        why = residual.check("architecture.residual", arch["residual"])
        if why:
            raise NetFormatError(f"{path}: {why}")
    for name in ("hidden", "num_inputs", "num_buckets", "l1_inputs", "l1_outputs", "l2_outputs"):
        if name in arch and arch[name] < 1:
            raise NetFormatError(f"{path}: field 'architecture.{name}' is {arch[name]}, expected ≥ 1")
    for k in ("feature_set", "feature_hash", "output_buckets"):
        top = _field(path, meta, k, str)
        if top != arch[k]:
            raise NetFormatError(f"{path}: field {k!r} is {top!r} but architecture.{k} is "
                                 f"{arch[k]!r}: the header contradicts itself")
    try:
        buckets = parse_output_buckets(arch["output_buckets"])
    except (KeyError, ValueError) as e:
        raise NetFormatError(f"{path}: field 'architecture.output_buckets': {e}") from None
    try:
        fs = get_feature_set(arch["feature_set"])
    except (KeyError, ValueError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        raise NetFormatError(f"{path}: field 'architecture.feature_set': {msg}") from None
    if fs.hash != arch["feature_hash"]:
        raise NetFormatError(f"{path}: field 'feature_hash' is {arch['feature_hash']}, but this build's "
                             f"{fs.name} hashes to {fs.hash}: the indexing differs")
    derived = {"num_inputs": fs.num_inputs, "num_buckets": buckets.count}
    if "hidden" in arch and "activation" in arch and "l1_inputs" in cls.ARCH_FIELDS:
        derived["l1_inputs"] = acts.l1_inputs(arch["activation"], arch["hidden"])
    for k, want in derived.items():
        if arch.get(k) != want:
            raise NetFormatError(f"{path}: field 'architecture.{k}' is {arch.get(k)!r}, but "
                                 f"{arch['feature_set']} / {arch['output_buckets']} / {arch.get('activation')} "
                                 f"give {want}")
    quant = _field(path, meta, "quantisation", dict)
    for name, v in quant.items():
        types = QuantScheme.FIELD_TYPES.get(name)
        if types is None:
            raise NetFormatError(f"{path}: field 'quantisation.{name}' is not a field of the scheme this build "
                                 f"reads ({', '.join(QuantScheme.FIELD_TYPES)})")
        _field(path, quant, name, types, "quantisation.")
    scheme = QuantScheme(**quant)
    for name in ("qa", "qb", "scale"):
        if getattr(scheme, name) < 1:
            raise NetFormatError(f"{path}: field 'quantisation.{name}' is {getattr(scheme, name)}, expected ≥ 1")
    if meta.get("provenance") is not None:
        _field(path, meta, "provenance", dict)
    return arch, scheme, cls


def _lookup(meta: dict, key: str):
    """An ``expect`` key's value in the header: a top-level field, a dotted path
    ("architecture.hidden", "quantisation.qa"), or a field of the architecture or the
    quantisation ("hidden", "qa"). (found, value)."""
    if "." in key:
        obj = meta
        for part in key.split("."):
            if not isinstance(obj, dict) or part not in obj:
                return False, None
            obj = obj[part]
        return True, obj
    for obj in (meta, meta.get("architecture") or {}, meta.get("quantisation") or {}):
        if key in obj:
            return True, obj[key]
    return False, None


def load(path: str | Path, expect: dict | None = None) -> NetFile:
    """Load ``net.safetensors``: the integer net class of its kind (:mod:`nnue.spec.kinds`:
    :class:`IntegerNet` for perspective nets, :class:`~nnue.inference.deep.DeepIntegerNet` for
    ``architecture.kind == "deep"``).

    Every header field is checked (:func:`check_header`). ``expect``: fields that must match,
    top-level, architecture or quantisation fields by name (``{"feature_set": "chess768"}``,
    ``{"hidden": 32}``) or by dotted path (``{"architecture.hidden": 32}``). Raises
    NetFormatError naming the file and the mismatching field with the value the file holds, or
    the tensor whose dtype/shape is wrong.
    """
    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            raw_meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # safetensors raises its own error types
        hint = (" (net.bin is the raw engine layout; nnue eval reads net.safetensors)" if path.suffix == ".bin"
                else " (a folder: give NETDIR/net.safetensors)" if path.is_dir() else "")
        raise NetFormatError(f"{path}: not a safetensors net{hint}: {e}") from None
    if META_KEY not in raw_meta:
        raise NetFormatError(f"{path}: field 'format' missing: not an integer net written by "
                             f"nnue export (no {META_KEY!r} metadata)")
    try:
        meta = json.loads(raw_meta[META_KEY])
    except ValueError as e:
        raise NetFormatError(f"{path}: metadata {META_KEY!r} is not valid JSON (at character "
                             f"{getattr(e, 'pos', '?')})") from None
    arch, scheme, cls = check_header(path, meta)
    for k, v in (expect or {}).items():
        found, have = _lookup(meta, k)
        if not found:
            raise NetFormatError(f"{path}: field {k!r} is not in the header, expected {v!r}")
        if str(have) != str(v):
            raise NetFormatError(f"{path}: field {k!r} is {have!r}, expected {v!r}")
    specs = cls.tensor_specs(arch)
    for k, (dtype, shape) in specs.items():
        t = tensors.get(k)
        if t is None or tuple(t.shape) != shape or t.dtype != dtype:
            raise NetFormatError(f"{path}: tensor {k!r} should be {str(dtype).removeprefix('torch.')} {shape}, "
                                 f"found {None if t is None else (t.dtype, tuple(t.shape))}")
    return cls(arch, scheme, *(tensors[k] for k in specs), provenance=meta.get("provenance") or {})


# The evaluation entry points under the names this module had before the split (imported on
# first use: nnue.inference.api, .exact and .perspective import nothing from here at load time).
_COMPAT = {
    "forward_int": "perspective", "evaluate": "api", "boards_from_fens": "api", "evaluate_fens": "api",
    "evaluate_boards": "api", "evaluate_dataset": "api", "accumulators": "exact", "accumulators_f32": "exact",
    "check_int32": "exact",
}


def __getattr__(name: str):
    mod = _COMPAT.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__package__}.{mod}"), name)
