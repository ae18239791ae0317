"""Loading ``net.safetensors``: the header checks of every kind and the integer net of its kind.

:func:`load` reads the file, :func:`check_header` checks every decoded header field (presence,
JSON type, the values this build reads) and picks the integer class of the net's kind through
the registry :mod:`nnue.inference.kinds`. Raises :class:`~nnue.inference.net.NetFormatError`.
"""
from __future__ import annotations

import json
from pathlib import Path

from safetensors import safe_open

from nnue.pipeline.features import get_feature_set, parse_output_buckets
from nnue.spec import activations as acts
from nnue.spec.quant import QuantScheme

from . import kinds, residual
from .net import (META_KEY, FORMAT, FORMAT_VERSION, NetFile, NetFormatError, header_field, json_is, json_type_name,
                  quant_problem)


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
    if not json_is(meta.get("format_version"), int) or meta["format_version"] != FORMAT_VERSION:
        raise NetFormatError(f"{path}: field 'format_version' is {meta.get('format_version')!r}, "
                             f"this build reads {FORMAT_VERSION}")
    arch = header_field(path, meta, "architecture", dict)
    kind = header_field(path, arch, "kind", str, "architecture.", optional=True) or kinds.DEFAULT
    if kind not in kinds.KINDS:
        raise NetFormatError(f"{path}: field 'architecture.kind' is {kind!r}, expected one of "
                             f"{', '.join(repr(k) for k in kinds.KINDS)}")
    cls = kinds.get(kind).integer
    optional = getattr(cls, "ARCH_OPTIONAL", {})
    for name, types in cls.ARCH_FIELDS.items():
        header_field(path, arch, name, types, "architecture.", optional=name == "kind" or name in optional)
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
        why = residual.check("architecture.residual", arch["residual"])
        if why:
            raise NetFormatError(f"{path}: {why}")
    for name in ("hidden", "num_inputs", "num_buckets", "l1_inputs", "l1_outputs", "l2_outputs"):
        if name in arch and arch[name] < 1:
            raise NetFormatError(f"{path}: field 'architecture.{name}' is {arch[name]}, expected ≥ 1")
    for k in ("feature_set", "feature_hash", "output_buckets"):
        top = header_field(path, meta, k, str)
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
    quant = header_field(path, meta, "quantisation", dict)
    bad = quant_problem(quant)
    if bad:
        raise NetFormatError(f"{path}: field 'quantisation.{bad[0]}' {bad[1]}")
    scheme = QuantScheme(**quant)
    for name in ("qa", "qb", "scale"):
        if getattr(scheme, name) < 1:
            raise NetFormatError(f"{path}: field 'quantisation.{name}' is {getattr(scheme, name)}, expected ≥ 1")
    if meta.get("provenance") is not None:
        header_field(path, meta, "provenance", dict)
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
    """Load ``net.safetensors``: the integer net class of its kind (``architecture.kind``, looked
    up in :mod:`nnue.inference.kinds`).

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


def load_any(path: str | Path) -> NetFile:
    """An integer net from ``net.safetensors``, the NETDIR holding it, or an engine's own net file
    that a kind reads (a Stockfish ``.nnue``: :func:`nnue.inference.kinds.read_engine_file`).
    Raises NetFormatError / ValueError naming the path."""
    p = Path(path)
    if p.is_dir():
        if not (p / "net.safetensors").is_file():
            raise ValueError(f"{p}: a folder without net.safetensors; give NETDIR/net.safetensors")
        p = p / "net.safetensors"
    elif not p.exists():
        raise ValueError(f"{p}: no such net file")
    if p.suffix in kinds.engine_suffixes():
        return kinds.read_engine_file(p)
    return load(p)
