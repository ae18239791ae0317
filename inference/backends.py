"""Which integer path evaluates a net: its kind's compiled (numba) kernels or its torch steps.

Every kind with compiled kernels keeps them in its own ``compiled`` module (numba imported there
only), loaded on first use through :func:`kernels`; without numba, or where a kind's kernels
decline a net, the kind's torch steps give the same integers. Standalone: no numba import here.
"""
from __future__ import annotations

from typing import Callable

#: ``backend`` values of the kinds' ``forward_int`` and ``evaluate``: "auto" (the compiled kernels
#: where they apply, else torch), "compiled" (those kernels or RuntimeError), "torch" (the torch steps)
BACKENDS = ("auto", "compiled", "torch")
#: the backend used when a call gives none (tests set it to run every path through the API)
DEFAULT_BACKEND = "auto"

_LOADED: dict = {}  # loader -> the imported module, or None when numba is missing


def kernels(backend: str | None, cpu: bool, load: Callable[[], object]):
    """The compiled module ``load()`` imports (a kind's ``compiled`` module, imported on first use
    and kept) when ``backend`` asks for it and it can run here (CPU tensors, numba importable),
    else None. Raises ValueError for an unknown backend and RuntimeError for "compiled" when the
    module cannot run."""
    backend = backend or DEFAULT_BACKEND
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r}: one of {', '.join(BACKENDS)}")
    if backend == "torch":
        return None
    mod = None
    if cpu:
        mod = _LOADED.get(load, False)
        if mod is False:
            try:
                mod = load()
            except ImportError:  # numba missing: the torch path
                mod = None
            _LOADED[load] = mod
    if mod is None and backend == "compiled":
        raise RuntimeError("the compiled integer path needs numba and CPU tensors")
    return mod


def not_applicable(backend: str | None) -> None:
    """Raise RuntimeError when ``backend`` is "compiled" and the kernels declined the net (else
    the caller takes its torch path)."""
    if (backend or DEFAULT_BACKEND) == "compiled":
        raise RuntimeError("the compiled integer path does not apply to this net (its kind's compiled "
                           "module: applicable / table_of)")
