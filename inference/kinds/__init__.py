"""The net-kind registry of inference: one module per kind, each exporting ``KIND`` (an
:class:`~.spec.InferenceKind`), collected in :data:`KINDS` by plain imports.

Adding a kind: a module here (its integer net class, evaluator, arch builder), its line below,
the trainer's module under :mod:`nnue.trainer.kinds`, and its tests (docs/extending.md).
"""
from __future__ import annotations

from nnue.spec.registry import registered

from . import deep, perspective, sfnnv5, sfnnv16, tiny
from .spec import InferenceKind

KINDS: dict[str, InferenceKind] = {k.name: k for k in (perspective.KIND, deep.KIND, tiny.KIND, sfnnv5.KIND, sfnnv16.KIND)}



def register(kind: InferenceKind):
    """Add ``kind`` to :data:`KINDS` for the duration of a ``with`` block (tests: the toy
    extensions). Raises ValueError if its name is taken."""
    return registered(KINDS, kind, "net kind")


def get(kind) -> InferenceKind:
    """The entry of ``kind``. Raises ValueError naming the known kinds."""
    try:
        return KINDS[kind]
    except (KeyError, TypeError):
        raise ValueError(f"net kind {kind!r}: one of {', '.join(KINDS)}") from None


def of(net) -> InferenceKind:
    """The entry of a loaded integer net's kind."""
    return get(net.kind)


def c_args(arch: dict) -> list[str]:
    """The C reference's arguments (after the net file) for a net's ``architecture`` object (and
    ``--residual BASE ALPHA_NUM ALPHA_SHIFT`` for a residual net). Raises ValueError for a kind
    the C reference does not evaluate."""
    entry = get(arch.get("kind", "perspective"))
    if entry.c_args is None:
        raise ValueError(f"the C reference has no net kind {entry.name!r}")
    out = entry.c_args(arch)
    r = arch.get("residual")
    if r is not None:
        out += ["--residual", r["base"], str(r["alpha_num"]), str(r["alpha_shift"])]
    return out
