"""Exact int8 dense layers of bucketed nets: the layer rule the deep and tiny kinds share
(u8 or int16 activations, int8 weights, int32 biases, one set of rows per output bucket), their
L0 activations (x0, u8) and the incremental accumulator's eval through a kind's layers.

Every product is exact: ``torch._int_mm`` (int8 × int8 → int32) on ``x − 128`` (u8 → int8)
against the weights split into digits of |d| ≤ 64 (``w = d0 + 128·d1``), corrected by
``128·Σ_j w[n][j]``: every partial sum of such a product is below 2^13·K, so int32 holds it for
K < 2^17 inputs, and a saturating u8×s8 kernel (x86 without VNNI) never saturates
(:func:`dense_int`; full-range int8 weights do saturate there: measured under
``ONEDNN_MAX_CPU_ISA=AVX2``); else float64. The corrections and biases are added in int64 and
every sum is checked against int32 (:class:`OverflowError` otherwise, never a wrapped value).
"""
from __future__ import annotations

import numpy as np
import torch

from nnue.spec import activations as acts

from . import exact
from .exact import accumulators_f32, cached, check_acc_int16, check_int32, sorted_steps, weight_digits


def _fresh(t: torch.Tensor) -> torch.Tensor:
    """``t`` as int8 in newly allocated row-major memory. Not ``.contiguous()``: a transposed
    (M, 1) tensor counts as contiguous with strides (1, 1), and ``torch._int_mm`` reads its
    stride as the leading dimension and returns garbage (measured: N1 = 1 deep nets)."""
    return torch.empty(t.shape, dtype=torch.int8).copy_(t)


def dense_plan(w: torch.Tensor, u8: bool = True) -> dict:
    """How :func:`dense_int` multiplies by the int8 weights ``w`` (B, M, K): mode "int8" with
    ``mats``, the weight digits (:func:`nnue.inference.exact.weight_digits`: w = d0 + 128·d1,
    |d| ≤ 64) as (K, B·M) int8 matrices, when ``torch._int_mm`` is exact for these shapes here
    (:func:`nnue.inference.exact.int_mm_is_exact`); else mode "f64" with the (K, B·M) float64
    weights, also when ``u8`` is False (inputs outside 0..255: the non-u8 activations of
    :mod:`nnue.spec.activations`, |x| ≤ 2^14). ``w_sum``: (B, M) int64 row sums."""
    B, M, K = w.shape
    flat = w.reshape(B * M, K).to(torch.int64)
    plan = {"w_sum": flat.sum(1).view(B, M), "shape": (B, M, K)}
    if u8 and 0 < K < 1 << 17 and B * M > 0 and exact.int_mm_is_exact(K, B * M) and exact.int_mm_is_exact(K, M):
        digits = weight_digits(flat)
        plan |= {"mode": "int8", "mats": [_fresh(d.T) for d in digits],
                 "bucket_mats": [[_fresh(d.view(B, M, K)[b].T) for d in digits] for b in range(B)]}
    else:
        plan |= {"mode": "f64", "w64": flat.T.double().contiguous()}
    return plan


def layer_plan(net, name: str, u8: bool = True) -> dict:
    """:func:`dense_plan` of the net's layer ``name`` ("l1w", "l2w", "outw": (B, M, K) int8, or (B, K)
    for a one-output layer), cached on the net; ``u8``: whether the layer's inputs are u8."""
    def build(w):
        return dense_plan(w.unsqueeze(1) if w.dim() == 2 else w, u8)
    return cached(net, ("dense_plan", name, u8), (getattr(net, name),), build)


def dense_int(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, bucket: torch.Tensor, what: str,
              plan: dict | None = None, bucket_range: tuple[int, int] | None = None) -> torch.Tensor:
    """One bucketed dense layer on u8 activations, exact: ``b[bucket] + w[bucket] @ x``.

    x: (N, K) int32 with values in 0..255 (int8 mode; |x| < 2^15 in f64 mode); w: (B, M, K) int8; b: (B, M) int32; bucket: (N,)
    int64. Returns (N, M) int64, each value checked against int32 (OverflowError names
    ``what``). plan: :func:`dense_plan` of ``w`` (made here when not given). bucket_range:
    (lo, hi) when every bucket lies in lo..hi (positions sorted by piece count): only those
    buckets' rows are multiplied, one product per bucket, instead of all B.

    int8 mode: every bucket's rows in one ``torch._int_mm`` per weight digit d on ``x − 128``
    (int8): ``Σ_k x·w = Σ_j 128^j·Σ_k (x−128)·d_j + 128·Σ_k w``. Each int32 partial sum is below
    K·128·64 = K·2^13 < 2^31; the digits' |d| ≤ 64 also keep the adjacent-pair sums of a
    saturating u8×s8 kernel (x86 without VNNI) at 2·255·64 = 32640 < 2^15, where full-range
    int8 weights would saturate. f64 mode: |x·w| ≤ 255·128 and K < 2^17 terms: every sum is an
    exact integer below 2^53 (|x| < 2^15: |x·w| < 2^22, also exact).
    """
    B, M, K = w.shape
    plan = plan if plan is not None else dense_plan(w)
    n = x.shape[0]
    if n == 0:
        return torch.zeros((0, M), dtype=torch.int64)
    if plan["mode"] == "int8" and bucket_range is not None and bucket_range[1] - bucket_range[0] < 2:
        xs = (x - 128).to(torch.int8)
        sel = None
        for bk in range(bucket_range[0], bucket_range[1] + 1):
            part = None
            for j, mat in enumerate(plan["bucket_mats"][bk]):
                p = torch._int_mm(xs, mat).to(torch.int64)
                part = p if part is None else part.add_(p, alpha=128 ** j)
            part = part.add_(128 * plan["w_sum"][bk])
            sel = part if sel is None else torch.where((bucket == bk).view(n, 1), part, sel)
        s = sel + b.to(torch.int64)[bucket]
        check_int32(s, what)
        return s
    if plan["mode"] == "int8":
        xs = (x - 128).to(torch.int8)
        allb = None
        for j, mat in enumerate(plan["mats"]):
            part = torch._int_mm(xs, mat).to(torch.int64)
            allb = part if allb is None else allb.add_(part, alpha=128 ** j)
        allb = allb.add_((128 * plan["w_sum"]).view(1, B * M))
    else:
        allb = (x.double() @ plan["w64"]).to(torch.int64)
    sel = allb.view(n, B, M).gather(1, bucket.view(n, 1, 1).expand(n, 1, M)).squeeze(1)
    s = sel + b.to(torch.int64)[bucket]
    check_int32(s, what)
    return s


def l0_activations(net, acc_stm: torch.Tensor, acc_nstm: torch.Tensor) -> torch.Tensor:
    """x0, the u8 input of L1 (the deep and tiny kinds' step 2): (N, H) int32 accumulators of
    both perspectives -> (N, L1) int32 in 0..255 (stm half first), the L0 activation's
    ``int_l0_deep`` rule of :mod:`nnue.spec.activations` on ``clamp(acc, 0, QA)``. Raises OverflowError when the
    scheme's qa and l0_shift let a value leave u8."""
    s, act = net.scheme, net.arch["activation"]
    x0 = torch.cat([acts.int_l0_deep(act, acc.clamp(0, s.qa), s.l0_shift) for acc in (acc_stm, acc_nstm)], 1)
    if x0.numel() and x0.max() > 255:
        raise OverflowError(f"L0 activation leaves u8 (up to {int(x0.max())}): qa {s.qa} with "
                            f"l0_shift {s.l0_shift} does not fit")
    return x0


def accumulator_eval(net, acc: np.ndarray, stm: int, bucket: int, forward_from_accumulators) -> int:
    """One position's integer eval (centipawns, stm POV) from its (2, H) int32 accumulators,
    white's perspective in row 0, through a kind's ``forward_from_accumulators`` (the deep and
    tiny kinds' ``evaluate_accumulator``). Raises OverflowError when an accumulator leaves int16
    or a sum int32."""
    check_acc_int16(acc)
    a = torch.from_numpy(acc)
    return int(forward_from_accumulators(net, a[stm:stm + 1], a[1 - stm:2 - stm], torch.tensor([bucket]))[0])


def forward_int(net, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor, return_parts: bool,
                forward_from_accumulators):
    """A layer-stack kind's ``forward_int`` (deep, tiny): both perspectives' accumulators (the
    exact float32 ``embedding_bag`` of :func:`~nnue.inference.exact.accumulators_f32`,
    range-checked against int16), then the kind's ``forward_from_accumulators``. stm, nstm (N, A)
    int32 −1-padded, bucket (N,) int64 -> (N,) int64 centipawns, stm POV (with return_parts, also
    the kind's sums and ``acc`` (N, 2, H) int32). Raises OverflowError."""
    accs = []
    for idx in (stm, nstm):
        acc = accumulators_f32(net, idx)  # exact integers in float32
        check_acc_int16(acc)
        accs.append(acc.to(torch.int32))
    res = forward_from_accumulators(net, accs[0], accs[1], bucket, return_parts)
    if return_parts:
        ev, parts = res
        return ev, parts | {"acc": torch.stack(accs, 1)}
    return res


def evaluate_sorted(net, boards: torch.Tensor, chunk: int, forward_from_accumulators) -> torch.Tensor:
    """A layer-stack kind's torch batch path (deep, tiny): the feature transformer of
    :func:`~nnue.inference.exact.sorted_steps` (positions sorted by piece count, steps of 512,
    bags from the lookup keys), then the kind's ``forward_from_accumulators`` on each step's
    accumulators with its bucket range; (N, 32) uint8 -> (N,) int64 centipawns, stm POV, in input
    order."""
    n = boards.shape[0]
    if n == 0:
        sorted_steps(net, boards, chunk)  # validates shape and dtype
        return torch.zeros(0, dtype=torch.int64)
    order, bucket, _, steps = sorted_steps(net, boards, chunk)
    ev = torch.empty(n, dtype=torch.int64)
    for s, e, acc, b_lo, b_hi in steps:
        acc = acc.view(e - s, 2, -1).to(torch.int32)
        ev[s:e] = forward_from_accumulators(net, acc[:, 0], acc[:, 1], bucket[s:e], bucket_range=(b_lo, b_hi))
    return torch.empty_like(ev).index_copy_(0, order, ev)
