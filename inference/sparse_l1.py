"""Block-sparse L1: the integer eval of a net with the L1 sum taken only over blocks of
activations that are not all zero (:mod:`nnue.inference.sparse_sums`), for the kinds that have
such a path (``sparse_forward`` of :mod:`nnue.inference.kinds`: perspective, deep, tiny).

Exact: the returned evals equal ``forward_int``'s (``torch.equal``), with the same
``OverflowError`` checks (accumulator outside int16, L1 sum or output outside int32).
:func:`block_stats` reports the block sparsity: the fraction of all-zero blocks.
"""
from __future__ import annotations

import torch

from . import kinds, residual
from .exact import accumulators_f32, check_acc_int16
from .sparse_sums import METHODS, block_stats  # noqa: F401  (the entry point's names)


def forward_sparse(net, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor,
                   block: int = 4, method: str = "gather", return_stats: bool = False):
    """The kind's ``forward_int`` with a block-sparse L1 (its ``sparse_forward``): same
    arguments, same (N,) int64 evals, same OverflowErrors. With return_stats also
    :func:`block_stats`' dict. Raises ValueError for a kind without the path."""
    path = kinds.of(net).sparse_forward  # an unknown kind: ValueError naming the known ones
    if path is None:
        raise ValueError(f"the block-sparse L1 path does not evaluate {net.kind} nets; use nnue.inference.evaluate")
    accs = []
    for idx in (stm, nstm):
        acc = accumulators_f32(net, idx)
        check_acc_int16(acc)
        accs.append(acc)
    ev, x = path(net, accs, bucket, block, method)
    return (ev, block_stats(x, block)) if return_stats else ev


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
