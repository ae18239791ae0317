"""Helpers shared by the kernel tests: skip marks, per-dtype tolerances, random cases with edge rows."""
from __future__ import annotations

import pytest
import torch

from nnue.kernels import activations

INTERPRETED = activations.INTERPRETED
HAS_CUDA = torch.cuda.is_available()

# Triton on CPU tensors: only under the interpreter (scripts/test.sh exports TRITON_INTERPRET=1).
needs_interpreter = pytest.mark.skipif(
    not INTERPRETED, reason="Triton on CPU needs TRITON_INTERPRET=1 set before import (scripts/test.sh sets it)")
# GPU checks: a CUDA device, compiled kernels (the interpreter would take hours at these sizes).
needs_cuda = pytest.mark.skipif(
    not HAS_CUDA or INTERPRETED, reason="needs a CUDA device and TRITON_INTERPRET unset")

# (dtype, atol, rtol) of the Triton result against the fp32 reference evaluated on the same
# (dtype-rounded) inputs. fp32: only summation order differs. bf16: the kernel accumulates in
# fp32 and rounds once on store, so the error is about one bf16 half-ulp (2^-9 relative) plus
# the rounding of values near zero.
DTYPE_TOLS = [
    pytest.param(torch.float32, 1e-5, 1e-5, id="fp32"),
    pytest.param(torch.bfloat16, 1e-2, 1.6e-2, id="bf16"),
]


def make_indices(B: int, A: int, F: int, gen: torch.Generator, pad: float = 0.3,
                 dtype=torch.int32) -> tuple[torch.Tensor, torch.Tensor]:
    """(stm, nstm), each (B, A), −1-padded, with the edge cases of issue 5 in them: a row that is all
    padding, a feature repeated inside a row, a feature repeated across rows and perspectives, and
    the last feature F − 1."""
    stm = torch.randint(0, F, (B, A), generator=gen, dtype=dtype)
    nstm = torch.randint(0, F, (B, A), generator=gen, dtype=dtype)
    stm[torch.rand(B, A, generator=gen) < pad] = -1
    nstm[torch.rand(B, A, generator=gen) < pad] = -1
    nstm[0] = -1                                  # all padding (with B = 1: one perspective of the only row)
    stm[-1, : min(3, A)] = F - 1                  # the last feature, three times in one row
    stm[0, -1] = F - 1                            # ... and again in another row (or the same one when B = 1)
    if B > 2:
        stm[1] = -1                               # a whole stm row of padding too
        nstm[2, : min(2, A)] = F - 1              # the same feature in the other perspective
    return stm, nstm


def make_weights(F: int, H: int, dtype, gen: torch.Generator, scale: float = 0.25):
    """weight (F, H) and bias (H,) in ``dtype`` with requires_grad. scale 0.25 keeps a 32-feature
    sum around ±1, so crelu/screlu/pairwise land on both sides of both kinks."""
    w = (torch.randn(F, H, generator=gen) * scale).to(dtype).requires_grad_(True)
    b = (torch.randn(H, generator=gen) * scale + 0.3).to(dtype).requires_grad_(True)
    return w, b


def fp32_leaf(t: torch.Tensor) -> torch.Tensor:
    """An fp32 copy of ``t`` (same rounded values) that is a fresh autograd leaf."""
    return t.detach().float().requires_grad_(t.requires_grad)
