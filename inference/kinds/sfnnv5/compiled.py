"""The sfnnv5 kind's compiled (numba) kernel: Stockfish 15.1's net (:mod:`nnue.inference.kinds.sfnnv5`,
its steps 1–7) in one pass per board, from the packed board to the engine's internal value.

Every sum the engine wraps is computed modulo its width, which needs no bound at all: addition
and multiplication modulo 2^k do not depend on the order or on intermediate wraps, so

* the feature transformer sums in int16 register lanes with wrapping adds
  (:func:`nnue.inference.compiled.rows_sum`) are the engine's int16 accumulators bit for bit,
  whatever the weights;
* each layer's dot product in int32 lanes (:func:`nnue.inference.compiled.gemv_pairs`, wrapping
  adds of exact int16 × int16 products) is the true dot product modulo 2^32, so
  ``wrap32(bias + dots)`` is the engine's int32 sum (the torch path computes the exact sum and
  wraps it: the same integer);
* the PSQT sums of the position's own bucket are exact in int64 (at most 32 terms below 2^31)
  and wrapped once.

Imported on first use by :mod:`nnue.inference.kinds.sfnnv5` (through
:func:`nnue.inference.backends.kernels`), which falls back to its torch steps when numba is
missing or :func:`applicable` says no; this module imports no evaluator.
"""
from __future__ import annotations

import numpy as np
import torch
from numba import njit

from ...compiled import accumulate, aligned64, board_words, gemv_pairs, lookup, raise_status, table_of, tdiv, wrap32
from ...exact import cached


@njit(cache=True, nogil=True)
def _eval_boards(words, table, bucket_of, ftw, ftb, psqt, t0, b0, t1, b1, w2, b2, acc, x0, x1, dots,
                    out, bucket, status):
    """Steps 1–7 of :mod:`nnue.inference.kinds.sfnnv5` for every board: out[i] = the engine's internal
    value (``NNUE::evaluate(pos, false)``, stm POV, before the centipawn scaling), bucket[i] the
    layer stack.

    words (N, 4) uint64 (:func:`nnue.inference.compiled.board_words`), table
    (:func:`nnue.inference.compiled.table_of`: HalfKAv2_hm, king-relative); bucket_of
    (65,) int64; ftw (F, L1) int16; ftb (L1,) int16; psqt (F, 8) int32; t0 (8, L1 // 2, 16, 2),
    t1 (8, 16, 32, 2) int16: fc_0's and fc_1's int8 weights in input pairs (:func:`gemv_pairs`);
    b0 (8, 16), b1 (8, 32) int64; w2 (8, 32) int64 and b2 (8,) int64: fc_2; acc (2, L1) int16,
    x0 (L1,) int16, x1 (32,) int16, dots (32,) int32 scratch; out, bucket (N,) int64. status: the codes of
    :func:`nnue.inference.compiled.raise_status` (1 and 3; nothing overflows: every sum wraps as the engine's)."""
    n = words.shape[0]
    keys = np.empty(32, np.int32)
    idx0 = np.empty(32, np.int32)
    idx1 = np.empty(32, np.int32)
    s0 = np.empty(16, np.int64)
    x2 = np.empty(32, np.int64)
    half = ftw.shape[1] // 2
    for i in range(n):
        ns, m0, m1 = lookup(words, i, table, True, keys, idx0, idx1, status)
        if ns < 0:
            return
        a0, a1 = acc[0], acc[1]
        accumulate(a0, ftw, ftb, idx0, m0)  # int16 lanes: wrapping adds, the engine's accumulator
        accumulate(a1, ftw, ftb, idx1, m1)
        b = bucket_of[ns]
        bucket[i] = b
        p0 = np.int64(0)
        for s in range(m0):
            p0 += psqt[idx0[s], b]
        p1 = np.int64(0)
        for s in range(m1):
            p1 += psqt[idx1[s], b]
        # step 2: clamp(a[j], 0, 127)·clamp(a[j + L1/2], 0, 127) / 128, stm's half first
        for j in range(half):
            x0[j] = (np.int32(min(max(a0[j], 0), 127)) * np.int32(min(max(a0[j + half], 0), 127))) >> 7
        for j in range(half):
            x0[half + j] = (np.int32(min(max(a1[j], 0), 127)) * np.int32(min(max(a1[j + half], 0), 127))) >> 7
        # step 4: fc_0 and its two activations (SqrClippedReLU, ClippedReLU), 30 inputs + 2 zeros
        gemv_pairs(x0, t0[b], dots)
        for k in range(16):
            s0[k] = wrap32(b0[b, k] + np.int64(dots[k]))
        for k in range(15):
            h = s0[k]
            x1[k] = min((h * h) >> 19, 127)
            x1[15 + k] = min(max(h >> 6, 0), 127)
        x1[30] = 0
        x1[31] = 0
        # step 5: fc_1, ClippedReLU
        gemv_pairs(x1, t1[b], dots)
        for k in range(32):
            x2[k] = min(max(wrap32(b1[b, k] + np.int64(dots[k])) >> 6, 0), 127)
        # step 6: fc_2 and the skip from fc_0's 16th output
        t = b2[b]
        for k in range(32):
            t += w2[b, k] * x2[k]
        fwd = tdiv(wrap32(s0[15] * 9600), 8128)
        positional = t + fwd  # the engine wraps s2 and this sum to int32: implied by the wrap below
        # step 7: the PSQT difference of the bucket's column, then (psqt + positional) / 16
        ps = tdiv(wrap32(p0 - p1), 2)
        out[i] = tdiv(wrap32(ps + positional), 16)
    status[0] = 0



# ------------------------------------------------------------------------------------- host side

def applicable(net) -> bool:
    """Whether :func:`_eval_boards` evaluates ``net``: an sfnnv5 net whose tensors have the
    dtypes and shapes of :meth:`~nnue.inference.kinds.sfnnv5.SFNNv5IntegerNet.tensor_specs` with an
    even L1 (fc_0: 16 outputs; fc_1: 32 × 32; fc_2: 1 × 32; 8 PSQT columns and layer stacks)."""
    if net.arch.get("hidden", 1) % 2:
        return False
    specs = type(net).tensor_specs(net.arch)  # the net's own class: this module imports no evaluator
    return (all(getattr(net, k).dtype == dt and tuple(getattr(net, k).shape) == shape
                for k, (dt, shape) in specs.items())
            and tuple(net.fc0_weight.shape[:2]) == (8, 16) and tuple(net.fc1_weight.shape[1:]) == (32, 32)
            and tuple(net.fc2_weight.shape[1:]) == (1, 32) and tuple(net.psqt.shape[1:]) == (8,))



def prepared(net):
    """The arguments of :func:`_eval_boards` besides the boards and the scratch, made once per
    net (again when a tensor is replaced or changed in place); None when it does not apply."""
    def build(ftw, ftb, psqt, w0, b0, w1, b1, w2, b2):
        tab = table_of(net, ftw, king_relative=True)
        if tab is None or not applicable(net):
            return None
        table = tab[0]

        def pairs(t):  # (S, M, K) -> (S, K // 2, M, 2) int16: the weights in input pairs (gemv_pairs)
            s, m, k = t.shape
            return np.ascontiguousarray(t.reshape(s, m, k // 2, 2).permute(0, 2, 1, 3).numpy().astype(np.int16))
        i64 = lambda t: np.ascontiguousarray(t.numpy().astype(np.int64))  # noqa: E731
        lut = np.ascontiguousarray(net.buckets.of_piece_count(torch.arange(65, dtype=torch.int64)).numpy())
        return (table, lut, aligned64(ftw.numpy()), aligned64(ftb.numpy()), aligned64(psqt.numpy()), pairs(w0), i64(b0), pairs(w1), i64(b1), i64(w2[:, 0]),
                i64(b2[:, 0]))
    return cached(net, "compiled_sf", (net.ft_weight, net.ft_bias, net.psqt, net.fc0_weight, net.fc0_bias,
                                       net.fc1_weight, net.fc1_bias, net.fc2_weight, net.fc2_bias), build)


def values(net, boards: torch.Tensor):
    """``(values, bucket)``, each (N,) int64: Stockfish 15.1's internal value
    (``NNUE::evaluate(pos, false)``, stm POV; :func:`nnue.inference.kinds.sfnnv5.values` gives the
    same integers) and the layer stack of each packed board (N, 32) uint8 (CPU); None when
    :func:`applicable` says no or the feature set has no king-relative table. Raises
    ValueError for a board without exactly one king a side or with an unused piece code, or
    with more than 32 occupied squares, naming its row. Never raises on overflow: every sum
    wraps as the engine's do."""
    prep = prepared(net)
    if prep is None:
        return None
    n, h = boards.shape[0], net.ft_weight.shape[1]
    out, bucket = np.empty(n, np.int64), np.empty(n, np.int64)
    status = np.zeros(3, np.int64)
    _eval_boards(board_words(boards), *prep, np.empty((2, h), np.int16), np.empty(h, np.int16), np.empty(32, np.int16),
                    np.empty(32, np.int32), out, bucket, status)
    if status[0]:
        raise_status(status, "values")
    return torch.from_numpy(out), torch.from_numpy(bucket)
