"""Pure-torch reference ops: the CPU training path, the test oracle and the benchmark baseline.

* :func:`sparse_ft`: the feature transformer, ``acc = bias + Σ weight[idx]`` over the valid
  indices of each row (−1 = padding), via ``embedding_bag`` (sum mode, padding masked by
  per-sample weights, so the backward is a scatter-add into ``weight`` with no dense one-hot).
* :func:`activate`: the activations of the glossary (DESIGN.md).
* :func:`sparse_ft_pair`: both perspectives through :func:`sparse_ft` and :func:`activate`,
  concatenated stm first: the spec of the fused Triton op (:mod:`nnue.kernels.sparse_ft`).
* :func:`swiglu`: swish(a)·b, the spec of :func:`nnue.kernels.activations.swiglu`.

The tests (``tests/kernels``) and benchmarks (``bench/bench_*.py``) import these as the oracle
and the baseline, so neither can drift from the CPU training path.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from nnue.spec import activations as spec

#: the elementwise and L0 activations (the gated units take two inputs: :func:`swiglu`)
ACTIVATIONS = tuple(n for n, a in spec.ACTIVATIONS.items() if not a.gated)


def sparse_ft(weight: torch.Tensor, bias: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """Feature-transformer accumulator for one perspective.

    weight: (F, H) float; bias: (H,) float; indices: (B, A) int32/int64, −1 = padding.
    Returns (B, H) in weight's dtype. Raises ValueError on shape mismatch.
    """
    if indices.dim() != 2 or weight.dim() != 2 or bias.shape != (weight.shape[1],):
        raise ValueError(f"sparse_ft: weight {tuple(weight.shape)}, bias {tuple(bias.shape)}, "
                         f"indices {tuple(indices.shape)}")
    valid = indices >= 0
    acc = F.embedding_bag(indices.clamp(min=0).long(), weight, mode="sum",
                          per_sample_weights=valid.to(weight.dtype))
    return acc + bias


def activate(name: str, x: torch.Tensor) -> torch.Tensor:
    """Apply activation ``name`` to (B, H) accumulators.

    crelu: clamp(x, 0, 1). screlu: crelu(x)². pairwise_crelu: crelu(x[:, :H/2]) · crelu(x[:, H/2:])
    -> (B, H/2). relu. hardswish: x·clamp(x/6 + 1/2, 0, 1). swish: x·σ(x). none: identity.
    The functions are the float references of :mod:`nnue.spec.activations`.
    """
    a = spec.ACTIVATIONS.get(name)  # the registry as it stands (a test may have added one)
    if a is not None and not a.gated:
        return a.float_ref(x)
    known = [n for n, a in spec.ACTIVATIONS.items() if not a.gated]
    raise ValueError(f"unknown activation {name!r}; known: {', '.join(known)}")


def sparse_ft_pair(weight: torch.Tensor, bias: torch.Tensor, stm: torch.Tensor, nstm: torch.Tensor,
                   activation: str) -> torch.Tensor:
    """Both perspectives: ``cat([activate(sparse_ft(stm)), activate(sparse_ft(nstm))], 1)``.

    weight (F, H), bias (H,), stm/nstm (B, A) −1-padded -> (B, 2·H), or (B, H) for pairwise_crelu.
    """
    return torch.cat([activate(activation, sparse_ft(weight, bias, idx)) for idx in (stm, nstm)], dim=1)


def swiglu(a: torch.Tensor, b: torch.Tensor, gate: str = "swish") -> torch.Tensor:
    """Gated linear unit: gate(a)·b; gate "swish" (SwiGLU, a·σ(a)·b: Shazeer 2020, "GLU Variants
    Improve Transformer") or "hardswish" (a·clamp(a/6 + 1/2, 0, 1)·b, Viridithas's L2)."""
    gates = list(dict.fromkeys(x.gate for x in spec.ACTIVATIONS.values() if x.gated))  # the registry's gates
    if gate not in gates:
        raise ValueError(f"swiglu gate {gate!r}: {' or '.join(gates)}")
    return spec.ACTIVATIONS[gate].float_ref(a) * b
