"""Compiled (numba) exact evaluation of Stockfish 19's net (sfnnv16): one pass per position from
its feature indices to the engine's internal value, wraps included.

The steps and their arithmetic are those of :mod:`nnue.inference.kinds.sfnnv16` (1–7), per position in
:func:`_eval_lists_sf16`:

1. each perspective's valid indices split into the int8 rows (Full_Threats and PP_3Wide, below
   64,368) and the int16 rows (HalfKAv2_hm, from 64,368 on), then ``acc = ft_bias + Σ
   threat_weight[f] + Σ ft_weight[f − 64,368]`` in int16 register lanes with wrapping adds
   (:func:`_ft_rows_sum`: per block of 32 columns the bias loaded into one 512-bit register, one
   load and add per row, the int8 rows sign-extended, one store), and the PSQT sum of the
   position's own bucket in int64;
2. ``x0[j] = clamp(a[j], 0, 255)·clamp(a[j + L1/2], 0, 255) >> 9``, stm first, with the list of
   its nonzero input pairs;
3. fc_0 of the position's layer stack over those pairs only (:func:`nnue.inference.compiled.gemv_pairs_nz`:
   int32 lanes, pairs of inputs against pair-interleaved int8 weights), ``s0 = wrap32(bias + dots)``;
   ``x1 = [min(127, s0² >> 21)] ++ [clamp(s0 >> 7, 0, 127)]``;
4. fc_1 (:func:`nnue.inference.compiled.gemv_pairs`), ``x2 = [min(127, s1² >> 19)] ++
   [clamp(s1 >> 6, 0, 127)]``;
5. fc_2 over ``x1 ++ x2`` (128 inputs) in int64, ``fwd = wrap32(wrap32(s2) + s0[30] − s0[31])``,
   ``positional = fwd·9,600 / 16,384`` (int64, truncating);
6. ``psqt = wrap32(psqt_stm − psqt_nstm) / 2``; the value is ``psqt / 16 + positional / 16``.

Why every wrap is the engine's, with no bound on the weights: addition and multiplication modulo
2^k do not depend on the order or on intermediate wraps, so the int16 lanes are the engine's int16
accumulators bit for bit, the int32 dot products are the true dot products modulo 2^32 (so
``wrap32(bias + dots)`` is the engine's int32 sum, which the torch path computes exactly and
wraps), and the PSQT sums (at most 289 terms below 2^31) are exact in int64 and wrapped once
(``wrap32(Σs) − wrap32(Σn)`` and ``Σs − Σn`` agree modulo 2^32).

Where the time goes (L1 1,024, one thread, random rows of a random net, load ~10; scratch
measurements): the feature transformer takes ~60 of the ~75 µs a position, reading ~290 KB of
weight rows that are mostly not in cache; one register block a pass over the rows measured
62 µs, whole rows added into an accumulator in memory 102 µs, 2–16 blocks a pass no better than
one.

A serial kernel (one thread, ``nogil``, scratch allocated per call: threads may call it at once).
numba is imported when this module is; :mod:`nnue.inference.kinds.sfnnv16` imports it on first use and
keeps its torch path for ``backend="torch"``, where numba is missing or :func:`applicable` says
no. Compiled on first use and cached by numba (``cache=True``).
"""
from __future__ import annotations

import numpy as np
import torch
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ...compiled import aligned64, gemv_pairs, gemv_pairs_nz, tdiv, wrap32
from ...exact import cached

_LANES = 32         # int16 lanes of one 512-bit register
_INT8_INPUTS = 64368
_NUM_INPUTS = 86896


@intrinsic
def _ft_rows_sum(typingctx, acc, w8, w16, bias, i8, n8, i16, n16):
    """``acc[c] = bias[c] + Σ_{s < n8} w8[i8[s], c] + Σ_{s < n16} w16[i16[s], c]`` in int16 lanes
    with wrapping adds (the int8 rows sign-extended), for the columns c < 32·(H // 32).

    acc (H,) int16, bias (H,) int16, w8 (F8, H) int8, w16 (F16, H) int16, all C-contiguous; i8,
    i16 (≥ n8, ≥ n16) int32 row numbers within w8 and w16 (not checked: the caller's duty).
    Codegen: per block of 32 columns a vector alloca (a register after LLVM's SROA) loaded with
    the bias, one unaligned vector load and add per row, one store."""
    if not (isinstance(acc, types.Array) and acc.dtype == types.int16 and w8.dtype == types.int8
            and w16.dtype == types.int16 and bias.dtype == types.int16):
        return None
    sig = types.void(acc, w8, w16, bias, i8, n8, i16, n16)

    def codegen(context, builder, signature, args):
        acc_a, w8_a, w16_a, b_a, i8_a = (context.make_array(signature.args[k])(context, builder, args[k])
                                         for k in range(5))
        i16_a = context.make_array(signature.args[6])(context, builder, args[6])
        i64 = ir.IntType(64)
        v16 = ir.VectorType(ir.IntType(16), _LANES)
        v8 = ir.VectorType(ir.IntType(8), _LANES)
        h = builder.extract_value(w16_a.shape, 1)
        nblk = builder.udiv(h, ir.Constant(i64, _LANES))
        c8 = context.cast(builder, args[5], signature.args[5], types.int64)
        c16 = context.cast(builder, args[7], signature.args[7], types.int64)
        vacc = cgutils.alloca_once(builder, v16)
        with cgutils.for_range(builder, nblk) as blk:
            col = builder.mul(blk.index, ir.Constant(i64, _LANES))
            builder.store(builder.load(builder.bitcast(builder.gep(b_a.data, [col]), v16.as_pointer()), align=2), vacc)
            for idx_a, cnt, w_a, ty, align in ((i8_a, c8, w8_a, v8, 1), (i16_a, c16, w16_a, v16, 2)):
                with cgutils.for_range(builder, cnt) as s:
                    f = builder.sext(builder.load(builder.gep(idx_a.data, [s.index])), i64)
                    row = builder.gep(w_a.data, [builder.add(builder.mul(f, h), col)])
                    v = builder.load(builder.bitcast(row, ty.as_pointer()), align=align)
                    if ty is v8:
                        v = builder.sext(v, v16)
                    builder.store(builder.add(builder.load(vacc), v), vacc)
            builder.store(builder.load(vacc), builder.bitcast(builder.gep(acc_a.data, [col]), v16.as_pointer()),
                          align=2)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def _split(idx, i8, i16):
    """The valid indices of one perspective (negative = padding) into int8 rows and int16 rows
    (``f − 64,368``): returns (n8, n16)."""
    n8 = 0
    n16 = 0
    for a in range(idx.shape[0]):
        f = idx[a]
        if f < 0:
            continue
        if f < _INT8_INPUTS:
            i8[n8] = f
            n8 += 1
        else:
            i16[n16] = f - _INT8_INPUTS
            n16 += 1
    return n8, n16


@njit(cache=True, nogil=True, inline="always")
def _psqt_sum(p8, p16, i8, n8, i16, n16, b):
    t = np.int64(0)
    for s in range(n8):
        t += p8[i8[s], b]
    for s in range(n16):
        t += p16[i16[s], b]
    return t


@njit(cache=True, nogil=True, inline="always")
def _sqr_clipped(s, shift):
    """Stockfish's SqrClippedReLU of an int32 sum held in int64: min(127, s² >> (2·shift + 7))."""
    return min((s * s) >> (2 * shift + 7), np.int64(127))


@njit(cache=True, nogil=True)
def _eval_lists_sf16(stm, nstm, bucket, w8, w16, ftb, p8, p16, t0, b0, t1, b1, w2, b2, out):
    """Steps 1–6 of the module docstring for every position: out[i] = the engine's internal
    value, stm POV. stm/nstm (N, A) int32 (−1 padded, every index < 86,896: the caller's check);
    bucket (N,) int64 in 0..7; w8 (64,368, L1) int8, w16 (22,528, L1) int16, ftb (L1,) int16;
    p8, p16 the PSQT rows (·, 8) int32; t0 (8, L1/2, 32, 2) and t1 (8, 32, 32, 2) int16: fc_0's
    and fc_1's weights in input pairs; b0, b1 (8, 32) int64; w2 (8, 128) int64, b2 (8,) int64;
    out (N,) int64."""
    n, A = stm.shape
    L1 = w16.shape[1]
    half = L1 // 2
    i8 = np.empty((2, A), np.int32)
    i16 = np.empty((2, A), np.int32)
    acc = np.empty((2, L1), np.int16)
    x0 = np.empty(L1, np.int16)
    pidx = np.empty(L1 // 2, np.int32)
    dots = np.empty(32, np.int32)
    s0 = np.empty(32, np.int64)
    x1 = np.empty(64, np.int16)
    s1 = np.empty(32, np.int64)
    xs = np.empty(128, np.int64)
    for i in range(n):
        b = bucket[i]
        ps = np.int64(0)
        for p in range(2):
            n8, n16 = _split(stm[i] if p == 0 else nstm[i], i8[p], i16[p])
            _ft_rows_sum(acc[p], w8, w16, ftb, i8[p], n8, i16[p], n16)
            t = _psqt_sum(p8, p16, i8[p], n8, i16[p], n16, b)
            ps = ps + t if p == 0 else ps - t
        # step 2: the pairwise products, stm's half first, and the nonzero input pairs
        for p in range(2):
            a = acc[p]
            for j in range(half):
                x0[p * half + j] = (np.int32(min(max(a[j], 0), 255)) * np.int32(min(max(a[j + half], 0), 255))) >> 9
        cnt = 0
        for q in range(L1 // 2):
            if x0[2 * q] != 0 or x0[2 * q + 1] != 0:
                pidx[cnt] = q
                cnt += 1
        # step 3: fc_0 and its two activations at WeightScaleBits + 1 = 7
        gemv_pairs_nz(x0, t0[b], dots, pidx, cnt)
        for k in range(32):
            s0[k] = wrap32(b0[b, k] + np.int64(dots[k]))
            x1[k] = _sqr_clipped(s0[k], 7)
            x1[32 + k] = min(max(s0[k] >> 7, 0), 127)
        # step 4: fc_1 and its two activations at WeightScaleBits = 6
        gemv_pairs(x1, t1[b], dots)
        for k in range(32):
            s1[k] = wrap32(b1[b, k] + np.int64(dots[k]))
        # step 5: fc_2 over both activated layers, the skip, the output scaling
        for k in range(64):
            xs[k] = x1[k]
        for k in range(32):
            xs[64 + k] = _sqr_clipped(s1[k], 6)
            xs[96 + k] = min(max(s1[k] >> 6, 0), 127)
        t = b2[b]
        for k in range(128):
            t += w2[b, k] * xs[k]
        fwd = wrap32(wrap32(t) + s0[30] - s0[31])
        positional = tdiv(fwd * 9600, 16384)
        # step 6: the PSQT difference of the bucket's column; each part divided by OutputScale
        psqt = tdiv(wrap32(ps), 2)
        out[i] = tdiv(psqt, 16) + tdiv(positional, 16)


def applicable(net) -> bool:
    """Whether :func:`_eval_lists_sf16` evaluates ``net``: an sfnnv16 net whose tensors have the
    dtypes and shapes of :meth:`~nnue.inference.kinds.sfnnv16.SFNNv16IntegerNet.tensor_specs`, an L1
    that is a multiple of 32 (register blocks; the arch asks for a multiple of 64), fc_0 32 ×
    L1, fc_1 32 × 64, fc_2 1 × 128, 8 PSQT columns and layer stacks, 86,896 inputs, on a
    little-endian machine."""
    import sys

    L1 = net.arch.get("hidden", 1)
    if net.arch.get("kind") != "sfnnv16" or not isinstance(L1, int) or L1 <= 0 or L1 % _LANES \
            or sys.byteorder != "little":
        return False
    specs = type(net).tensor_specs(net.arch)   # the net's own class: this module imports no evaluator
    return (all(getattr(net, k).dtype == dt and tuple(getattr(net, k).shape) == shape
                for k, (dt, shape) in specs.items())
            and tuple(net.fc0_weight.shape) == (8, 32, L1) and tuple(net.fc1_weight.shape) == (8, 32, 64)
            and tuple(net.fc2_weight.shape) == (8, 1, 128) and tuple(net.threat_psqt.shape) == (_INT8_INPUTS, 8)
            and net.threat_weight.shape[0] + net.ft_weight.shape[0] == _NUM_INPUTS)


def _pairs(t: torch.Tensor) -> np.ndarray:
    """(S, M, K) -> (S, K // 2, M, 2) int16: a layer's weights in input pairs (:func:`gemv_pairs`)."""
    s, m, k = t.shape
    return np.ascontiguousarray(t.reshape(s, m, k // 2, 2).permute(0, 2, 1, 3).numpy().astype(np.int16))


def _prepared(net):
    """The net's arguments of :func:`_eval_lists_sf16`, made once per net (again when a tensor is
    replaced or changed in place); None when :func:`applicable` says no."""
    def build(w8, w16, ftb, p8, p16, w0, bb0, w1, bb1, ww2, bb2):
        if not applicable(net):
            return None
        i64 = lambda t: np.ascontiguousarray(t.numpy().astype(np.int64))  # noqa: E731
        return (aligned64(w8.numpy()), aligned64(w16.numpy()), aligned64(ftb.numpy()),
                np.ascontiguousarray(p8.numpy()), np.ascontiguousarray(p16.numpy()),
                _pairs(w0), i64(bb0), _pairs(w1), i64(bb1), i64(ww2[:, 0]), i64(bb2[:, 0]))
    return cached(net, "compiled_sf16", (net.threat_weight, net.ft_weight, net.ft_bias, net.threat_psqt, net.psqt,
                                         net.fc0_weight, net.fc0_bias, net.fc1_weight, net.fc1_bias,
                                         net.fc2_weight, net.fc2_bias), build)


def values_sfnnv16(net, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor | None:
    """Stockfish 19's internal values ``psqt + positional`` (stm POV; the integers of
    :func:`nnue.inference.kinds.sfnnv16.value_from_indices`) of feature indices: stm, nstm (N, A)
    int32/int64 CPU tensors, −1 (any negative value) = padding, bucket (N,) integer layer stacks
    0..7 -> (N,) int64. None when :func:`applicable` says no. Raises ValueError for an index
    beyond the 86,896 inputs, a bucket outside 0..7 or shapes that disagree. Never raises on
    overflow: every sum wraps as the engine's do."""
    prep = _prepared(net)
    if prep is None:
        return None
    if stm.dim() != 2 or stm.shape != nstm.shape or bucket.shape != (stm.shape[0],):
        raise ValueError(f"sfnnv16 indices: stm {tuple(stm.shape)}, nstm {tuple(nstm.shape)} and bucket "
                         f"{tuple(bucket.shape)} must be (N, A), (N, A) and (N,)")
    n = stm.shape[0]
    out = np.empty(n, np.int64)
    if n == 0:
        return torch.from_numpy(out)
    hi = max(int(stm.max()), int(nstm.max())) if stm.numel() else -1
    if hi >= _NUM_INPUTS:
        raise ValueError(f"feature index {hi} out of range {_NUM_INPUTS}")
    if int(bucket.min()) < 0 or int(bucket.max()) > 7:
        raise ValueError(f"sfnnv16 layer stack {int(bucket.min())}..{int(bucket.max())} outside 0..7")
    s = stm.clamp(min=-1).to(torch.int32).contiguous().numpy()
    t = nstm.clamp(min=-1).to(torch.int32).contiguous().numpy()
    _eval_lists_sf16(s, t, bucket.to(torch.int64).contiguous().numpy(), *prep, out)
    return torch.from_numpy(out)
