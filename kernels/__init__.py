"""Feature-transformer and activation ops with backend dispatch.

``backend`` (config key ``model.backend``):

* ``"auto"`` — the fused Triton kernels (:mod:`nnue.kernels.sparse_ft`,
  :mod:`nnue.kernels.activations`) on CUDA tensors, the torch reference on CPU (and on CUDA if
  Triton cannot be imported);
* ``"triton"`` — always Triton: CUDA tensors, or CPU tensors under the Triton interpreter
  (``TRITON_INTERPRET=1`` before the kernels are imported, as ``scripts/test.sh`` does); anything
  else raises RuntimeError naming the fix;
* ``"torch"`` — always the reference in :mod:`nnue.kernels.reference`;
* ``"numba"`` — the feature transformer compiled for CPU training
  (:mod:`nnue.kernels.sparse_ft_numba`: fused activation, row-sparse gradient, factoriser and QAT
  without a dense pass); CPU tensors only (ValueError on another device); the other ops run the
  reference.

The reference is the CPU training path and the oracle every other backend is tested against.
Parameters are plain tensors whatever the backend, so a net's state dict is the same whichever
backend trained it (``tests/kernels/test_sparse_ft.py`` checks the round trip). The Triton modules
are imported on first use, so CPU-only users never pay for them.
"""
from __future__ import annotations

import functools

import torch

from nnue.spec import activations as spec

from . import reference
from .reference import ACTIVATIONS  # noqa: F401

BACKENDS = ("auto", "triton", "torch", "numba")


@functools.lru_cache(maxsize=None)
def triton_available() -> bool:
    """Whether ``import triton`` works here (it is a dependency, but not every platform has wheels)."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def resolve_backend(backend: str, device: torch.device) -> str:
    """The backend that runs for ``backend`` on tensors on ``device``: "triton", "torch" or
    "numba". Raises ValueError on an unknown backend, or "numba" off the CPU."""
    if backend not in BACKENDS:
        raise ValueError(f"backend {backend!r} not one of {BACKENDS}")
    if backend == "numba" and device.type != "cpu":
        raise ValueError(f"backend 'numba' runs on CPU tensors, not {device.type}; use auto or triton there")
    if backend == "auto":
        return "triton" if device.type == "cuda" and triton_available() else "torch"
    return backend


def sparse_ft_pair(weight: torch.Tensor, bias: torch.Tensor, stm: torch.Tensor, nstm: torch.Tensor,
                   activation: str, backend: str = "auto") -> torch.Tensor:
    """Both perspectives through the feature transformer and the activation, concatenated.

    weight (F, H), bias (H,), stm/nstm (B, A) int32 −1-padded -> (B, 2·H') with H' = H, or
    H/2 for pairwise_crelu; the stm half comes first. Raises ValueError on an unknown backend or
    activation; the Triton path's other errors: :func:`nnue.kernels.sparse_ft.check_inputs`.
    """
    which = resolve_backend(backend, weight.device)
    if which == "torch":
        return reference.sparse_ft_pair(weight, bias, stm, nstm, activation)
    if which == "numba":
        from . import sparse_ft_numba
        return sparse_ft_numba.sparse_ft_pair(weight, bias, stm, nstm, activation)
    from . import sparse_ft
    # Index lists from a feature encoder may be views; the copy (B·A int32) is noise next to the
    # gather, and the kernel itself insists on contiguous inputs.
    return sparse_ft.sparse_ft_pair(weight, bias, stm.contiguous(), nstm.contiguous(), activation)


def activate(name: str, x: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """Elementwise activation ``name`` (crelu, screlu, relu, hardswish, swish, none) of ``x``.
    pairwise_crelu runs on the reference only (on Triton it is fused into sparse_ft_pair)."""
    pairs = name in spec.ACTIVATIONS and spec.ACTIVATIONS[name].triton_pairs  # fused in sparse_ft_pair only
    if resolve_backend(backend, x.device) in ("torch", "numba") or (backend == "auto" and pairs):
        return reference.activate(name, x)
    from . import activations
    return activations.activate(name, x)


def swiglu(a: torch.Tensor, b: torch.Tensor, backend: str = "auto", gate: str = "swish") -> torch.Tensor:
    """gate(a)·b elementwise, gate "swish" or "hardswish"."""
    if resolve_backend(backend, a.device) in ("torch", "numba"):
        return reference.swiglu(a, b, gate)
    from . import activations
    return activations.swiglu(a, b, gate)
