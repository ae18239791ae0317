"""The deep kind's compiled (numba) kernel: one pass per position from the packed board to the
output sum of its own output bucket.

Steps 1–3 are :mod:`nnue.inference.compiled`'s (decode, feature lookup, register-held feature
transformer); then the u8 L0 activations of :mod:`nnue.inference.kinds.deep` and each dense
layer of the position's own bucket: ``s = b + W·x`` with int16 inputs and int8 weights, in int32
vector lanes (:func:`nnue.inference.compiled.gemv_pairs`: pairs of inputs against
pair-interleaved weights, 16 outputs a register, four accumulators) where K·255·128 < 2^31
proves that no partial sum wraps, else in int64; every sum checked against int32, floor-shifted
by log2(QB) and activated (crelu, screlu; other hidden activations and gated units take the
torch path). Where the net's weights and biases prove that no sum of a layer can leave int32
(Σ|w|·max x + |b| < 2^31 for every output, per net), that layer skips the int64 sums and the
check; L1 then runs over the nonzero input pairs only (:func:`nnue.inference.compiled.gemv_pairs_nz`:
pairwise L0 outputs are mostly zero, 56% of the pairs in the bench's net) and the output layer as
one block of 16 outputs with 15 zero rows. Measured side by side in one process on the bench's
deep net (4,096 positions, one core): 2.78 ms before these three, 2.44 ms after.

Imported on first use by :mod:`nnue.inference.kinds.deep` (through
:func:`nnue.inference.backends.kernels`), which falls back to its torch steps when numba is
missing or :func:`applicable` says no; this module imports no evaluator.
"""
from __future__ import annotations

import numpy as np
import torch
from numba import njit

from nnue.spec import activations as acts

from ...compiled import (ACT_CODES, accumulate, board_words, bucket_lut, gemv_pairs, gemv_pairs_nz, leaves_int16,
                         lookup, raise_status, scratch, table_of)
from ...exact import cached

#: hidden activation codes (after L1 and L2) of the deep kernel: crelu ``clamp(y, 0, QA)``,
#: screlu ``clamp(y, 0, QA)² >> l0_shift`` (:mod:`nnue.spec.activations`); others take torch
HIDDEN_CODES = {"crelu": 0, "screlu": 1}


@njit(cache=True, nogil=True, inline="always")
def _dense_layer(x, w, wp, bias, dots, sums, out, narrow, shift, code, qa, l0_shift, status, what):
    """One bucket's dense layer and its activation: ``s[n] = bias[n] + Σ_j w[n, j]·x[j]``,
    checked against int32 (status (what, s, s) and False when one leaves), then
    ``out[n] = act(s[n] >> shift)`` (floor shift), act a HIDDEN_CODES rule; code −1: out[n] =
    s[n]. x (K,) int16; w (M, K) int16 (the int8 weights) and wp the same in input pairs
    (:func:`gemv_pairs`); dots (≥ M,) int32 and sums (≥ M,) int64 scratch. ``narrow`` 2: the
    caller's bound max_n Σ_j |w[n, j]|·max x + |bias[n]| < 2^31 holds, so no sum can leave
    int32: bias + the int32-lane dot product, activated, no int64 sums and no check (M a
    multiple of 16 and K even; otherwise as 1 without the check). ``narrow`` 1: the
    caller's bound K·max|x|·128 < 2^31 holds, so the dot products run in int32 lanes
    (:func:`gemv_pairs`; every partial sum below 2^31, no wrap) and the bias is added in int64;
    otherwise, and for fewer than 16 outputs (the output layer: one row, a plain loop LLVM
    vectorizes), each whole sum is int64. The check and the activation run as separate loops
    without early exits, so that LLVM vectorizes them too (one loop with the check inside ran
    element by element: ~10 cycles an output)."""
    m, k = w.shape
    if narrow == 2 and m % 16 == 0 and k % 2 == 0:  # proven within int32: no int64 sums, no check
        gemv_pairs(x, wp, dots)
        if code < 0:
            for n in range(m):
                out[n] = bias[n] + dots[n]
        elif code == 1:
            for n in range(m):
                v = min(max((bias[n] + dots[n]) >> shift, 0), qa)
                out[n] = (v * v) >> l0_shift
        else:
            for n in range(m):
                out[n] = min(max((bias[n] + dots[n]) >> shift, 0), qa)
        return True
    if narrow and m >= 16:
        gemv_pairs(x, wp, dots)
        for n in range(m):
            t = np.int64(bias[n])
            if n >= m - m % 16:
                for j in range(k - k % 2):
                    t += np.int64(x[j]) * np.int64(w[n, j])
            else:
                t += dots[n]
            if k % 2:
                t += np.int64(x[k - 1]) * np.int64(w[n, k - 1])
            sums[n] = t
    else:
        for n in range(m):
            row = w[n]
            t = np.int64(bias[n])
            for j in range(k):
                t += np.int64(x[j]) * np.int64(row[j])
            sums[n] = t
    lo = np.int64(0)
    hi = np.int64(0)
    for n in range(m):
        lo = min(lo, sums[n])
        hi = max(hi, sums[n])
    if narrow < 2 and (lo < -2147483648 or hi > 2147483647):
        t = lo if lo < -2147483648 else hi
        status[0], status[1], status[2] = what, t, t
        return False
    if code < 0:
        for n in range(m):
            out[n] = sums[n]
    elif code == 1:
        for n in range(m):
            v = min(max(sums[n] >> shift, 0), qa)
            out[n] = (v * v) >> l0_shift
    else:
        for n in range(m):
            out[n] = min(max(sums[n] >> shift, 0), qa)
    return True



@njit(cache=True, nogil=True, inline="always")
def _l1_out(dots, bias, out, code, shift, qa, l0_shift):
    """``out[n] = act((bias[n] + dots[n]) >> shift)`` for a layer proven within int32 (the
    activation of :func:`_dense_layer`'s first branch)."""
    if code == 1:
        for n in range(out.shape[0]):
            v = min(max((bias[n] + dots[n]) >> shift, 0), qa)
            out[n] = (v * v) >> l0_shift
    else:
        for n in range(out.shape[0]):
            out[n] = min(max((bias[n] + dots[n]) >> shift, 0), qa)



@njit(cache=True, nogil=True)
def _eval_boards(words, table, king_rel, bucket_of, l0w, l0b, act, qa, l0_shift, check,
                 l1w, l1t, l1b, h1, l2w, l2t, l2b, h2, outw, outt, outb, shift, narrow, acc, x0, x1, x2,
                 out, bucket, status):
    """Deep nets (:mod:`nnue.inference.kinds.deep`, steps 1–6 of its docstring) for every board:
    out[i] = the output sum of board i (bias included, before the centipawn scaling), bucket[i]
    its output bucket.

    words (N, 4) uint64 (:func:`nnue.inference.compiled.board_words`); table, king_rel
    (:func:`nnue.inference.compiled.table_of`); bucket_of (65,) int64 (the output bucket of each
    piece count); l0w (F, H) int16; l0b (H,) int16; act: the L0 activation (ACT_CODES); qa: QA;
    check: range-check the accumulators (int32 ``acc``); l0_shift: the scheme's shift of the L0
    products; l1w (B, N1, L1), l2w (B, N2, N1), outw (B, 1, N2) int16 (the int8 weights) and
    l1t, l2t, outt the same in input pairs (B, K // 2, M, 2); l1b (B, N1), l2b (B, N2), outb
    (B, 1) int64; h1, h2: HIDDEN_CODES of the activations after L1 and L2; shift: the dense
    shift log2(QB); narrow: (3,) int64, each layer's mode 0 / 1 / 2 (:func:`_dense_layer`; 2
    also selects the sparse L1 and the padded output layer; outt holds the output weights padded
    to 16 rows); acc (2, H) scratch (:func:`nnue.inference.compiled.scratch`); x0 (L1,), x1
    (N1,), x2 (N2,) int16 scratch; out, bucket (N,) int64. status (3,) int64: the codes of
    :func:`nnue.inference.compiled.raise_status`, and (4, max, ·) an L0 activation above 255
    (u8), (5 / 6 / 7, s, s) an L1 / L2 / output sum outside int32. Every sum is an exact
    int64: |x| ≤ 2^30 and |w| ≤ 2^7 over fewer than 2^17 inputs."""
    n = words.shape[0]
    keys = np.empty(32, np.int32)
    idx0 = np.empty(32, np.int32)
    idx1 = np.empty(32, np.int32)
    h = l0w.shape[1]
    half = h // 2
    o = np.empty(1, np.int64)
    npairs = x0.shape[0] // 2
    xp32 = x0[:2 * npairs].view(np.int32)  # the input pairs of L1 as one int32 each (zero: both zero)
    pidx = np.empty(max(npairs, 1), np.int32)
    sparse_l1 = l1w.shape[1] % 16 == 0 and x0.shape[0] % 2 == 0
    dots = np.empty(max(l1w.shape[1], l2w.shape[1], 16), np.int32)
    sums = np.empty(max(l1w.shape[1], l2w.shape[1], 1), np.int64)
    for i in range(n):
        ns, m0, m1 = lookup(words, i, table, king_rel, keys, idx0, idx1, status)
        if ns < 0:
            return
        a0, a1 = acc[0], acc[1]
        accumulate(a0, l0w, l0b, idx0, m0)
        accumulate(a1, l0w, l0b, idx1, m1)
        if check and leaves_int16(a0, a1, status):
            return
        top = 0
        for p in range(2):
            a = a0 if p == 0 else a1
            if act == 2:
                for j in range(half):
                    v = np.int32(min(max(a[j], 0), qa)) * np.int32(min(max(a[j + half], 0), qa))
                    v >>= l0_shift
                    x0[p * half + j] = v
                    top = max(top, v)
            else:
                for j in range(h):
                    v = np.int32(min(max(a[j], 0), qa))
                    if act == 1:
                        v = (v * v) >> l0_shift
                    x0[p * h + j] = v
                    top = max(top, v)
        if top > 255:
            status[0], status[1] = 4, top
            return
        b = bucket_of[ns]
        bucket[i] = b
        if narrow[0] == 2 and sparse_l1:
            # L1 over the input pairs that are not both zero (pairwise L0 outputs are mostly zero);
            # the list built without branches: each pair index stored, the count advanced when nonzero
            # (LLVM's masked.compressstore, vpcompressd to memory, measured slower here: 3.09 ms
            # against 2.58 ms per 4,096 positions on the bench machine's AMD EPYC)
            c = 0
            for p in range(npairs):
                pidx[c] = p
                c += xp32[p] != 0
            gemv_pairs_nz(x0, l1t[b], dots, pidx, c)
            _l1_out(dots, l1b[b], x1, h1, shift, qa, l0_shift)
        elif not _dense_layer(x0, l1w[b], l1t[b], l1b[b], dots, sums, x1, narrow[0], shift, h1, qa, l0_shift,
                              status, 5):
            return
        if not _dense_layer(x1, l2w[b], l2t[b], l2b[b], dots, sums, x2, narrow[1], shift, h2, qa,
                            l0_shift, status, 6):
            return
        if narrow[2] == 2 and x2.shape[0] % 2 == 0:  # one block of 16 outputs, 15 of them zero rows
            gemv_pairs(x2, outt[b], dots)
            o[0] = outb[b, 0] + dots[0]
        elif not _dense_layer(x2, outw[b], outt[b], outb[b], dots, sums, o, narrow[2], shift, -1, qa,
                              l0_shift, status, 7):
            return
        out[i] = o[0]
    status[0] = 0



# ------------------------------------------------------------------------------------- host side

def _hidden_max(name: str, scheme) -> int:
    """The largest output of the hidden activation ``name`` (HIDDEN_CODES): crelu QA, screlu
    QA² >> l0_shift."""
    return scheme.qa if name == "crelu" else (scheme.qa * scheme.qa) >> scheme.l0_shift


def applicable(net, l2_act: str) -> bool:
    """Whether :func:`_eval_boards` computes ``net``'s evals exactly: a deep net whose L0
    activation is in :data:`ACT_CODES`, whose activations after L1 and L2 (``l2_act``:
    :func:`nnue.inference.kinds.deep.l2_activation`, passed in) are in
    :data:`HIDDEN_CODES` (not gated: l2w has N2 rows) with outputs within int16 (the kernel's
    activations are int16), 0 < QA ≤ 2^15, fewer than 2^17 L1 inputs, int16
    feature-transformer and int8 dense weights."""
    a = net.arch
    return (a.get("activation") in ACT_CODES
            and a.get("hidden_activation") in HIDDEN_CODES and l2_act in HIDDEN_CODES
            and 0 < net.scheme.qa <= 1 << 15 and 0 < net.l1w.shape[2] < 1 << 17
            and max(_hidden_max(a["hidden_activation"], net.scheme), _hidden_max(l2_act, net.scheme)) <= 32767
            and net.l1w.shape[2] == acts.l1_inputs(a["activation"], net.l0w.shape[1])
            and net.l2w.shape[1] == a["l2_outputs"] and net.l0w.dtype == torch.int16
            and all(t.dtype == torch.int8 for t in (net.l1w, net.l2w, net.outw)))


def prepared(net, l2_act: str):
    """The arguments of :func:`_eval_boards` besides the boards and the scratch, made once
    per net: ``(args, acc_dtype, (L1, N1, N2))``; None when it does not apply."""
    def build(l0w, l0b, l1w, l1b, l2w, l2b, outw, outb):
        tab = table_of(net, net.l0w)
        if tab is None or not applicable(net, l2_act):
            return None
        table, king_rel, width = tab
        acc, check = scratch(net, width)
        i16 = lambda t: np.ascontiguousarray(t.numpy().astype(np.int16))  # noqa: E731
        def t16(t):  # (B, M, K) -> (B, K // 2, M, 2): the weights in input pairs (gemv_pairs)
            b, m, k = t.shape
            return np.ascontiguousarray(t[:, :, :k - k % 2].reshape(b, m, k // 2, 2).permute(0, 2, 1, 3)
                                        .numpy().astype(np.int16))
        i64 = lambda t: np.ascontiguousarray(t.numpy().astype(np.int64))  # noqa: E731
        s, a = net.scheme, net.arch
        h1, h2 = a["hidden_activation"], l2_act
        # int32 dot products where K·max|x|·128 < 2^31 (x0 ≤ 255 is checked in the kernel)
        # and 2 where, besides, the weights and biases prove every sum within int32 (max over
        # outputs of Σ|w|·max x + |b| < 2^31): the layer then skips its int64 sums and checks
        def mode(w, b, k, x_max):
            if k * x_max * 128 >= 1 << 31:
                return 0
            bound = int((w.long().abs().sum(2) * x_max + b.long().abs()).max()) if w.numel() else 0
            return 2 if bound < 1 << 31 else 1
        narrow = np.array([mode(l1w, l1b, l1w.shape[2], 255), mode(l2w, l2b, l1w.shape[1], _hidden_max(h1, s)),
                           mode(outw.unsqueeze(1), outb.unsqueeze(1), l2w.shape[1], _hidden_max(h2, s))], np.int64)
        args = (table, king_rel, bucket_lut(net), np.ascontiguousarray(l0w.numpy()),
                np.ascontiguousarray(l0b.numpy()), ACT_CODES[a["activation"]], s.qa, s.l0_shift, check,
                i16(l1w), t16(l1w), i64(l1b), HIDDEN_CODES[h1], i16(l2w), t16(l2w), i64(l2b), HIDDEN_CODES[h2],
                i16(outw.unsqueeze(1)), t16(torch.cat([outw.unsqueeze(1), outw.new_zeros(outw.shape[0], 15, outw.shape[1])], 1)),
                i64(outb.unsqueeze(1)), s.dense_shift, narrow)
        return args, acc.dtype, (l1w.shape[2], l1w.shape[1], l2w.shape[1])
    return cached(net, ("compiled_deep", net.arch.get("feature_set"), net.arch.get("activation"),
                        net.arch.get("hidden_activation"), l2_act),
                  (net.l0w, net.l0b, net.l1w, net.l1b, net.l2w, net.l2b, net.outw, net.outb), build)


_WHAT = {5: "L1 sum", 6: "L2 sum", 7: "output sum"}


def output_sums(net, boards: torch.Tensor, l2_act: str):
    """``(out, bucket)``, each (N,) int64: a deep net's output sum (bias included, before the
    centipawn scaling, :func:`nnue.inference.exact.to_centipawns`) of each packed board (N, 32)
    uint8 (CPU) and its output bucket (``l2_act``: the activation after L2,
    :func:`nnue.inference.kinds.deep.l2_activation`); None when :func:`applicable` or
    :func:`table_of` says no. Raises what :func:`nnue.inference.compiled.raise_status` raises,
    OverflowError for an L0 activation above u8 and for an L1, L2 or output sum outside int32 (naming which, as
    :func:`nnue.inference.kinds.deep.dense_int` does)."""
    prep = prepared(net, l2_act)
    if prep is None:
        return None
    args, acc_dtype, (k, n1, n2) = prep
    n = boards.shape[0]
    out, bucket = np.empty(n, np.int64), np.empty(n, np.int64)
    status = np.zeros(3, np.int64)
    acc = np.empty((2, net.l0w.shape[1]), acc_dtype)
    _eval_boards(board_words(boards), *args, acc, np.empty(k, np.int16), np.empty(n1, np.int16), np.empty(n2, np.int16),
                      out, bucket, status)
    if status[0] == 4:
        s = net.scheme
        raise OverflowError(f"L0 activation leaves u8 (up to {int(status[1])}): qa {s.qa} with "
                            f"l0_shift {s.l0_shift} does not fit")
    if status[0] in _WHAT:
        v = int(status[1])
        raise OverflowError(f"{_WHAT[int(status[0])]} leaves the int32 range ({v}..{v})")
    if status[0]:
        raise_status(status, "output_sums")
    return torch.from_numpy(out), torch.from_numpy(bucket)

