"""The net-kind registry: one entry per kind of net, naming every piece that handles it.

Each piece is a dotted ``module:attribute`` path resolved on first use (:meth:`NetKind.load`),
so that inference can look up its own pieces without importing the trainer's (the import rule
of DESIGN.md: inference never imports trainer or kernels). Pieces:

* ``float_model`` / ``float_arch``: the trainer's ``nn.Module`` and its arch dataclass;
* ``quantise`` / ``audit``: float state -> integer tensors, and their range audit (export);
* ``integer``: the integer net class (file layout, tensor specs, header);
* ``evaluator``: the module with ``forward_int(net, stm, nstm, bucket, return_parts)`` and
  ``evaluate(net, boards, chunk)`` (exact integer evaluation);
* ``arch_builder``: builds the header's ``architecture`` object from the float arch;
* ``c_args``: the C reference's arguments for an ``architecture`` object (test side);
* ``calibrate``: export's bias calibration on real positions (perspective nets: L1's bias
  absorbs the mean rounding error of L1's weights; deep and tiny nets: the output bias absorbs
  the mean integer-vs-float offset), ``calibrate(model, q, net, scheme, stm, nstm, bucket)`` ->
  (tensors to replace, calibration report);
* ``layers_key``: the ``model.`` config group (and checkpoint hparam) holding the sizes and
  activations of the layers after L0 (``deep``, ``tiny``; None: none).

A net of any kind may also be *residual* (eval = base + α·net): that is a header field
(:mod:`nnue.inference.residual`), not a kind. The C reference adds ``--residual BASE NUM
SHIFT`` for it (:func:`c_args`).

Adding a kind is one entry here plus its pieces: the tiny net (issue 11 part 3) took the entry,
its float model and arch (trainer/model.py), quantise/audit (trainer/export.py), its integer
class and evaluator (nnue/inference/tiny.py), the C reference's ``--tiny`` and its tests.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass


def _resolve(path: str):
    mod, _, attr = path.partition(":")
    m = importlib.import_module(mod)
    return getattr(m, attr) if attr else m


def _c_args_perspective(a: dict) -> list[str]:
    return ["--features", a["feature_set"], "--buckets", a["output_buckets"], "--perspective", str(a["hidden"]),
            a["activation"]]


def _c_args_deep(a: dict) -> list[str]:
    h1 = a["hidden_activation"]
    return ["--features", a["feature_set"], "--buckets", a["output_buckets"], "--deep", str(a["hidden"]),
            a["activation"], str(a["l1_outputs"]), str(a["l2_outputs"]), h1, a.get("l2_activation") or h1]


def _c_args_tiny(a: dict) -> list[str]:
    return ["--features", a["feature_set"], "--buckets", a["output_buckets"], "--tiny", str(a["hidden"]),
            a["activation"], str(a["l1_outputs"]), a["hidden_activation"]]


@dataclass(frozen=True)
class NetKind:
    name: str
    float_model: str
    float_arch: str
    quantise: str
    audit: str
    integer: str
    evaluator: str
    arch_builder: str
    c_args: object  # callable(arch dict) -> list[str]
    calibrate: str = "nnue.trainer.export:calibrate_output_bias"
    layers_key: str | None = None

    def load(self, piece: str):
        """The object a piece names (module or attribute), imported on first use."""
        return _resolve(getattr(self, piece))


KINDS: dict[str, NetKind] = {
    "perspective": NetKind(
        "perspective", "nnue.trainer.model:PerspectiveNet", "nnue.trainer.model:Arch",
        "nnue.trainer.export:quantise_perspective", "nnue.trainer.export:audit_perspective",
        "nnue.inference.net:IntegerNet", "nnue.inference.perspective", "nnue.inference.net:make_arch",
        _c_args_perspective, "nnue.trainer.export:calibrate_l1_bias", None),
    "deep": NetKind(
        "deep", "nnue.trainer.model:DeepNet", "nnue.trainer.model:DeepArch",
        "nnue.trainer.export:quantise_deep", "nnue.trainer.export:audit_deep",
        "nnue.inference.deep:DeepIntegerNet", "nnue.inference.deep", "nnue.inference.deep:make_deep_arch",
        _c_args_deep, "nnue.trainer.export:calibrate_output_bias", "deep"),
    "tiny": NetKind(
        "tiny", "nnue.trainer.model:TinyNet", "nnue.trainer.model:TinyArch",
        "nnue.trainer.export:quantise_tiny", "nnue.trainer.export:audit_tiny",
        "nnue.inference.tiny:TinyIntegerNet", "nnue.inference.tiny", "nnue.inference.tiny:make_tiny_arch",
        _c_args_tiny, "nnue.trainer.export:calibrate_output_bias", "tiny"),
}


def get(kind) -> NetKind:
    """The entry of ``kind``. Raises ValueError naming the known kinds."""
    try:
        return KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"net kind {kind!r}: one of {', '.join(KINDS)}") from None


def layers_config(kind: str, cfg) -> dict:
    """The layer settings of a ``kind`` net from a model config or checkpoint hparams ``cfg``
    (a mapping): its ``layers_key`` group, {} when the kind has none or it is unset."""
    key = get(kind).layers_key
    return dict((cfg.get(key) if key else None) or {})


def c_args(arch: dict) -> list[str]:
    """The C reference's arguments (after NET.bin) for a net's ``architecture`` object (and
    ``--residual BASE ALPHA_NUM ALPHA_SHIFT`` for a residual net)."""
    out = get(arch.get("kind", "perspective")).c_args(arch)
    r = arch.get("residual")
    if r is not None:
        out += ["--residual", r["base"], str(r["alpha_num"]), str(r["alpha_shift"])]
    return out
