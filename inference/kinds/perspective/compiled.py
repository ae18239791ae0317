"""The perspective kind's compiled (numba) kernels: one pass per position from the packed board
(or the index lists) to the L1 sum of its own output bucket, the feature transformer's
accumulators held in SIMD registers (:mod:`nnue.inference.compiled`, steps 1–3 of its docstring).

Step 4, per position: the activation and the L1 sum of the position's own bucket,
``Σ_k x_k·l1w[b][k]`` with x the rule of :mod:`nnue.inference.kinds.perspective` (crelu v,
screlu v², pairwise v[j]·v[j + H/2]; v = clamp(acc, 0, QA)), in int64: each product |x·w| ≤
QA²·2^15 and the sum of K of them stays far below 2^63 for QA ≤ 2^15 and K < 2^17
(:func:`applicable` checks both).

The int32 checks, the division by QA, the bias and the centipawn scaling are then the kind's
``output`` rule, in torch, on the (N,) int64 sums (or on Python ints: :func:`evaluate_small`).
Nothing is sorted: each position computes only its own bucket. Imported on first use by
:mod:`nnue.inference.kinds.perspective` (through :func:`nnue.inference.backends.kernels`), which
falls back to its torch steps when numba is missing or :func:`applicable` says no; this module
imports no evaluator.
"""
from __future__ import annotations

import numpy as np
import torch
from numba import njit

from nnue.spec import activations as acts

from ...compiled import (ACT_CODES, accumulate, board_words, bucket_lut, leaves_int16, lookup, raise_status,
                         scratch, table_of)
from ...exact import cached


@njit(cache=True, nogil=True, inline="always")
def _l1_sum(acc0, acc1, w, act, qa):
    """Σ_k x_k·w[k] in int64, x the perspective L1 input of the stm accumulator acc0 then the
    nstm accumulator acc1 (:mod:`nnue.inference.kinds.perspective.net`): crelu v, screlu v², pairwise
    v[j]·v[j + H/2]; v = clamp(acc, 0, qa)."""
    h = acc0.shape[0]
    tot = np.int64(0)
    if act == 2:
        half = h // 2
        for p in range(2):
            a = acc0 if p == 0 else acc1
            base = p * half
            for j in range(half):
                v = np.int64(min(max(a[j], 0), qa))
                u = np.int64(min(max(a[j + half], 0), qa))
                tot += v * u * w[base + j]
    else:
        for p in range(2):
            a = acc0 if p == 0 else acc1
            base = p * h
            for j in range(h):
                v = np.int64(min(max(a[j], 0), qa))
                x = v * v if act == 1 else v
                tot += x * w[base + j]
    return tot



@njit(cache=True, nogil=True)
def _eval_boards(words, table, king_rel, bucket_of, l0w, l0b, l1w, act, qa, check, acc, out, bucket, status, upto):
    """Steps 1–4 (:mod:`nnue.inference.compiled`, then this module's docstring) for every board:
    out[i] = the L1 sum of board i, bucket[i] its output bucket.

    words (N, 4) uint64: the packed boards (N, 32) uint8 read as little-endian words (word 0 the
    occupancy, words 1–2 the 32 piece nibbles, low nibble first, byte 24 = the low byte of word
    3: bit 7 black to move); table (2·K·1040,) int32 (TableEncoder.table_cpu, values < F);
    king_rel: the table is king-relative (K = 64) or not (K = 1); bucket_of (65,) int64: the
    output bucket of each piece count (the popcount of the occupancy); l0w (F, H) int16; l0b
    (H,) int16; l1w (B, L1) int64; act: ACT_CODES; qa: QA; check: range-check the accumulators
    (int32 ``acc``); acc (2, H) int16 or int32 scratch; out, bucket (N,) int64; upto: 0 every
    step, 1 or 2 stop after step 2 or 3 (``nnue bench infer --profile``: out then holds a value
    that depends on the work done, nothing else). status (3,) int64 on return: (0, ·, ·) done;
    (1, i, ·) board i has not exactly one king a side or an unused piece code (king-relative
    sets only); (2, lo, hi) an accumulator left int16 (its min and max); (3, i, ·) board i has
    more than 32 occupied squares (the format holds 32 piece codes); the kernel stops at the
    first such board."""
    n = words.shape[0]
    keys = np.empty(32, np.int32)
    idx0 = np.empty(32, np.int32)
    idx1 = np.empty(32, np.int32)
    for i in range(n):
        ns, m0, m1 = lookup(words, i, table, king_rel, keys, idx0, idx1, status)
        if ns < 0:
            return
        if upto == 1:
            out[i] = idx0[m0 - 1] + idx1[m1 - 1] if m0 and m1 else m0
            continue
        a0, a1 = acc[0], acc[1]
        accumulate(a0, l0w, l0b, idx0, m0)
        accumulate(a1, l0w, l0b, idx1, m1)
        if check and leaves_int16(a0, a1, status):
            return
        if upto == 2:
            out[i] = a0[0] + a1[a1.shape[0] - 1]
            continue
        b = bucket_of[ns]
        bucket[i] = b
        out[i] = _l1_sum(a0, a1, l1w[b], act, qa)
    status[0] = 0



@njit(cache=True, nogil=True)
def _eval_lists(stm, nstm, l0w, l0b, l1w, bucket, act, qa, check, acc, out, accs, status):
    """:func:`_eval_boards` from index lists: stm, nstm (N, A) int32, any negative value =
    padding (anywhere in a list), every other value < F (the caller checks); accs: (N, 2, H)
    int32 to receive the accumulators, or (0, 2, H) for none. status as :func:`_eval_boards`
    (code 1 unused)."""
    n, width = stm.shape
    idx0 = np.empty(max(width, 1), np.int32)
    idx1 = np.empty(max(width, 1), np.int32)
    keep = accs.shape[0] > 0
    for i in range(n):
        m0 = 0
        m1 = 0
        for s in range(width):
            f = stm[i, s]
            if f >= 0:
                idx0[m0] = f
                m0 += 1
            f = nstm[i, s]
            if f >= 0:
                idx1[m1] = f
                m1 += 1
        a0, a1 = acc[0], acc[1]
        accumulate(a0, l0w, l0b, idx0, m0)
        accumulate(a1, l0w, l0b, idx1, m1)
        if check and leaves_int16(a0, a1, status):
            return
        if keep:
            for c in range(a0.shape[0]):
                accs[i, 0, c] = a0[c]
                accs[i, 1, c] = a1[c]
        out[i] = _l1_sum(a0, a1, l1w[bucket[i]], act, qa)
    status[0] = 0



# ------------------------------------------------------------------------------------- host side

def applicable(net) -> bool:
    """Whether these kernels compute ``net``'s L1 sums exactly: a perspective net (the only kind
    this module is handed) with an
    activation of :data:`ACT_CODES`, 0 < QA ≤ 2^15 (each product |x·w| ≤ 2^30·2^15 = 2^45) and
    fewer than 2^17 L1 inputs (so |Σ| < 2^62), int16 weights. The caller keeps the int32 checks."""
    act = net.arch.get("activation")
    return (act in ACT_CODES
            and 0 < net.scheme.qa <= 1 << 15 and 0 < net.l1w.shape[1] < 1 << 17
            and net.l0w.dtype == torch.int16 and net.l0b.dtype == torch.int16
            and net.l1w.shape[1] == acts.l1_inputs(act, net.l0w.shape[1]))



def _arrays(net) -> dict:
    """The net's tensors as the kernels take them, made once per net (:func:`~nnue.inference.exact.cached`)."""
    def build(l0w, l0b, l1w):
        return {"l0w": np.ascontiguousarray(l0w.numpy()), "l0b": np.ascontiguousarray(l0b.numpy()),
                "l1w": np.ascontiguousarray(l1w.numpy().astype(np.int64))}
    return cached(net, "compiled_arrays", (net.l0w, net.l0b, net.l1w), build)



def _prepared(net):
    """Everything :func:`_eval_boards` takes for ``net`` besides the boards, in one cached tuple
    (one :func:`~nnue.inference.exact.cached` lookup a call, which matters for one position):
    ``(args, acc_dtype, l1b)`` with ``args`` = (table, king_rel, bucket_of, l0w, l0b, l1w, act,
    qa, check) and ``l1b`` the L1 biases as Python ints; None when the kernels do not apply."""
    d = net.__dict__
    hit = d.get("_compiled_prepared")  # the fast check first: ~0.5 µs against ~3 µs for cached()
    if hit is not None and hit[0] is net.l0w and hit[1] is net.l0b and hit[2] is net.l1w and hit[3] is net.l1b \
            and hit[4] == (net.l0w._version, net.l0b._version, net.l1w._version, net.l1b._version):
        return hit[5]
    key = ("compiled_prepared", net.arch.get("feature_set"), net.arch.get("activation"), net.scheme.qa)

    def build(l0w, l0b, l1w, l1b):
        tab = table_of(net, net.l0w)
        if tab is None or not applicable(net):
            return None
        table, king_rel, width = tab
        a = _arrays(net)
        acc, check = scratch(net, width)
        args = (table, king_rel, bucket_lut(net), a["l0w"], a["l0b"], a["l1w"],
                ACT_CODES[net.arch["activation"]], net.scheme.qa, check)
        return args, acc.dtype, l1b.tolist()
    prep = cached(net, key, (net.l0w, net.l0b, net.l1w, net.l1b), build)
    d["_compiled_prepared"] = (net.l0w, net.l0b, net.l1w, net.l1b,
                               (net.l0w._version, net.l0b._version, net.l1w._version, net.l1b._version), prep)
    return prep



def _run_boards(prep, boards: torch.Tensor, upto: int = 0):
    args, acc_dtype, _ = prep
    n = boards.shape[0]
    out, bucket = np.empty(n, np.int64), np.empty(n, np.int64)
    status = np.zeros(3, np.int64)
    acc = np.empty((2, args[3].shape[1]), acc_dtype)  # per call: the kernel releases the GIL
    _eval_boards(board_words(boards), *args, acc, out, bucket, status, upto)
    if status[0]:
        raise_status(status, "l1_sums_boards")
    return out, bucket


def l1_sums_boards(net, boards: torch.Tensor, upto: int = 0):
    """``(sums, bucket)``, each (N,) int64: the L1 sum ``Σ_k x_k·l1w[b][k]`` of each packed board
    (N, 32) uint8 (CPU) in its own output bucket b (``net.buckets.of``); None when the kernels
    do not apply (:func:`applicable`, :func:`table_of`). Raises ValueError for a board a
    king-relative set cannot encode or with more than 32 occupied squares (naming its row) and
    OverflowError when an accumulator leaves int16 (checked when not proven statically).
    ``upto``: see :func:`_eval_boards` (profiling)."""
    prep = _prepared(net)
    if prep is None:
        return None
    out, bucket = _run_boards(prep, boards, upto)
    return torch.from_numpy(out), torch.from_numpy(bucket)


def evaluate_small(net, boards: torch.Tensor, output) -> list[int] | None:
    """Integer evals (centipawns, stm POV) of a few packed boards (N, 32) uint8 (CPU) as Python
    ints: :func:`l1_sums_boards`, then ``output`` (:func:`nnue.inference.kinds.perspective.output`,
    passed in: this module imports no evaluator) on Python ints, with no torch op (a torch op
    costs µs; one position here costs a few µs in all). None when the kernels do not apply; the
    errors of :func:`l1_sums_boards` and of ``output``."""
    prep = _prepared(net)
    if prep is None:
        return None
    out, bucket = _run_boards(prep, boards)
    act, scheme, l1b = net.arch["activation"], net.scheme, prep[2]
    return [output(act, scheme, int(t), l1b[b]) for t, b in zip(out.tolist(), bucket.tolist())]


def l1_sums_lists(net, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor,
                  return_acc: bool = False):
    """(N,) int64 L1 sums from index lists stm, nstm (N, A) int32 (any negative = padding,
    every index < F: the caller checks), bucket (N,) int64; with ``return_acc`` also the (N, 2,
    H) int32 accumulators. None when :func:`applicable` says no. Raises OverflowError when an
    accumulator leaves int16."""
    if not applicable(net):
        return None
    a = _arrays(net)
    acc, check = scratch(net, stm.shape[1])
    n, h = stm.shape[0], net.l0w.shape[1]
    if n and (int(bucket.min()) < 0 or int(bucket.max()) >= net.l1w.shape[0]):
        raise IndexError(f"output bucket out of range for {net.l1w.shape[0]} buckets")
    out = np.empty(n, np.int64)
    accs = np.empty((n if return_acc else 0, 2, h), np.int32)
    status = np.zeros(3, np.int64)
    as32 = [np.ascontiguousarray(t.to(torch.int32).numpy()) for t in (stm, nstm)]
    _eval_lists(as32[0], as32[1], a["l0w"], a["l0b"], a["l1w"], bucket.contiguous().numpy(),
                ACT_CODES[net.arch["activation"]], net.scheme.qa, check, acc, out, accs, status)
    raise_status(status, "l1_sums_lists")
    total = torch.from_numpy(out)
    return (total, torch.from_numpy(accs)) if return_acc else total

