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
* ``c_args``: the C reference's arguments for an ``architecture`` object (test side).

Adding a kind (e.g. the residual tiny net) is one entry here plus its pieces.
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

    def load(self, piece: str):
        """The object a piece names (module or attribute), imported on first use."""
        return _resolve(getattr(self, piece))


KINDS: dict[str, NetKind] = {
    "perspective": NetKind(
        "perspective", "nnue.trainer.model:PerspectiveNet", "nnue.trainer.model:Arch",
        "nnue.trainer.export:quantise_perspective", "nnue.trainer.export:audit_perspective",
        "nnue.inference.net:IntegerNet", "nnue.inference.perspective", "nnue.inference.net:make_arch",
        _c_args_perspective),
    "deep": NetKind(
        "deep", "nnue.trainer.model:DeepNet", "nnue.trainer.model:DeepArch",
        "nnue.trainer.export:quantise_deep", "nnue.trainer.export:audit_deep",
        "nnue.inference.deep:DeepIntegerNet", "nnue.inference.deep", "nnue.inference.deep:make_deep_arch",
        _c_args_deep),
}


def get(kind) -> NetKind:
    """The entry of ``kind``. Raises ValueError naming the known kinds."""
    try:
        return KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"net kind {kind!r}: one of {', '.join(KINDS)}") from None


def c_args(arch: dict) -> list[str]:
    """The C reference's arguments (after NET.bin) for a net's ``architecture`` object."""
    return get(arch.get("kind", "perspective")).c_args(arch)
