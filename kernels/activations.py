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

Each activation's forward and derivative come from its spec (``triton_fwd``/``triton_grad`` of
:mod:`nnue.spec.activations`): :func:`triton_ops` binds them to ``triton.language`` and JIT-
compiles them, and the kernels take them as ``tl.constexpr`` arguments (``FWD``, ``GRAD``), so
no kernel here or in the fused feature transformer (:mod:`nnue.kernels.sparse_ft`) names an
activation. Derivatives follow torch's autograd at the kinks (clamp: inclusive bounds, relu:
strict), so the Triton and reference paths agree exactly where an input lands on a kink.
"""
from __future__ import annotations

import os
import types
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from nnue.spec import activations as spec

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


class TritonOps(NamedTuple):
    """An activation's Triton code: fwd, grad (JIT functions of an fp32 block), pairs (the fused
    FT multiplies fwd of the two halves: pairwise), linear (grad is 1: no accumulator needed)."""

    fwd: object
    grad: object
    pairs: bool
    linear: bool


def _bind(fn):
    """``fn`` (a spec's Triton-language function, ``tl`` unbound) with ``tl`` bound to
    triton.language, JIT-compiled. Same code object, so Triton reads the same source."""
    scope = dict(fn.__globals__, tl=tl)
    return triton.jit(types.FunctionType(fn.__code__, scope, fn.__name__, fn.__defaults__, fn.__closure__))


_OPS: dict = {}


def triton_ops(name: str) -> TritonOps:
    """The Triton code of activation ``name`` from its spec (compiled once per spec object).
    Raises ValueError for an unknown name or one without Triton code (the gated units: their gate's)."""
    a = spec.get(name)
    if a.triton_fwd is None or a.triton_grad is None:
        raise ValueError(f"activation {name!r} has no Triton code; with code: "
                         f"{', '.join(n for n, x in spec.ACTIVATIONS.items() if x.triton_fwd is not None)}")
    ops = _OPS.get(name)
    if ops is None or ops[0] is not a:
        ops = _OPS[name] = (a, TritonOps(_bind(a.triton_fwd), _bind(a.triton_grad), a.triton_pairs, a.triton_linear))
    return ops[1]


def elementwise() -> tuple[str, ...]:
    """The activations with an elementwise kernel here (a Triton forward of one input)."""
    return tuple(n for n, a in spec.ACTIVATIONS.items() if a.elementwise)


def gates() -> tuple[str, ...]:
    """The gates of the registry's gated units (swiglu: hardswish, swish)."""
    return tuple(dict.fromkeys(a.gate for a in spec.ACTIVATIONS.values() if a.gated))


#: the built-in elementwise ops and gates, as the registry held them at import (tests parametrise on them)
ELEMENTWISE = elementwise()
GATES = gates()


@triton.jit
def _act_fwd_kernel(
    x_ptr,   # (N,) input, contiguous, fp32/bf16/fp16
    y_ptr,   # (N,) output, x's dtype
    N,       # element count
    FWD: tl.constexpr, BLOCK: tl.constexpr,  # FWD: the activation's forward (triton_ops)
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, FWD(x).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _act_bwd_kernel(
    x_ptr,   # (N,) the forward's input, contiguous
    gy_ptr,  # (N,) gradient of the output, contiguous
    gx_ptr,  # (N,) gradient of the input (written), x's dtype
    N,
    GRAD: tl.constexpr, BLOCK: tl.constexpr,  # GRAD: the activation's derivative (triton_ops)
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    x = tl.load(x_ptr + offs, mask=m, other=0.0).to(tl.float32)
    gy = tl.load(gy_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(gx_ptr + offs, (gy * GRAD(x)).to(gx_ptr.dtype.element_ty), mask=m)


@triton.jit
def _swiglu_fwd_kernel(
    a_ptr,   # (N,) gate input, contiguous
    b_ptr,   # (N,) linear input, contiguous, a's dtype
    y_ptr,   # (N,) gate(a)·b (written)
    N,
    GATE: tl.constexpr, BLOCK: tl.constexpr,  # GATE: the gate's forward (triton_ops)
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    a = tl.load(a_ptr + offs, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, (GATE(a) * b).to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _swiglu_bwd_kernel(
    a_ptr, b_ptr,  # (N,) the forward's inputs
    gy_ptr,        # (N,) gradient of the output
    ga_ptr,        # (N,) gradient of a (written): gy·b·gate'(a)
    gb_ptr,        # (N,) gradient of b (written): gy·gate(a)
    N,
    GATE: tl.constexpr, GATE_GRAD: tl.constexpr, BLOCK: tl.constexpr,  # the gate's forward and derivative
):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < N
    a = tl.load(a_ptr + offs, mask=m, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=m, other=0.0).to(tl.float32)
    gy = tl.load(gy_ptr + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(ga_ptr + offs, (gy * b * GATE_GRAD(a)).to(ga_ptr.dtype.element_ty), mask=m)
    tl.store(gb_ptr + offs, (gy * GATE(a)).to(gb_ptr.dtype.element_ty), mask=m)


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
            _act_fwd_kernel[_grid(x.numel())](x, y, x.numel(), FWD=triton_ops(name).fwd, BLOCK=BLOCK)
        ctx.save_for_backward(x)
        ctx.act = triton_ops(name)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, gy: torch.Tensor):
        (x,) = ctx.saved_tensors
        gy = gy.to(x.dtype).contiguous()  # autograd may hand over an expanded (stride-0) gradient
        gx = torch.empty_like(x)
        if x.numel():
            _act_bwd_kernel[_grid(x.numel())](x, gy, gx, x.numel(), GRAD=ctx.act.grad, BLOCK=BLOCK)
        return gx, None


class SwiGLU(torch.autograd.Function):
    """y = gate(a)·b elementwise; backward writes both gradients in one kernel."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, b: torch.Tensor, gate: str = "swish") -> torch.Tensor:
        y = torch.empty_like(a)
        ctx.gate = triton_ops(gate)
        if a.numel():
            _swiglu_fwd_kernel[_grid(a.numel())](a, b, y, a.numel(), GATE=ctx.gate.fwd, BLOCK=BLOCK)
        ctx.save_for_backward(a, b)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, gy: torch.Tensor):
        a, b = ctx.saved_tensors
        gy = gy.to(a.dtype).contiguous()
        ga, gb = torch.empty_like(a), torch.empty_like(b)
        if a.numel():
            _swiglu_bwd_kernel[_grid(a.numel())](a, b, gy, ga, gb, a.numel(), GATE=ctx.gate.fwd,
                                                     GATE_GRAD=ctx.gate.grad, BLOCK=BLOCK)
        return ga, gb, None


def activate(name: str, x: torch.Tensor) -> torch.Tensor:
    """Activation ``name`` (one of :func:`elementwise`) of ``x`` (any shape, contiguous, fp32/bf16/fp16,
    CUDA or CPU under TRITON_INTERPRET=1) -> same shape and dtype. Raises ValueError on an unknown
    name, pairwise_crelu (fused in sparse_ft only) or a non-contiguous input; TypeError on dtype;
    RuntimeError on a device Triton can't run on."""
    if name not in elementwise():
        raise ValueError(f"activate: no elementwise Triton kernel for {name!r}; known: {', '.join(elementwise())}"
                         + (f" ({name} is fused in sparse_ft_pair)"
                            if name in spec.ACTIVATIONS and spec.get(name).triton_pairs else ""))
    _check_elementwise(f"activate({name!r})", x)
    return Activation.apply(x, name)


def swiglu(a: torch.Tensor, b: torch.Tensor, gate: str = "swish") -> torch.Tensor:
    """gate(a)·b for ``a``, ``b`` of one shape, dtype and device (contiguous) -> that shape;
    gate "swish" (SwiGLU) or "hardswish" (the gated unit of Viridithas's L2). Raises ValueError
    on another gate."""
    if gate not in gates():
        raise ValueError(f"swiglu: gate {gate!r}; one of {', '.join(gates())}")
    _check_elementwise("swiglu", a, b)
    return SwiGLU.apply(a, b, gate)
