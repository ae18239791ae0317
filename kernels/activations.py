"""Fused elementwise activations in Triton: forward and backward, one kernel each.

Ops (definitions: DESIGN.md glossary; torch specs in :mod:`nnue.kernels.reference`):

* :func:`activate` — ``crelu`` clamp(x, 0, 1); ``screlu`` crelu(x)²; ``relu``; ``hardswish``
  x·clamp(x/6 + 1/2, 0, 1); ``swish`` x·σ(x); ``none``.
* :func:`swiglu` — gate(a)·b, gate swish (Shazeer 2020, "GLU Variants Improve Transformer") or
  hardswish.

Every op computes in fp32 whatever the storage dtype (fp32, bf16, fp16) and stores in the input's
dtype. The backward recomputes the activation's derivative from the saved input, so one kernel
reads ``x`` and ``grad_y`` and writes ``grad_x``: 3 tensors of traffic, against torch's chain of
elementwise kernels and their temporaries.

The device functions :func:`act_fwd` and :func:`act_grad` are shared with the fused feature
transformer (:mod:`nnue.kernels.sparse_ft`), so both ops use one definition of each activation.
Derivatives follow torch's autograd at the kinks (clamp: inclusive bounds, relu: strict), so the
Triton and reference paths agree exactly where an input lands on a kink.
"""
from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from nnue.spec import activations as spec

# Activation codes, a constexpr argument of every kernel (the compiler removes the other
# branches): looked up in the spec (nnue.spec.activations). The gated units take two inputs and
# run in the swiglu kernels below, their gate's code as GATE.
ACT_CODES = {n: a.code for n, a in spec.ACTIVATIONS.items() if not a.gated}
# Elementwise ops of this module; pairwise_crelu mixes two halves of a row and lives fused in sparse_ft.
ELEMENTWISE = tuple(n for n in ACT_CODES if n != "pairwise_crelu")
GATES = ("swish", "hardswish")
DTYPES = (torch.float32, torch.bfloat16, torch.float16)

# Whether the kernels below were built for the Triton interpreter (TRITON_INTERPRET=1 when this
# module was imported): the only way to run them on CPU tensors.
try:
    from triton import knobs
    INTERPRETED = bool(knobs.runtime.interpret)
except ImportError:  # triton < 3.4 reads the variable directly
    INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")

# 1024 elements per program, 4 warps: the Triton tutorials' elementwise default (not swept here:
# no GPU in the session that wrote this; bench/bench_activations.py measures it).
BLOCK = 1024


@triton.jit
def act_fwd(x, ACT: tl.constexpr):
    """Activation ``ACT`` (an ACT_CODES value, not pairwise) of fp32 ``x``."""
    if ACT == 0:    # crelu
        y = tl.minimum(tl.maximum(x, 0.0), 1.0)
    elif ACT == 1:  # screlu
        c = tl.minimum(tl.maximum(x, 0.0), 1.0)
        y = c * c
    elif ACT == 3:  # relu
        y = tl.maximum(x, 0.0)
    elif ACT == 4:  # hardswish
        y = x * tl.minimum(tl.maximum(x / 6.0 + 0.5, 0.0), 1.0)
    elif ACT == 5:  # swish
        y = x * tl.sigmoid(x)
    else:           # none
        y = x
    return y


@triton.jit
def act_grad(x, ACT: tl.constexpr):
    """d act(x) / dx of fp32 ``x``, with torch's conventions at the kinks."""
    if ACT == 0:    # crelu: clamp passes the gradient on 0 <= x <= 1
        d = tl.where((x >= 0.0) & (x <= 1.0), 1.0, 0.0)
    elif ACT == 1:  # screlu: 2·clamp(x, 0, 1) on 0 <= x <= 1
        d = tl.where((x >= 0.0) & (x <= 1.0), 2.0 * x, 0.0)
    elif ACT == 3:  # relu: strict, as torch's threshold_backward
        d = tl.where(x > 0.0, 1.0, 0.0)
    elif ACT == 4:  # hardswish: s + x·s' with s = clamp(x/6 + 1/2, 0, 1)
        t = x / 6.0 + 0.5
        s = tl.minimum(tl.maximum(t, 0.0), 1.0)
        d = s + tl.where((t >= 0.0) & (t <= 1.0), x / 6.0, 0.0)
    elif ACT == 5:  # swish: σ + x·σ·(1 − σ)
        sg = tl.sigmoid(x)
        d = sg + x * sg * (1.0 - sg)
    else:           # none
        d = tl.full(x.shape, 1.0, tl.float32)
    return d


@triton.jit
def _act_fwd_kernel(
    x_ptr,   # (N,) input, contiguous, fp32/bf16/fp16
    y_ptr,   # (N,) output, x's dtype
    N,       # element count
    ACT: tl.constexpr, BLOCK: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, act_fwd(x, ACT).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _act_bwd_kernel(
    x_ptr,   # (N,) the forward's input, contiguous
    gy_ptr,  # (N,) gradient of the output, contiguous
    gx_ptr,  # (N,) gradient of the input (written), x's dtype
    N,
    ACT: tl.constexpr, BLOCK: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    gy = tl.load(gy_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(gx_ptr + offs, (gy * act_grad(x, ACT)).to(gx_ptr.dtype.element_ty), mask=m)


@triton.jit
def _swiglu_fwd_kernel(
    a_ptr,   # (N,) gate input, contiguous
    b_ptr,   # (N,) linear input, contiguous, a's dtype
    y_ptr,   # (N,) gate(a)·b (written)
    N,
    GATE: tl.constexpr, BLOCK: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    a = tl.load(a_ptr + offs, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (act_fwd(a, GATE) * b).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _swiglu_bwd_kernel(
    a_ptr, b_ptr,  # (N,) the forward's inputs
    gy_ptr,        # (N,) gradient of the output
    ga_ptr,        # (N,) gradient of a (written): gy·b·gate'(a)
    gb_ptr,        # (N,) gradient of b (written): gy·gate(a)
    N,
    GATE: tl.constexpr, BLOCK: tl.constexpr,
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    a = tl.load(a_ptr + offs, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
    gy = tl.load(gy_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(ga_ptr + offs, (gy * b * act_grad(a, GATE)).to(ga_ptr.dtype.element_ty), mask=m)
    tl.store(gb_ptr + offs, (gy * act_fwd(a, GATE)).to(gb_ptr.dtype.element_ty), mask=m)


def check_device(t: torch.Tensor, op: str) -> None:
    """Raise RuntimeError unless Triton can run on ``t``'s device: CUDA, or CPU under the interpreter."""
    if t.device.type == "cuda":
        return
    if t.device.type == "cpu":
        if INTERPRETED:
            return
        raise RuntimeError(
            f"{op}: the Triton backend on CPU tensors needs the Triton interpreter: set TRITON_INTERPRET=1 "
            "before nnue.kernels' Triton modules are imported (scripts/test.sh does), or use "
            "backend='auto'/'torch' for CPU training")
    raise RuntimeError(f"{op}: the Triton backend runs on CUDA tensors (or CPU under TRITON_INTERPRET=1), "
                       f"not {t.device.type}")


def _check_elementwise(op: str, *ts: torch.Tensor) -> None:
    x = ts[0]
    for t in ts:
        if t.dtype not in DTYPES:
            raise TypeError(f"{op}: dtype {t.dtype} not supported; use one of {DTYPES}")
        if t.dtype != x.dtype or t.shape != x.shape or t.device != x.device:
            raise ValueError(f"{op}: inputs must share dtype, shape and device; got "
                             + ", ".join(f"{t.dtype} {tuple(t.shape)} {t.device}" for t in ts))
        if not t.is_contiguous():
            raise ValueError(f"{op}: input of shape {tuple(t.shape)} is not contiguous; call .contiguous()")
    check_device(x, op)


def _grid(n: int):
    return (triton.cdiv(n, BLOCK),)


class Activation(torch.autograd.Function):
    """y = act(x) elementwise; backward recomputes act'(x) from the saved x (one kernel each way)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, name: str) -> torch.Tensor:
        y = torch.empty_like(x)
        if x.numel():
            _act_fwd_kernel[_grid(x.numel())](x, y, x.numel(), ACT=ACT_CODES[name], BLOCK=BLOCK)
        ctx.save_for_backward(x)
        ctx.act = ACT_CODES[name]
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, gy: torch.Tensor):
        (x,) = ctx.saved_tensors
        gy = gy.to(x.dtype).contiguous()  # autograd may hand over an expanded (stride-0) gradient
        gx = torch.empty_like(x)
        if x.numel():
            _act_bwd_kernel[_grid(x.numel())](x, gy, gx, x.numel(), ACT=ctx.act, BLOCK=BLOCK)
        return gx, None


class SwiGLU(torch.autograd.Function):
    """y = gate(a)·b elementwise; backward writes both gradients in one kernel."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor, gate: str = "swish") -> torch.Tensor:
        y = torch.empty_like(a)
        ctx.gate = ACT_CODES[gate]
        if a.numel():
            _swiglu_fwd_kernel[_grid(a.numel())](a, b, y, a.numel(), GATE=ctx.gate, BLOCK=BLOCK)
        ctx.save_for_backward(a, b)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, gy: torch.Tensor):
        a, b = ctx.saved_tensors
        gy = gy.to(a.dtype).contiguous()
        ga, gb = torch.empty_like(a), torch.empty_like(b)
        if a.numel():
            _swiglu_bwd_kernel[_grid(a.numel())](a, b, gy, ga, gb, a.numel(), GATE=ctx.gate, BLOCK=BLOCK)
        return ga, gb, None


def activate(name: str, x: torch.Tensor) -> torch.Tensor:
    """Activation ``name`` (one of ELEMENTWISE) of ``x`` (any shape, contiguous, fp32/bf16/fp16,
    CUDA or CPU under TRITON_INTERPRET=1) -> same shape and dtype. Raises ValueError on an unknown
    name, pairwise_crelu (fused in sparse_ft only) or a non-contiguous input; TypeError on dtype;
    RuntimeError on a device Triton can't run on."""
    if name not in ELEMENTWISE:
        raise ValueError(f"activate: no elementwise Triton kernel for {name!r}; known: {', '.join(ELEMENTWISE)}"
                         + (" (pairwise_crelu is fused in sparse_ft_pair)" if name == "pairwise_crelu" else ""))
    _check_elementwise(f"activate({name!r})", x)
    return Activation.apply(x, name)


def swiglu(a: torch.Tensor, b: torch.Tensor, gate: str = "swish") -> torch.Tensor:
    """gate(a)·b for ``a``, ``b`` of one shape, dtype and device (contiguous) -> that shape;
    gate "swish" (SwiGLU) or "hardswish" (the gated unit of Viridithas's L2). Raises ValueError
    on another gate."""
    if gate not in GATES:
        raise ValueError(f"swiglu: gate {gate!r}; one of {', '.join(GATES)}")
    _check_elementwise("swiglu", a, b)
    return SwiGLU.apply(a, b, gate)
