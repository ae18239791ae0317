"""Block-sparse L1: the integer eval of :func:`nnue.inference.perspective.forward_int`, with the L1 sum
taken only over blocks of activations that are not all zero.

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
  batch (dead neurons) and runs the dense float64 matrix product of ``forward_int`` on the
  remaining columns; exact for the same reason as ``forward_int`` (each product < 2³¹, each sum
  < 2⁵³).

Both are exact: the returned evals equal ``forward_int``'s (``torch.equal``), with the same
``OverflowError`` checks (accumulator outside int16, L1 sum or output outside int32).
:func:`block_stats` reports the block sparsity: the fraction of all-zero blocks.

Deep nets (:mod:`nnue.inference.deep`) take the same two paths for their L1, the layer that
sees the sparse u8 inputs x0 (Stockfish's sparse-input affine transform): "gather" takes each
position's nonzero blocks against the N1 rows of its bucket (int64 products), "compact" runs
the deep net's exact ``torch._int_mm`` on the live block columns only; L2 and out follow as in
:func:`nnue.inference.deep.forward_after_l1`.
"""
from __future__ import annotations

import torch

from . import kinds, perspective, residual
from .exact import accumulators_f32, check_acc_int16, check_int32

METHODS = ("gather", "compact")


def activations(net, acc: torch.Tensor) -> torch.Tensor:
    """(N, 2, H) accumulators (stm, nstm; integers in any dtype) -> (N, 2, L) int32 L1 inputs
    per perspective (L = H, or H/2 for pairwise_crelu), after the activation."""
    return perspective.l1_input(net.arch["activation"], net.scheme.qa, acc.to(torch.int32))


def _blocks(x: torch.Tensor, block: int) -> torch.Tensor:
    """(N, 2, L) -> (N, 2·nb, block), zero padded to a whole number of blocks a perspective."""
    n, two, L = x.shape
    pad = -L % block
    if pad:
        x = torch.nn.functional.pad(x, (0, pad))
    return x.reshape(n, two * ((L + pad) // block), block)


def _nonzero_blocks(xb: torch.Tensor) -> torch.Tensor:
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
    nz = _nonzero_blocks(_blocks(x, block))          # (N, 2·nb)
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
    """L1 weights as (B, 2·nb, block) blocks matching :func:`_blocks`, made once per net."""
    cache = net.__dict__.setdefault("_sparse_l1_cache", {})
    key = (block, dtype)
    hit = cache.get(key)
    if hit is None or hit[0] is not net.l1w:
        B, L1 = net.l1w.shape
        w = _blocks(net.l1w.view(B, 2, L1 // 2).to(dtype), block).contiguous()
        hit = cache[key] = (net.l1w, w)
    return hit[1]


def l1_sum(net, x: torch.Tensor, bucket: torch.Tensor, block: int = 4,
           method: str = "gather") -> torch.Tensor:
    """The L1 sum before the division, skipping all-zero blocks: x (N, 2, L) int32 L1 inputs
    (from :func:`activations`), bucket (N,) int64 -> (N,) int64, exact."""
    if method not in METHODS:
        raise ValueError(f"method {method!r}: expected one of {', '.join(METHODS)}")
    n = x.shape[0]
    xb = _blocks(x, block)                          # (N, C, block), C = 2·nb
    cols = xb.shape[1]
    nz = _nonzero_blocks(xb)                        # (N, C)
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


def _deep_weights(net, block: int) -> torch.Tensor:
    """A deep net's L1 weights as (B, 2·nb, N1, block) int64 blocks matching :func:`_blocks`."""
    cache = net.__dict__.setdefault("_sparse_l1_cache", {})
    key = ("deep", block)
    hit = cache.get(key)
    if hit is None or hit[0] is not net.l1w:
        B, N1, L1 = net.l1w.shape
        w = _blocks(net.l1w.to(torch.int64).view(B * N1, 2, L1 // 2), block)   # (B·N1, C, block)
        w = w.view(B, N1, -1, block).permute(0, 2, 1, 3).contiguous()          # (B, C, N1, block)
        hit = cache[key] = (net.l1w, w)
    return hit[1]


def deep_l1_sum(net, x: torch.Tensor, bucket: torch.Tensor, block: int = 4,
                method: str = "gather") -> torch.Tensor:
    """A deep net's L1 sums, bias included, skipping all-zero blocks: x (N, 2, L1/2) int32 u8
    inputs x0 (stm, nstm), bucket (N,) int64 -> (N, N1) int64, checked against int32."""
    from .deep import dense_int

    if method not in METHODS:
        raise ValueError(f"method {method!r}: expected one of {', '.join(METHODS)}")
    n = x.shape[0]
    xb = _blocks(x, block)                          # (N, C, block)
    cols = xb.shape[1]
    nz = _nonzero_blocks(xb)
    w = _deep_weights(net, block)                   # (B, C, N1, block)
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


def forward_sparse(net, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor,
                   block: int = 4, method: str = "gather", return_stats: bool = False):
    """:func:`~nnue.inference.perspective.forward_int` (deep nets: :func:`nnue.inference.deep.forward_int`)
    with a block-sparse L1: same arguments, same (N,) int64 evals, same OverflowErrors. With
    return_stats also :func:`block_stats`' dict."""
    if not kinds.of(net).sparse_l1:  # an unknown kind: ValueError naming the known ones
        raise ValueError(f"the block-sparse L1 path does not evaluate {net.kind} nets; use nnue.inference.evaluate")
    accs = []
    for idx in (stm, nstm):
        acc = accumulators_f32(net, idx)
        check_acc_int16(acc)
        accs.append(acc)
    ev, x = _FORWARD[net.kind](net, accs, bucket, block, method)
    return (ev, block_stats(x, block)) if return_stats else ev


def _forward_deep(net, accs, bucket, block, method):
    from .deep import forward_after_l1, l0_activations

    x = l0_activations(net, accs[0].to(torch.int32), accs[1].to(torch.int32))
    x = x.view(x.shape[0], 2, -1)
    return forward_after_l1(net, deep_l1_sum(net, x, bucket, block, method), bucket), x


def _forward_tiny(net, accs, bucket, block, method):
    from .deep import l0_activations
    from .tiny import forward_after_l1

    x = l0_activations(net, accs[0].to(torch.int32), accs[1].to(torch.int32))
    x = x.view(x.shape[0], 2, -1)
    return forward_after_l1(net, deep_l1_sum(net, x, bucket, block, method), bucket), x  # same L1 layout as deep


def _forward_perspective(net, accs, bucket, block, method):
    x = activations(net, torch.stack(accs, 1))
    total = l1_sum(net, x, bucket, block, method)
    return perspective.output(net.arch["activation"], net.scheme, total, perspective.l1b_int64(net)[bucket]), x


#: net kind -> its path after the accumulators (the kinds of :mod:`nnue.inference.kinds` that have an L1)
_FORWARD = {"perspective": _forward_perspective, "deep": _forward_deep, "tiny": _forward_tiny}


def evaluate_sparse(net, boards: torch.Tensor, chunk: int = 1024, block: int = 4,
                    method: str = "gather", return_stats: bool = False, base=None):
    """:func:`~nnue.inference.api.evaluate` through :func:`forward_sparse`: (N, 32) uint8 packed
    boards -> (N,) int64 evals (a residual net's base added as there: ``base``, or the material
    base computed); with return_stats also the block sparsity over all of them."""
    fs, buckets = net.features, net.buckets
    out, zero, total, zs, zn, n = [], 0, 0, 0.0, 0.0, 0
    for start in range(0, boards.shape[0], chunk):
        b = boards[start:start + chunk]
        stm, nstm = fs.encode(b)
        ev, st = forward_sparse(net, stm, nstm, buckets.of(b), block, method, return_stats=True)
        out.append(ev)
        zero += st["zero_blocks"]
        total += st["blocks"]
        zs += st["sparsity_stm"] * st["positions"]
        zn += st["sparsity_nstm"] * st["positions"]
        n += st["positions"]
    ev = torch.cat(out) if out else torch.zeros(0, dtype=torch.int64)
    r = residual.of(net)
    if r is not None:  # base + α·net, as nnue.inference.evaluate (material computed; else base=)
        ev = residual.combine(ev, residual.base_for(net, boards, base), r["alpha_num"], r["alpha_shift"])
    if not return_stats:
        return ev
    return ev, {"block": block, "positions": n, "blocks": total, "zero_blocks": zero,
                "sparsity": zero / total if total else 0.0,
                "sparsity_stm": zs / n if n else 0.0, "sparsity_nstm": zn / n if n else 0.0}
