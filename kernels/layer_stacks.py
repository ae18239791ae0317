"""Layer stacks on the CPU: each position through its own output bucket's rows only, the batch
taken in bucket order.

A layer stack (nnue-pytorch's LayerStacks, Stockfish's 8 stacks) holds S copies of a layer in
one ``nn.Linear`` (weight (S·n, K), bias (S·n,)), and position i uses copy ``bucket[i]``:
``y[i] = x[i] @ W[bucket[i]]ᵀ + b[bucket[i]]``. The plain way computes all S copies for every
position and gathers one (:func:`stack_reference`): S times the arithmetic, in the forward and in
both matrix products of the backward. Here the positions are put in bucket order once per forward
(:func:`bucket_order`, on the feature indices, before the feature transformer: a few MB of int32),
so that every stack layer after it works on contiguous slices, ``xs[a:b] @ W_sᵀ + b_s``, one
matrix product per bucket (:func:`stack_linear`), and only the final (B,) output is put back in
batch order. The same sums of products, 1/S of the work; fp32 rounding may differ from the
all-buckets product in the last bits (BLAS blocks differently): ``tests/kernels/test_layer_stacks.py``
compares forward and backward with the reference at fp32 tolerance. Measured with torch.profiler
over 3 training steps of HalfKAv2_hm -> 256 with layer stacks (2 shared cores, load 4-6): the
self CPU time of aten::mm + aten::addmm fell from 287 to 72 ms; end to end, with this round's
other changes, ``bench/results/train_cpu_before_after.json``.

CPU only (:func:`use_for`): on CUDA one dense product for all buckets is cheap, and the bucket
counts would cost a device sync each step.
"""
from __future__ import annotations

import torch


def use_for(x: torch.Tensor) -> bool:
    """Whether the bucket-ordered path applies to tensors on ``x``'s device (the CPU)."""
    return x.device.type == "cpu"


def bucket_order(bucket: torch.Tensor, num_buckets: int) -> tuple[torch.Tensor | None, list[int]]:
    """(perm, offsets): perm (B,) int64 the positions in bucket order (stable; None when the batch
    is already in bucket order), offsets the S + 1 boundaries of each bucket's run in that order
    (Python ints). bucket: (B,) integer in 0..S−1; ValueError otherwise."""
    bucket = bucket.view(-1)
    if bucket.numel() and (int(bucket.min()) < 0 or int(bucket.max()) >= num_buckets):
        raise ValueError(f"layer stacks: bucket values must lie in 0..{num_buckets - 1}, got "
                         f"{int(bucket.min())}..{int(bucket.max())}")
    counts = torch.bincount(bucket, minlength=num_buckets).tolist()
    offsets = [0]
    for c in counts:
        offsets.append(offsets[-1] + c)
    perm = None
    if bucket.numel() > 1 and bool((bucket[1:] < bucket[:-1]).any()):
        perm = torch.sort(bucket, stable=True).indices
    return perm, offsets


def unpermute(y: torch.Tensor, perm: torch.Tensor | None) -> torch.Tensor:
    """Rows of ``y`` (bucket order) back in batch order: out[perm[i]] = y[i] (differentiable)."""
    if perm is None:
        return y
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(perm.numel(), device=perm.device)
    return y.index_select(0, inv)


class _StackLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, offsets, n):
        B = x.shape[0]
        y = x.new_empty(B, n)
        for s in range(len(offsets) - 1):
            a, b = offsets[s], offsets[s + 1]
            if a < b:
                torch.addmm(bias[s * n:(s + 1) * n], x[a:b], weight[s * n:(s + 1) * n].t(), out=y[a:b])
        ctx.save_for_backward(x, weight)
        ctx.offsets, ctx.n, ctx.has_bias_grad = offsets, n, bias.requires_grad
        return y

    @staticmethod
    def backward(ctx, gy):
        x, weight = ctx.saved_tensors
        offsets, n = ctx.offsets, ctx.n
        gy = gy.contiguous()
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = torch.empty_like(x)
        if ctx.needs_input_grad[1]:
            gw = torch.zeros_like(weight)
        if ctx.needs_input_grad[2]:
            gb = weight.new_zeros(weight.shape[0])
        for s in range(len(offsets) - 1):
            a, b = offsets[s], offsets[s + 1]
            if a == b:
                continue
            g, rows = gy[a:b], slice(s * n, (s + 1) * n)
            if gx is not None:
                torch.mm(g, weight[rows], out=gx[a:b])
            if gw is not None:
                torch.mm(g.t(), x[a:b], out=gw[rows])
            if gb is not None:
                torch.sum(g, 0, out=gb[rows])
        if gx is not None and offsets[-1] < x.shape[0]:
            gx[offsets[-1]:] = 0
        return gx, gw, gb, None, None


def stack_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, offsets: list[int],
                 n: int) -> torch.Tensor:
    """x (B, K) float with its rows in bucket order (:func:`bucket_order`), weight (S·n, K),
    bias (S·n,), offsets the S + 1 run boundaries -> (B, n): row i through the rows
    ``s·n .. s·n + n − 1`` of its bucket s. Differentiable in x, weight and bias."""
    if weight.shape[0] != (len(offsets) - 1) * n or weight.shape[1] != x.shape[1]:
        raise ValueError(f"layer stacks: weight {tuple(weight.shape)} must be ({(len(offsets) - 1) * n}, "
                         f"{x.shape[1]})")
    return _StackLinear.apply(x.contiguous(), weight, bias, offsets, n)


def stack_reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, bucket: torch.Tensor,
                    n: int) -> torch.Tensor:
    """The plain rule, for tests: every bucket's product, then each row's own (B, n)."""
    y = torch.nn.functional.linear(x, weight, bias)
    B = x.shape[0]
    return y.view(B, -1, n).gather(1, bucket.view(B, 1, 1).expand(B, 1, n)).squeeze(1)
