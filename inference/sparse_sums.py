"""Block-sparse L1 sums: the L1 sum taken only over blocks of activations that are not all zero,
for the kinds' block-sparse paths (:mod:`nnue.inference.sparse_l1` is the entry point).

After the activation (``v = clamp(acc, 0, QA)``; crelu ``v``, screlu ``v²``, pairwise
``v[:H/2]·v[H/2:]``) many L1 inputs are 0: every neuron whose accumulator is ≤ 0, and for
pairwise every product with such a neuron. The L1 inputs of each perspective are cut into blocks
of ``block`` (4, an engine's SIMD granule of int32 lanes; a last partial block is padded with
zeros), and a block whose activations are all zero adds nothing to the sum, so it is skipped:

* ``method="gather"`` (per position): the indices of every position's nonzero blocks, one
  gather of those blocks and of the matching weights of the position's own output bucket, int64
  products, and an ``index_add`` into the positions' sums. Work is proportional to the nonzero
  blocks (and one bucket, not all of them).
* ``method="compact"`` (per batch): drops the blocks that are zero in *every* position of the
  batch (dead neurons) and runs the dense exact product on the remaining columns (float64 for
  one output per bucket, each product < 2³¹, each sum < 2⁵³; the int8 ``torch._int_mm`` of
  :func:`nnue.inference.dense.dense_int` for layer stacks).

:func:`l1_sum` is the L1 of a perspective net (one output per bucket, ``l1w`` (B, L1)),
:func:`stack_l1_sum` the L1 of a layer-stack net (N1 outputs per bucket, ``l1w`` (B, N1, L1):
the deep and tiny kinds; Stockfish's sparse-input affine transform). Both are exact: the sums
equal the dense ones (``torch.equal``); the callers keep the range checks.
"""
from __future__ import annotations

import torch

from .dense import dense_int
from .exact import check_int32

METHODS = ("gather", "compact")


def blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    """(N, 2, L) -> (N, 2·nb, block), zero padded to a whole number of blocks a perspective."""
    n, two, L = x.shape
    pad = -L % block
    if pad:
        x = torch.nn.functional.pad(x, (0, pad))
    return x.reshape(n, two * ((L + pad) // block), block)


def _nonzeroblocks(xb: torch.Tensor) -> torch.Tensor:
    """(N, C, block) int32 -> (N, C) bool, true where a block holds a nonzero value. For blocks
    of 4 it ORs the two int64 halves (a reduction over a last dimension of 4 is slow in torch)."""
    if xb.shape[-1] == 4 and xb.dtype == torch.int32 and xb.is_contiguous():
        x64 = xb.view(torch.int64)
        return (x64[..., 0] | x64[..., 1]).ne(0)
    return xb.ne(0).any(-1)


def block_stats(x: torch.Tensor, block: int = 4) -> dict:
    """Block sparsity of L1 inputs x: (N, 2, L) (stm, nstm). Returns ``blocks`` (N · 2 · nb),
    ``zero_blocks``, ``sparsity`` (their fraction), ``sparsity_stm``, ``sparsity_nstm``, and
    ``dead_blocks`` / ``dead_fraction``: block columns that are zero in every position (what
    ``method="compact"`` skips)."""
    nz = _nonzeroblocks(blocks(x, block))          # (N, 2·nb)
    n, cols = nz.shape
    zero = ~nz
    half = cols // 2
    dead = int(zero.all(0).sum()) if n else 0
    total = n * cols
    return {
        "block": block, "positions": n, "blocks": total, "zero_blocks": int(zero.sum()),
        "sparsity": float(zero.sum()) / total if total else 0.0,
        "sparsity_stm": float(zero[:, :half].sum()) / (n * half) if total else 0.0,
        "sparsity_nstm": float(zero[:, half:].sum()) / (n * half) if total else 0.0,
        "dead_blocks": dead, "dead_fraction": dead / cols if cols else 0.0,
    }


def _weights(net, block: int, dtype: torch.dtype) -> torch.Tensor:
    """L1 weights as (B, 2·nb, block) blocks matching :func:`blocks`, made once per net."""
    cache = net.__dict__.setdefault("_sparse_l1_cache", {})
    key = (block, dtype)
    hit = cache.get(key)
    if hit is None or hit[0] is not net.l1w:
        B, L1 = net.l1w.shape
        w = blocks(net.l1w.view(B, 2, L1 // 2).to(dtype), block).contiguous()
        hit = cache[key] = (net.l1w, w)
    return hit[1]


def l1_sum(net, x: torch.Tensor, bucket: torch.Tensor, block: int = 4,
           method: str = "gather") -> torch.Tensor:
    """The L1 sum before the division, skipping all-zero blocks: x (N, 2, L) int32 L1 inputs
    (the kind's activations, e.g. :func:`nnue.inference.kinds.perspective.activations`), bucket
    (N,) int64 -> (N,) int64, exact."""
    if method not in METHODS:
        raise ValueError(f"method {method!r}: expected one of {', '.join(METHODS)}")
    n = x.shape[0]
    xb = blocks(x, block)                          # (N, C, block), C = 2·nb
    cols = xb.shape[1]
    nz = _nonzeroblocks(xb)                        # (N, C)
    if method == "gather":
        # float64 holds every value exactly: |x·w| < 2^16 · 2^15, and a position's sum of at
        # most 2^22 of them stays below 2^53
        w = _weights(net, block, torch.float64)     # (B, C, block)
        rows, js = nz.nonzero(as_tuple=True)
        xs = xb.reshape(-1, block).index_select(0, rows * cols + js).double()
        ws = w.reshape(-1, block).index_select(0, bucket.index_select(0, rows) * cols + js)
        prod = torch.linalg.vecdot(xs, ws)
        total = torch.zeros(n, dtype=torch.float64).index_add_(0, rows, prod)
        return total.to(torch.int64)
    if 2 * x.shape[2] > 1 << 22:
        raise ValueError("L1 wider than 2^22 inputs would break the float64 exactness bound")
    w = _weights(net, block, torch.float64)
    live = nz.any(0).nonzero().squeeze(1)
    if live.numel() == 0:
        return torch.zeros(n, dtype=torch.int64)
    xs = xb.index_select(1, live).reshape(n, -1).double()
    ws = w.index_select(1, live).reshape(w.shape[0], -1)
    return (xs @ ws.T).gather(1, bucket.view(-1, 1)).squeeze(1).to(torch.int64)


def _stack_weights(net, block: int) -> torch.Tensor:
    """A layer-stack net's L1 weights (deep, tiny: l1w (B, N1, L1)) as (B, 2·nb, N1, block) int64
    blocks matching :func:`blocks`."""
    cache = net.__dict__.setdefault("_sparse_l1_cache", {})
    key = ("stacks", block)
    hit = cache.get(key)
    if hit is None or hit[0] is not net.l1w:
        B, N1, L1 = net.l1w.shape
        w = blocks(net.l1w.to(torch.int64).view(B * N1, 2, L1 // 2), block)   # (B·N1, C, block)
        w = w.view(B, N1, -1, block).permute(0, 2, 1, 3).contiguous()          # (B, C, N1, block)
        hit = cache[key] = (net.l1w, w)
    return hit[1]


def stack_l1_sum(net, x: torch.Tensor, bucket: torch.Tensor, block: int = 4,
                method: str = "gather") -> torch.Tensor:
    """A layer-stack net's L1 sums (deep, tiny), bias included, skipping all-zero blocks: x (N, 2, L1/2) int32 u8
    inputs x0 (stm, nstm), bucket (N,) int64 -> (N, N1) int64, checked against int32."""
    if method not in METHODS:
        raise ValueError(f"method {method!r}: expected one of {', '.join(METHODS)}")
    n = x.shape[0]
    xb = blocks(x, block)                          # (N, C, block)
    cols = xb.shape[1]
    nz = _nonzeroblocks(xb)
    w = _stack_weights(net, block)                   # (B, C, N1, block)
    B, _, N1, _ = w.shape
    bias = net.l1b.to(torch.int64)
    if method == "gather":
        rows, js = nz.nonzero(as_tuple=True)
        xs = xb.reshape(-1, block).index_select(0, rows * cols + js).to(torch.int64)     # (M, block)
        ws = w.reshape(-1, N1, block).index_select(0, bucket.index_select(0, rows) * cols + js)
        prod = (ws * xs.unsqueeze(1)).sum(-1)                                             # (M, N1)
        total = torch.zeros(n, N1, dtype=torch.int64).index_add_(0, rows, prod) + bias[bucket]
    else:
        live = nz.any(0).nonzero().squeeze(1)
        xs = xb.index_select(1, live).reshape(n, -1)
        ws = w.index_select(1, live).permute(0, 2, 1, 3).reshape(B, N1, -1).to(torch.int8)
        total = dense_int(xs, ws, net.l1b, bucket, "L1 sum")
    check_int32(total, "L1 sum")
    return total
