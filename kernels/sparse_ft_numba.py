"""Feature transformer for CPU training, compiled with numba: both perspectives, activation fused,
row-sparse weight gradient.

:func:`sparse_ft_pair` computes, for each position b and perspective p (stm first, then nstm)::

    acc_p = Σ_{i valid} W'[idx_p[b, i]] + bias      fp32, rows added in slot order, −1 = padding
    W'[f] = weight[f] (+ factor[factor_map[f]])      the factoriser's virtual row, added per gathered row
    out[b, p·H' : (p+1)·H'] = act(acc_p)

with act one of ``crelu`` (clamp(x, 0, 1)), ``screlu`` (crelu²), ``pairwise_crelu``
(crelu(acc[:H/2])·crelu(acc[H/2:]), H' = H/2) or ``none`` (the raw accumulator, H' = H: a net that
applies its own products, e.g. a Stockfish-style net whose FT matrix also holds PSQT columns). The
definitions are those of :func:`nnue.kernels.reference.sparse_ft_pair` on the folded weight
``weight + factor[factor_map]`` (:meth:`nnue.trainer.model.FTNet.folded_ft_weight`), the
spec this is tested against (``tests/kernels/test_sparse_ft_numba.py``); the folded (F, H) matrix
is never built, so a factoriser costs one more (small, cache-resident) row per gathered row, not a
dense pass over the whole matrix every step.

Backward: ``grad_acc = grad_out · act'(acc)`` from the fp32 accumulators the forward saved (none
for ``none``), then the weight gradient of the U rows the batch touched, with no atomics, in one of
two ways: for weights up to SCATTER_UP_TO_BYTES (chess768), by position into one dense copy per
thread (it stays in cache), summed over the copies; above, by feature: the pairs of each feature
are listed by a counting sort and each touched row sums its pairs' ``grad_acc`` rows, one thread
per row. Either way the result is the same every run for a given thread count. Above
SORT_ABOVE_BYTES the pairs are also processed in the order of their lowest feature (forward and
backward; ``group_by="highest"``: their highest, for Stockfish 19's set whose HalfKAv2_hm rows
come last), which groups HalfKA positions by king bucket, so that the rows they share stay in
cache. With ``sparse_grad=True`` the weight's gradient is a coalesced sparse COO tensor of the U
rows (what :class:`nnue.trainer.sparse_optim.RowSparseAdamW` reads), else a dense (F, H) tensor
with zeros elsewhere (any torch optimiser). The factor's gradient is dense (V, H): each touched
row's gradient added to its virtual row, summed by virtual row (:func:`_factor_grad`). The bias
gradient's partial sums are made in grad_acc's pass (:func:`_grad_acc`). Work is split with
numba's ``prange``; ``numba.set_num_threads`` sets the threads. The kernels release the GIL (``nogil``), so that the
trainer's prefetch thread (reading and encoding the next batches, :mod:`nnue.trainer.data`) runs
while they do.

Pass-through columns (:func:`sparse_ft_pair_passthrough`): a Stockfish-style feature
transformer holds L accumulator columns and P PSQT columns in one matrix; the kernel applies the
activation to the first L columns and copies the last P to a second output, in the same pass, so
that the (B, 2·(L + P)) raw accumulators are never written out for torch to slice, clamp and
multiply (sfnnv5: 5 elementwise passes and their backward over 135 MB tensors a step; with the
layer stacks in bucket order and the malloc setting, its step fell from 1.91 to 0.38 CPU s,
``bench/results/train_cpu_before_after.json``).

QAT (``qa``): each folded row element goes through ``fake_quant`` (round to the grid of 1/qa,
straight-through backward) before it is summed, as the torch path does on the folded matrix;
``qa`` is one grid for every column or one per column (a Stockfish 19 net: its L1 accumulator
columns on 1/256, its PSQT columns on 1/9600). The rounded rows of the features the batch
touches are made once per forward into a (U, H) matrix (:func:`_fold_quant_rows`, the indices
renumbered into it), then gathered as plain rows: U roundings instead of one per gathered row
(and the factor's rows not read again), the same sums bit for bit; the cost is that (U, H)
scratch (sfnnv16 at batch 16,384: U ≈ F, ~360 MB).

Stockfish 19's feature transformer (:class:`nnue.trainer.kinds.sfnnv16.SFNNv16Net`) also needs
``clamp_max`` (its pairwise product clamps each half at 255/256, not 1; the gradient masks
follow) and a factoriser on some rows only: ``factor_map`` −1 marks a row without a virtual row
(its threat and pawn-pair rows), read in the forward as an appended zero row of the factor and
left out of the factor's gradient.

CPU tensors only, fp32 weights, int32/int64 indices. Errors (ValueError/TypeError) name the
argument: wrong device, dtype or shape, an index ≥ F (checked before the kernel runs: the
compiled loops do not bounds-check), an unknown activation.
"""
from __future__ import annotations

import math

import numba
import numpy as np
import torch
from numba import njit, prange

ACTIVATIONS = ("crelu", "screlu", "pairwise_crelu", "none")
_CODES = {"crelu": 0, "screlu": 1, "pairwise_crelu": 2, "none": 3}
CRELU, SCRELU, PAIRWISE, NONE = 0, 1, 2, 3
# Weights above this many bytes: the (position, perspective) pairs are processed in the order of
# their lowest feature, so that pairs sharing rows (HalfKA: one king bucket's 704 rows) run
# together and their rows stay in cache, in the forward and in the by-feature weight gradient.
SORT_ABOVE_BYTES = 4 << 20
# Weights up to this many bytes: the weight gradient is built by position into one dense copy per
# thread (cache-resident), rather than by feature (random reads of grad_acc rows).
SCATTER_UP_TO_BYTES = 4 << 20
# rows of grad_acc summed per partial of the bias gradient: a fixed split, so that the bias
# gradient is the same whatever the thread count
_BIAS_CHUNK = 256
# the by-feature weight gradient splits its touched rows into this many runs of consecutive rows
# per thread, of equal work (pairs summed) rather than of equal rows: HalfKA's hot rows (the king
# buckets real games keep their kings in) lie together, and equal row counts left one thread most
# of the work (1.15 of 2 cores on small.binpack's batches, sfnnv5); consecutive rows keep the
# grad_acc rows they share in cache (rows dealt out in turn used both cores but took longer)
_RUNS_PER_THREAD = 8


# ---------------------------------------------------------------------------------------------- kernels

@njit(cache=True, inline="always")
def _fq_floor(x, g):
    """torch's ``fake_quant(t, g, "floor")`` in fp32: ``t + (floor(t·g + 1e-3)/g − t)``."""
    q = np.float32(np.floor(x * g + np.float32(1e-3))) / g
    return x + np.float32(q - x)


@njit(cache=True, inline="always")
def _fq(x, qa):
    """torch's ``t + (round(t·qa)/qa − t)`` in fp32 (the value of fake_quant's forward)."""
    q = np.float32(np.rint(x * qa)) / qa
    return x + np.float32(q - x)


@njit(cache=True, nogil=True)
def _gather_sum(acc, w, fac, fmap, idx, has_fac):
    """acc[:] = Σ over the valid slots of idx (in slot order) of the folded row of each feature.

    Four rows per pass over acc, added one after the other (((acc + r0) + r1) + r2) + r3: the
    reference's order exactly, with a quarter of the loads and stores of acc (1.2-1.4x the
    one-row loop, /tmp microbenchmark at H = 256 and 1,024, same bits)."""
    H = acc.shape[0]
    A = idx.shape[0]
    for j in range(H):
        acc[j] = 0.0
    rows = np.empty(A, np.int64)
    n = 0
    for a in range(A):
        if idx[a] >= 0:
            rows[n] = idx[a]
            n += 1
    k = 0
    if has_fac:
        while k + 4 <= n:
            r0, r1, r2, r3 = w[rows[k]], w[rows[k + 1]], w[rows[k + 2]], w[rows[k + 3]]
            s0, s1, s2, s3 = fac[fmap[rows[k]]], fac[fmap[rows[k + 1]]], fac[fmap[rows[k + 2]]], fac[fmap[rows[k + 3]]]
            for j in range(H):
                acc[j] = (((acc[j] + (r0[j] + s0[j])) + (r1[j] + s1[j])) + (r2[j] + s2[j])) + (r3[j] + s3[j])
            k += 4
        while k < n:
            r0, s0 = w[rows[k]], fac[fmap[rows[k]]]
            for j in range(H):
                acc[j] += r0[j] + s0[j]
            k += 1
    else:
        _sum_rows(acc, w, rows, 0, n)


@njit(cache=True, nogil=True)
def _sum_rows(dst, src, idx, k, end):
    """dst (H,) = Σ src[idx[i]] for i in [k, end), in that order, four rows a pass over dst
    ((((dst + r0) + r1) + r2) + r3: the reference's order, a quarter of dst's loads and stores);
    dst is zeroed first."""
    H = dst.shape[0]
    for j in range(H):
        dst[j] = 0.0
    while k + 4 <= end:
        r0, r1, r2, r3 = src[idx[k]], src[idx[k + 1]], src[idx[k + 2]], src[idx[k + 3]]
        for j in range(H):
            dst[j] = (((dst[j] + r0[j]) + r1[j]) + r2[j]) + r3[j]
        k += 4
    while k < end:
        r0 = src[idx[k]]
        for j in range(H):
            dst[j] += r0[j]
        k += 1


@njit(parallel=True, cache=True, nogil=True)
def _fold_quant_rows(w, fac, fmap, rows, qv, out):
    """QAT: out[u] = the folded row rows[u] (``w[f] + fac[fmap[f]]``, or ``w[f]`` without a
    factoriser: fac (0, H)), each element j on the grid of 1/qv[j] (:func:`_fq`): the values the
    gather then sums, made once per touched row rather than once per gathered row."""
    H = w.shape[1]
    has_fac = fac.shape[0] > 0
    for u in prange(rows.shape[0]):
        f = rows[u]
        dst = out[u]
        if has_fac:
            v = fmap[f]
            for j in range(H):
                dst[j] = _fq(w[f, j] + fac[v, j], qv[j])
        else:
            for j in range(H):
                dst[j] = _fq(w[f, j], qv[j])


@njit(parallel=True, cache=True, nogil=True)
def _remap_indices(idx, remap, out):
    """out[b, a] = remap[idx[b, a]] for the valid slots, −1 for padding (any negative value)."""
    for b in prange(idx.shape[0]):
        for a in range(idx.shape[1]):
            f = idx[b, a]
            out[b, a] = remap[f] if f >= 0 else -1


@njit(cache=True, nogil=True)
def _add_bias_activate(acc, bias, out, o0, act, L, hi, og, sc):
    """acc += bias (all H columns); out[o0 : o0 + L'] = act(acc[:L])·sc (L' = L/2 for pairwise),
    the clamp's upper end ``hi`` (f32; 1 for every activation but Stockfish 19's 255/256), sc f32
    the output's scale (1: none; torch's ``t * sc`` in fp32, after the product); og > 0
    (pairwise only): each scaled product floored to the grid of 1/og (:func:`_fq_floor`)."""
    H = acc.shape[0]
    for j in range(H):
        acc[j] += bias[j]
    if act == PAIRWISE:
        h2 = L // 2
        for j in range(h2):
            a = min(max(acc[j], np.float32(0.0)), hi)
            c = min(max(acc[j + h2], np.float32(0.0)), hi)
            out[o0 + j] = (a * c) * sc
        if og > 0:
            for j in range(h2):
                out[o0 + j] = _fq_floor(out[o0 + j], og)
    elif act == SCRELU:
        for j in range(L):
            c = min(max(acc[j], np.float32(0.0)), hi)
            out[o0 + j] = (c * c) * sc
    elif act == CRELU:
        for j in range(L):
            out[o0 + j] = min(max(acc[j], np.float32(0.0)), hi) * sc


@njit(cache=True, nogil=True)
def _add_bias_raw(out_row, o0, bias):
    for j in range(bias.shape[0]):
        out_row[o0 + j] += bias[j]


@njit(cache=True, nogil=True)
def _pair_order(stm, nstm, F, by_lowest, highest=False):
    """(2B,) int64 processing order of the (position, perspective) pairs q = 2·b + p: by their lowest
    valid feature (``highest``: their highest) in a counting sort (pairs without any come last)
    when ``by_lowest``, else q order."""
    B, A = stm.shape
    N = 2 * B
    order = np.empty(N, np.int64)
    if not by_lowest:
        for q in range(N):
            order[q] = q
        return order
    key = np.empty(N, np.int64)
    counts = np.zeros(F + 2, np.int64)
    for q in range(N):
        idx = stm[q >> 1] if (q & 1) == 0 else nstm[q >> 1]
        m = F
        if highest:
            m = -1
            for a in range(A):
                if idx[a] > m:
                    m = idx[a]
            if m < 0:
                m = F
        else:
            for a in range(A):
                f = idx[a]
                if f >= 0 and f < m:
                    m = f
        key[q] = m
        counts[m + 1] += 1
    for k in range(F + 1):
        counts[k + 1] += counts[k]
    for q in range(N):
        order[counts[key[q]]] = q
        counts[key[q]] += 1
    return order


@njit(parallel=True, cache=True, nogil=True)
def _ft_fwd(w, fac, fmap, bias, stm, nstm, order, act, hi, og, sc, out, accs, raw):
    """Forward over the batch (module docstring). w (F, H) f32; fac (V, H) f32, V = 0 without a
    factoriser; fmap (F,) int64 in 0..V−1; bias (H,); stm/nstm (B, A) int32; order (2B,) the
    pairs' processing order (:func:`_pair_order`); hi f32 the activation's upper clamp; og f32
    the pairwise products' floor grid (0: none); sc f32 the activated output's scale; out
    (B, 2·L') f32; accs (2B, H) f32, row i = the accumulator of pair order[i], written unless
    act is none (out holds them); raw (B, 2·P) f32: the last P = H − L columns of each
    accumulator, not activated (the pass-through columns, e.g. PSQT; P = 0: raw is (B, 0))."""
    H = w.shape[1]
    P = raw.shape[1] // 2
    L = H - P
    has_fac = fac.shape[0] > 0
    HO = L // 2 if act == PAIRWISE else L
    for i in prange(order.shape[0]):
        q = order[i]
        b, p = q >> 1, q & 1
        idx = stm[b] if p == 0 else nstm[b]
        if act == NONE:
            acc = out[b, p * H:(p + 1) * H]
            _gather_sum(acc, w, fac, fmap, idx, has_fac)
            for j in range(H):
                acc[j] += bias[j]
        else:
            acc = accs[i]
            _gather_sum(acc, w, fac, fmap, idx, has_fac)
            _add_bias_activate(acc, bias, out[b], p * HO, act, L, hi, og, sc)
            for j in range(P):
                raw[b, p * P + j] = acc[L + j]


@njit(parallel=True, cache=True, nogil=True)
def _grad_acc(gout, accs, order, act, ga, graw, hi, sc, parts):
    """ga (2B, H) = d loss / d acc, row i for pair order[i], from gout (B, 2·L') and the saved
    accs (2B, H) (for none: a copy of gout's rows in that order); the last P columns from graw
    (B, 2·P), the gradient of the pass-through output. hi: the clamp's upper end (the gradient
    passes where 0 ≤ acc ≤ hi, torch's clamp rule); sc: the forward's output scale (gout·sc
    first, as torch's mul backward). parts (C, H): the bias gradient's partial
    sums, made from each row while it is in cache, as :func:`_bias_grad` makes them (the rows
    of chunk c in order from zero); parts (0, H): not made. Threads take whole chunks of
    _BIAS_CHUNK rows."""
    N, H = ga.shape
    with_bias = parts.shape[0] > 0
    for c in prange((N + _BIAS_CHUNK - 1) // _BIAS_CHUNK):
        if with_bias:
            dst = parts[c]
            for j in range(H):
                dst[j] = 0.0
        for i in range(c * _BIAS_CHUNK, min(N, (c + 1) * _BIAS_CHUNK)):
            _grad_acc_row(gout, accs, order, act, ga[i], graw, hi, sc, i)
            if with_bias:
                g = ga[i]
                for j in range(H):
                    dst[j] += g[j]


@njit(cache=True, nogil=True, inline="always")
def _grad_acc_row(gout, accs, order, act, g, graw, hi, sc, i):
    """Row i of :func:`_grad_acc`'s ga into g."""
    H = g.shape[0]
    P = graw.shape[1] // 2
    L = H - P
    zero = np.float32(0.0)
    q = order[i]
    b, p = q >> 1, q & 1
    if act == NONE:
        for j in range(H):
            g[j] = gout[b, p * H + j]
        return
    a = accs[i]
    for j in range(P):
        g[L + j] = graw[b, p * P + j]
    if act == PAIRWISE:
        h2 = L // 2
        for j in range(h2):
            x, y = a[j], a[j + h2]
            go = gout[b, p * h2 + j] * sc
            cx = min(max(x, zero), hi)
            cy = min(max(y, zero), hi)
            g[j] = go * cy if (x >= zero and x <= hi) else zero
            g[j + h2] = go * cx if (y >= zero and y <= hi) else zero
    elif act == SCRELU:
        for j in range(L):
            x = a[j]
            g[j] = (gout[b, p * L + j] * sc) * (np.float32(2.0) * x) if (x >= zero and x <= hi) else zero
    else:  # crelu
        for j in range(L):
            x = a[j]
            g[j] = gout[b, p * L + j] * sc if (x >= zero and x <= hi) else zero


@njit(cache=True, nogil=True)
def _touched_rows(stm, nstm, F):
    """(counts (F + 1,) int64 exclusive prefix sums of each feature's occurrences, rows (U,) int64
    the touched features ascending)."""
    B, A = stm.shape
    counts = np.zeros(F + 1, np.int64)
    for b in range(B):
        for a in range(A):
            f = stm[b, a]
            if f >= 0:
                counts[f + 1] += 1
            f = nstm[b, a]
            if f >= 0:
                counts[f + 1] += 1
    u = 0
    for f in range(F):
        if counts[f + 1] > 0:
            u += 1
        counts[f + 1] += counts[f]
    rows = np.empty(u, np.int64)
    k = 0
    for f in range(F):
        if counts[f + 1] > counts[f]:
            rows[k] = f
            k += 1
    return counts, rows


@njit(cache=True, nogil=True, inline="always")
def _list_slice(stm, nstm, order, i0, i1, at, pairs, write):
    """The features of the pairs of ranks i0..i1−1: counted in at (F,) (write False), or each
    rank written at pairs[at[f]] and at[f] advanced (write True)."""
    A = stm.shape[1]
    for i in range(i0, i1):
        q = order[i]
        idx = stm[q >> 1] if (q & 1) == 0 else nstm[q >> 1]
        for a in range(A):
            f = idx[a]
            if f >= 0:
                if write:
                    pairs[at[f]] = i
                at[f] += 1


@njit(parallel=True, cache=True, nogil=True)
def _feature_lists(stm, nstm, order, offsets, C):
    """pairs (N,) int32: the rows of grad_acc (processing ranks i, ascending) of every feature,
    grouped by feature at ``offsets`` (:func:`_touched_rows`). In C slices of the ranks at once:
    each counts its features, a prefix over the slices gives each slice its place in every
    feature's list, then each writes its ranks there; the lists are the same for any C."""
    F = offsets.shape[0] - 1
    N = order.shape[0]
    pairs = np.empty(offsets[F], np.int32)
    pos = np.zeros((C, F), np.int64)
    for c in prange(C):
        _list_slice(stm, nstm, order, c * N // C, (c + 1) * N // C, pos[c], pairs, False)
    for f in prange(F):
        start = offsets[f]
        for c in range(C):
            n = pos[c, f]
            pos[c, f] = start
            start += n
    for c in prange(C):
        _list_slice(stm, nstm, order, c * N // C, (c + 1) * N // C, pos[c], pairs, True)
    return pairs


@njit(parallel=True, cache=True, nogil=True)
def _row_grads(ga, offsets, pairs, rows, values, bounds):
    """By feature: values[u] = Σ ga[i] over the ranks i of feature rows[u], ascending (values (U, H)).
    The threads take the runs rows[bounds[c]:bounds[c + 1]] (:func:`_work_bounds`); each row's
    sum is the same whatever the split."""
    for c in prange(bounds.shape[0] - 1):
        for u in range(bounds[c], bounds[c + 1]):
            f = rows[u]   # its ranks in list order, four a pass (as the forward's gather)
            _sum_rows(values[u], ga, pairs, offsets[f], offsets[f + 1])


def _work_bounds(offsets: np.ndarray, rows: np.ndarray, runs: int) -> np.ndarray:
    """(runs + 1,) int64: cut points of rows (ascending) into ``runs`` runs of consecutive rows
    with about the same work each (a row costs its pairs plus one, the zeroing)."""
    work = np.cumsum(offsets[rows + 1] - offsets[rows] + 1)
    cuts = np.searchsorted(work, np.linspace(0, work[-1], runs + 1)[1:-1], side="right")
    return np.concatenate(([0], cuts, [rows.shape[0]])).astype(np.int64)


@njit(parallel=True, cache=True, nogil=True)
def _row_grads_scatter(ga, stm, nstm, order, rows, priv, values):
    """By position: each of the C = priv.shape[0] fixed slices of the pairs adds its grad_acc rows
    into its own dense (F, H) copy priv[c] (small weights: the copy stays in cache), then
    values[u] = Σ_c priv[c, rows[u]], c ascending. Deterministic for a given C."""
    C = priv.shape[0]
    N, H = ga.shape
    A = stm.shape[1]
    for c in prange(C):
        G = priv[c]
        for f in range(G.shape[0]):
            for j in range(H):
                G[f, j] = 0.0
        for i in range(c * N // C, (c + 1) * N // C):
            q = order[i]
            idx = stm[q >> 1] if (q & 1) == 0 else nstm[q >> 1]
            src = ga[i]
            for a in range(A):
                f = idx[a]
                if f >= 0:
                    for j in range(H):
                        G[f, j] += src[j]
    for u in prange(rows.shape[0]):
        f = rows[u]
        dst = values[u]
        for j in range(H):
            dst[j] = priv[0, f, j]
        for c in range(1, C):
            for j in range(H):
                dst[j] += priv[c, f, j]


@njit(parallel=True, cache=True, nogil=True)
def _bias_grad(ga, parts):
    """parts (C, H): partial sums of ga's rows in chunks of _BIAS_CHUNK (summed by the host)."""
    N, H = ga.shape
    for c in prange(parts.shape[0]):
        dst = parts[c]
        for j in range(H):
            dst[j] = 0.0
        for r in range(c * _BIAS_CHUNK, min(N, (c + 1) * _BIAS_CHUNK)):
            src = ga[r]
            for j in range(H):
                dst[j] += src[j]


@njit(cache=True, nogil=True)
def _factor_lists(rows, fmap, V):
    """(offsets (V + 1,) int64, ranks (n,) int32): the ranks u of the touched rows (rows
    ascending) of each virtual row v = fmap[rows[u]] at ranks[offsets[v]:offsets[v + 1]], u
    ascending; rows mapped to −1 (no virtual row) are left out."""
    offsets = np.zeros(V + 1, np.int64)
    for u in range(rows.shape[0]):
        v = fmap[rows[u]]
        if v >= 0:
            offsets[v + 1] += 1
    for v in range(V):
        offsets[v + 1] += offsets[v]
    ranks = np.empty(offsets[V], np.int32)
    pos = offsets[:V].copy()
    for u in range(rows.shape[0]):
        v = fmap[rows[u]]
        if v >= 0:
            ranks[pos[v]] = u
            pos[v] += 1
    return offsets, ranks


def _factor_grad(values: np.ndarray, rows: np.ndarray, fmap: np.ndarray, V: int) -> np.ndarray:
    """(V, H) float32: gfac[v] = Σ values[u] over the touched rows u with fmap[rows[u]] = v, added
    in ascending u from zero (rows mapped to −1 left out). By virtual row: each v's ranks listed
    by a counting sort (:func:`_factor_lists`), then summed by one thread as the weight
    gradient's rows are (:func:`_row_grads`: whole contiguous rows, runs of equal work). It
    replaced a split over 64-column blocks, each reading every (U, H) row in 256-byte pieces
    (22.4 against 2.2 ms at an sfnnv5 batch's 13,350 touched rows, ``nnue bench cpu_kernels``);
    the same sums bit for bit."""
    H = values.shape[1]
    offsets, ranks = _factor_lists(rows, fmap, V)
    gfac = np.empty((V, H), np.float32)
    if V:
        vrows = np.arange(V, dtype=np.int64)
        _row_grads(values, offsets, ranks, vrows, gfac,
                   _work_bounds(offsets, vrows, _RUNS_PER_THREAD * numba.get_num_threads()))
    return gfac


# ---------------------------------------------------------------------------------------------- host

def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()


def _index_array(t: torch.Tensor, name: str, F: int) -> np.ndarray:
    if t.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"sparse_ft_numba: {name} must be int32 or int64, got {t.dtype}")
    if t.dim() != 2:
        raise ValueError(f"sparse_ft_numba: {name} must be (B, A), got {tuple(t.shape)}")
    if t.numel() and int(t.max()) >= F:
        raise ValueError(f"sparse_ft_numba: {name} holds feature {int(t.max())}, beyond the {F} rows of the weight")
    return _np(t.to(torch.int32).contiguous())


def check_inputs(weight, bias, stm, nstm, activation, factor=None, factor_map=None, passthrough=0, qa=None,
                 clamp_max=1.0, group_by="lowest"):
    """Raise ValueError/TypeError, naming the argument, on inputs the kernels cannot take."""
    if group_by not in ("lowest", "highest"):
        raise ValueError(f"sparse_ft_numba: group_by={group_by!r}: 'lowest' or 'highest'")
    if isinstance(qa, torch.Tensor):
        if qa.shape != (weight.shape[-1],) or not qa.dtype.is_floating_point or qa.device.type != "cpu":
            raise ValueError(f"sparse_ft_numba: qa {tuple(qa.shape)} {qa.dtype} must be a number or a "
                             f"({weight.shape[-1]},) float CPU tensor (each column's grid)")
        if not bool((qa > 0).all()):
            raise ValueError("sparse_ft_numba: qa grids must be > 0")
    elif qa is not None and not float(qa) > 0:
        raise ValueError(f"sparse_ft_numba: qa={qa}: a grid > 0, or None (no QAT)")
    if not float(clamp_max) > 0:
        raise ValueError(f"sparse_ft_numba: clamp_max={clamp_max} must be > 0")
    if activation not in ACTIVATIONS:
        raise ValueError(f"sparse_ft_numba: unknown activation {activation!r}; known: {', '.join(ACTIVATIONS)}")
    for name, t in (("weight", weight), ("bias", bias), ("stm", stm), ("nstm", nstm), ("factor", factor),
                    ("factor_map", factor_map)):
        if t is not None and t.device.type != "cpu":
            raise ValueError(f"sparse_ft_numba: {name} is on {t.device}; the numba kernels take CPU tensors "
                             "(backend triton or torch on CUDA)")
    if weight.dtype != torch.float32 or bias.dtype != torch.float32:
        raise TypeError(f"sparse_ft_numba: weight and bias must be float32, got {weight.dtype}, {bias.dtype}")
    if weight.dim() != 2 or bias.shape != (weight.shape[1],):
        raise ValueError(f"sparse_ft_numba: weight {tuple(weight.shape)} and bias {tuple(bias.shape)} "
                         "must be (F, H) and (H,)")
    if activation == "pairwise_crelu" and (weight.shape[1] - passthrough) % 2:
        raise ValueError(f"sparse_ft_numba: pairwise_crelu needs an even width, got H = {weight.shape[1]}"
                         + (f" with passthrough={passthrough}" if passthrough else ""))
    if stm.shape != nstm.shape:
        raise ValueError(f"sparse_ft_numba: stm {tuple(stm.shape)} and nstm {tuple(nstm.shape)} differ")
    if (factor is None) != (factor_map is None):
        raise ValueError("sparse_ft_numba: factor and factor_map go together")
    if factor is not None:
        if factor.dtype != torch.float32 or factor.dim() != 2 or factor.shape[1] != weight.shape[1]:
            raise ValueError(f"sparse_ft_numba: factor {tuple(factor.shape)} {factor.dtype} must be (V, H) float32")
        if factor_map.shape != (weight.shape[0],):
            raise ValueError(f"sparse_ft_numba: factor_map {tuple(factor_map.shape)} must be ({weight.shape[0]},)")
        if factor_map.numel() and (int(factor_map.min()) < -1 or int(factor_map.max()) >= factor.shape[0]):
            raise ValueError(f"sparse_ft_numba: factor_map must lie in -1..{factor.shape[0] - 1} "
                             "(-1: a row without a virtual row)")


def _strategy(F: int, H: int) -> tuple[bool, bool]:
    """(sort the pairs by their lowest feature, weight gradient by position into per-thread
    copies) for an (F, H) weight: see SORT_ABOVE_BYTES and SCATTER_UP_TO_BYTES."""
    nbytes = F * H * 4
    return nbytes > SORT_ABOVE_BYTES, nbytes <= SCATTER_UP_TO_BYTES


class _SparseFTPair(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight, factor, bias, stm, nstm, fmap, activation, sparse_grad, qa, passthrough, clamp_max,
                group_by, out_grid, out_scale):
        F, H = weight.shape
        act = _CODES[activation]
        s, n = _index_array(stm, "stm", F), _index_array(nstm, "nstm", F)
        B = s.shape[0]
        P = passthrough
        L = H - P
        HO = L // 2 if act == PAIRWISE else L
        has_fac = factor is not None
        fac = _np(factor) if has_fac else np.empty((0, H), np.float32)
        fm = _np(fmap.long().contiguous()) if has_fac else np.empty(0, np.int64)
        fac_fwd, fm_fwd = fac, fm
        if has_fac and fm.shape[0] and fm.min() < 0:
            # rows without a virtual row (−1) read an appended zero row in the forward: the
            # gather loops stay branch-free, and w + 0 is w
            fac_fwd = np.concatenate([fac, np.zeros((1, H), np.float32)])
            fm_fwd = np.where(fm < 0, fac.shape[0], fm)
        by_lowest, scatter = _strategy(F, H)
        order = _pair_order(s, n, F, by_lowest, group_by == "highest")
        out = torch.empty(B, 2 * HO)
        raw = torch.empty(B, 2 * P)
        # the pre-activation accumulators, in processing order: scratch for the activation, kept
        # for the backward
        accs = np.empty((2 * B, H) if act != NONE else (0, H), np.float32)
        w = wc = _np(weight.contiguous())
        touched = None
        gs, gn = s, n
        if qa is not None and B:
            # QAT: the touched folded rows fake-quantised once into a (U, H) matrix and the
            # indices renumbered into it (ascending: the same processing order), then the plain
            # gather. The values and the order of the additions are the per-element rounding's,
            # bit for bit; the rounding runs U times instead of once per gathered row (sfnnv16 at
            # batch 16,384: ~87,000 rows against ~3.7 million gathers a perspective pass).
            touched = _touched_rows(s, n, F)
            rows = touched[1]
            w = np.empty((rows.shape[0], H), np.float32)
            _fold_quant_rows(wc, fac_fwd, fm_fwd, rows, _grids(qa, H), w)
            remap = np.full(F, -1, np.int32)
            remap[rows] = np.arange(rows.shape[0], dtype=np.int32)
            gs, gn = np.empty_like(s), np.empty_like(n)
            _remap_indices(s, remap, gs)
            _remap_indices(n, remap, gn)
            fac_fwd, fm_fwd = np.empty((0, H), np.float32), np.empty(0, np.int64)
        if B:
            _ft_fwd(w, fac_fwd, fm_fwd, _np(bias.contiguous()), gs, gn, order, act,
                    np.float32(clamp_max), np.float32(out_grid or 0.0), np.float32(out_scale), _np(out), accs,
                    _np(raw))
        del w
        ctx.act, ctx.F, ctx.H, ctx.sparse_grad, ctx.scatter, ctx.P = act, F, H, sparse_grad, scatter, P
        ctx.hi, ctx.sc = np.float32(clamp_max), np.float32(out_scale)
        ctx.idx = (s, n, order, by_lowest, fm, factor.shape[0] if has_fac else 0)
        ctx.touched = touched
        ctx.accs = accs if any(ctx.needs_input_grad[:3]) else None
        return out, raw

    @staticmethod
    def backward(ctx, grad_out, grad_raw):
        act, F, H, P = ctx.act, ctx.F, ctx.H, ctx.P
        s, n, order, by_lowest, fm, V = ctx.idx
        B = s.shape[0]
        HO = (H - P) // 2 if act == PAIRWISE else H - P
        g = _np(grad_out.float().contiguous()) if grad_out is not None else np.zeros((B, 2 * HO), np.float32)
        gr = _np(grad_raw.float().contiguous()) if grad_raw is not None else np.zeros((B, 2 * P), np.float32)
        parts = np.empty(((B * 2 + _BIAS_CHUNK - 1) // _BIAS_CHUNK if ctx.needs_input_grad[2] else 0, H),
                         np.float32)
        if act == NONE and not by_lowest:
            ga = g.reshape(B * 2, H)   # already in processing order (q = 2b + p)
            if B and parts.shape[0]:
                _bias_grad(ga, parts)
        else:
            ga = np.empty((B * 2, H), np.float32)
            if B:   # the bias gradient's partial sums in the same pass
                _grad_acc(g, ctx.accs, order, act, ga, gr, ctx.hi, ctx.sc, parts)
        ctx.accs = None
        grad_w = grad_fac = grad_b = None
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            offsets, rows = ctx.touched if ctx.touched is not None else _touched_rows(s, n, F)
            ctx.touched = None
            values = np.empty((rows.shape[0], H), np.float32)
            if rows.shape[0] and ctx.scatter:
                priv = np.empty((max(1, numba.get_num_threads()), F, H), np.float32)
                _row_grads_scatter(ga, s, n, order, rows, priv, values)
            elif rows.shape[0]:
                T = numba.get_num_threads()
                _row_grads(ga, offsets, _feature_lists(s, n, order, offsets, T), rows, values,
                           _work_bounds(offsets, rows, _RUNS_PER_THREAD * T))
            rows_t, values_t = torch.from_numpy(rows), torch.from_numpy(values)
            if ctx.needs_input_grad[0]:
                if ctx.sparse_grad:
                    grad_w = torch.sparse_coo_tensor(rows_t.view(1, -1), values_t, (F, H), is_coalesced=True,
                                                     check_invariants=False)
                else:
                    grad_w = torch.zeros(F, H)
                    grad_w.index_copy_(0, rows_t, values_t)
            if ctx.needs_input_grad[1]:
                grad_fac = torch.from_numpy(_factor_grad(values, rows, fm, V))
        if ctx.needs_input_grad[2]:
            grad_b = torch.from_numpy(parts).sum(0) if B else torch.zeros(H)
        return grad_w, grad_fac, grad_b, None, None, None, None, None, None, None, None, None, None, None


def _grids(qa, H: int) -> np.ndarray:
    """(H,) float32 QAT grid of each column from None (no QAT: an empty array), a number (every
    column) or an (H,) tensor."""
    if qa is None:
        return np.empty(0, np.float32)
    if isinstance(qa, torch.Tensor):
        return np.ascontiguousarray(qa.detach().numpy().astype(np.float32))
    return np.full(H, qa, np.float32)


def sparse_ft_pair(weight: torch.Tensor, bias: torch.Tensor, stm: torch.Tensor, nstm: torch.Tensor,
                   activation: str, factor: torch.Tensor | None = None, factor_map: torch.Tensor | None = None,
                   sparse_grad: bool = False, qa: float | torch.Tensor | None = None,
                   clamp_max: float = 1.0, group_by: str = "lowest") -> torch.Tensor:
    """Both perspectives through the feature transformer and ``activation``, concatenated, stm first.

    weight (F, H) float32, bias (H,) float32, stm/nstm (B, A) int32/int64, −1 = padding (any
    negative value), every index < F; factor (V, H) float32 and factor_map (F,) int64 in
    −1..V−1: the factoriser's virtual rows, added to each gathered row (−1: a row without one,
    e.g. the threat rows of a Stockfish 19 net; None: no factoriser). Returns (B, 2·H') float32,
    H' = H/2 for pairwise_crelu, else H; for ``none`` the raw accumulators (B, 2·H) (e.g. H =
    1,024 + 8 PSQT columns). Differentiable in weight, factor and bias; ``sparse_grad``: the
    weight's gradient as a coalesced sparse COO tensor holding only the rows the batch touched
    (:class:`nnue.trainer.sparse_optim.RowSparseAdamW`), else dense. qa: fake-quantise every
    folded row element to the grid of 1/qa (QAT; straight-through gradient): a number for every
    column, or an (H,) tensor of each column's grid (Stockfish 19: 256 for the L1 columns,
    9,600 for the PSQT columns); None: plain float. clamp_max: the upper end of the
    activation's clamp (1.0; Stockfish 19's pairwise product clamps at 255/256), the gradient
    passing where 0 ≤ acc ≤ clamp_max as torch's clamp. group_by: on weights above
    SORT_ABOVE_BYTES the pairs are processed grouped by their ``"lowest"`` feature (HalfKA-only
    sets: the king bucket) or their ``"highest"`` (Stockfish 19's set, whose HalfKAv2_hm rows come
    last: its king bucket; 10-20 % off its forward, scratch measurement at batch 8,192); the
    values do not depend on it, the gradients' summation order does. CPU tensors only; errors:
    :func:`check_inputs`.
    """
    check_inputs(weight, bias, stm, nstm, activation, factor, factor_map, 0, qa, clamp_max, group_by)
    return _SparseFTPair.apply(weight, factor, bias, stm, nstm, factor_map, activation, bool(sparse_grad), qa, 0,
                               float(clamp_max), group_by, None, 1.0)[0]


def sparse_ft_pair_passthrough(weight: torch.Tensor, bias: torch.Tensor, stm: torch.Tensor, nstm: torch.Tensor,
                               activation: str, passthrough: int, factor: torch.Tensor | None = None,
                               factor_map: torch.Tensor | None = None, sparse_grad: bool = False,
                               qa: float | torch.Tensor | None = None, clamp_max: float = 1.0,
                               group_by: str = "lowest",
                               out_grid: float | None = None,
                               out_scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`sparse_ft_pair` on a weight whose last ``passthrough`` = P columns are not activated
    (a Stockfish-style feature transformer: L accumulator columns, then P PSQT columns, one
    matrix): returns (out (B, 2·L') float32, act(acc[:, :L]) of each perspective, stm first, L' =
    L/2 for pairwise_crelu else L; raw (B, 2·P) float32, the accumulators' last P columns, stm's
    then nstm's). Both outputs come from one pass over the gathered rows: the accumulators are
    never written out whole. Bit for bit the values of the raw accumulators
    (``sparse_ft_pair(..., "none")``) put through the activation in torch
    (``tests/kernels/test_sparse_ft_numba.py``). activation: crelu, screlu or pairwise_crelu;
    0 < P < H (L even for pairwise_crelu); other arguments (QAT grids per column, e.g. the L
    accumulator columns on 1/256 and the P PSQT columns on 1/9600; the clamp's upper end; the
    pairs' grouping) and errors as :func:`sparse_ft_pair`. out_grid (pairwise_crelu only): each
    product floored to the grid of 1/out_grid as ``nnue.trainer.model.fake_quant(out, out_grid,
    "floor")`` does, bit for bit, with its straight-through gradient (Stockfish 19 under QAT: 128,
    the engine's ``>> 9``), in the same pass; None: not. out_scale: the activated output
    multiplied by it (before out_grid's floor) and its gradient likewise, bit for bit torch's
    ``out * out_scale`` on the unscaled output (Stockfish 15.1's 127/128 before the layer stacks),
    without that (B, 2·L') pass and its backward's; 1.0: not; ValueError when not finite."""
    if activation not in ACTIVATIONS or weight.dim() != 2:
        check_inputs(weight, bias, stm, nstm, activation, factor, factor_map)
    L = weight.shape[1] - int(passthrough)
    if activation == "none" or not 0 < passthrough < weight.shape[1] or (activation == "pairwise_crelu" and L % 2):
        raise ValueError(f"sparse_ft_numba: passthrough={passthrough} with activation {activation!r} on "
                         f"{weight.shape[1]} columns: needs an activation, 0 < P < H and an even L for pairwise")
    check_inputs(weight, bias, stm, nstm, activation, factor, factor_map, int(passthrough), qa, clamp_max,
                 group_by)
    if out_grid is not None and (activation != "pairwise_crelu" or not float(out_grid) > 0):
        raise ValueError(f"sparse_ft_numba: out_grid={out_grid} needs pairwise_crelu and a grid > 0")
    if not math.isfinite(float(out_scale)):
        raise ValueError(f"sparse_ft_numba: out_scale={out_scale} must be a finite number")
    out, raw = _SparseFTPair.apply(weight, factor, bias, stm, nstm, factor_map, activation, bool(sparse_grad),
                                   qa, int(passthrough), float(clamp_max), group_by, out_grid, float(out_scale))
    return out, raw


def threads() -> int:
    """The threads the kernels run on (``numba.set_num_threads`` changes it)."""
    return numba.get_num_threads()
