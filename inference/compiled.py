"""Compiled (numba) exact evaluation of perspective, deep and sfnnv5 nets: one pass per position
from the packed board (or the index lists) to the L1 sum (deep nets: the output sum; sfnnv5:
Stockfish 15.1's internal value, its wraps included, see the section at the end), with the
feature transformer's accumulators held in SIMD registers.

Per position, in one loop (:func:`_eval_boards`; :func:`_eval_lists` starts from index lists):

1. decode the 32-byte packed board (DESIGN.md, "Packed board"): the occupied squares in
   ascending order (more than 32 is refused: the format holds 32 piece codes), each slot's key
   ``16·square + code``, both king squares and the side to move; a king-relative feature set
   needs exactly one king a side and no unused piece code (7 or 15), as
   :func:`nnue.pipeline.features.lookup.king_squares` requires;
2. each perspective's features from the feature set's own lookup table
   (:class:`~nnue.pipeline.features.lookup.TableEncoder`: entry ``offset_p + key``, −1 = no
   feature), the table offsets of :meth:`TableEncoder.lookup_keys`;
3. the feature transformer, ``acc_p = l0b + Σ l0w[f]`` (:func:`_rows_sum`): the columns in blocks
   of one 512-bit register, each block summed over all the position's rows in a register (one
   load and one add per row and block) and stored once. int16 lanes (wrapping adds) when
   :func:`nnue.inference.exact.acc_int16_proven` shows that no partial sum of the set's widest
   list can leave int16 (then none wraps), else int32 lanes from sign-extended rows (exact:
   |sum| ≤ 257·2^15 < 2^31 for the at most 256 features ``forward_int`` accepts, the bias
   included) and a range check against int16 per position;
4. the activation and the L1 sum of the position's own bucket, ``Σ_k x_k·l1w[b][k]`` with x
   the rule of :mod:`nnue.inference.perspective` (crelu v, screlu v², pairwise v[j]·v[j + H/2];
   v = clamp(acc, 0, QA)), in int64: each product |x·w| ≤ QA²·2^15 and the sum of K of them
   stays far below 2^63 for QA ≤ 2^15 and K < 2^17 (:func:`applicable` checks both).

The int32 checks, the division by QA, the bias and the centipawn scaling are then
:func:`nnue.inference.perspective.output`, in torch, on the (N,) int64 sums. Nothing is sorted:
each position computes only its own bucket.

Why a register-held accumulator: numba's plain loop ``acc[h] += w[h]`` keeps the accumulator in
memory (a load and a store per row and vector) and measured 2.1 ms for the 4,096 sample
positions of ``nnue bench infer`` (chess768 → 256, one core), slower than torch's float32
``embedding_bag`` (1.8 ms, FBGEMM's generated kernel); the LLVM vector loop of
:func:`_rows_sum` took 0.86 ms on the same lists (side by side in one process; inside the whole
kernel the feature-transformer phase measures 1.07 ms: ``bench/results/infer_cpu.json``,
``allocator_neutral.profile``).

Deep nets (:func:`_eval_boards_deep`, :func:`output_sums_deep`): steps 1–3, then the u8 L0
activations of :mod:`nnue.inference.deep` and each dense layer of the position's own bucket:
``s = b + W·x`` with int16 inputs and int8 weights, in int32 vector lanes (:func:`_gemv_pairs`:
pairs of inputs against pair-interleaved weights, 16 outputs a register, four accumulators) where
K·255·128 < 2^31 proves that no partial sum wraps, else in int64; every sum checked against
int32, floor-shifted by log2(QB) and activated (crelu, screlu; other hidden activations and gated
units take the torch path). Where the net's weights and biases prove that no sum of a layer can
leave int32 (Σ|w|·max x + |b| < 2^31 for every output, per net), that layer skips the int64 sums
and the check; L1 then runs over the nonzero input pairs only (:func:`_gemv_pairs_nz`: pairwise
L0 outputs are mostly zero, 56% of the pairs in the bench's net) and the output layer as one block
of 16 outputs with 15 zero rows. Measured side by side in one process on the bench's deep net
(4,096 positions, one core): 2.78 ms before these three, 2.44 ms after.

Only serial kernels (one thread, ``nogil``, scratch allocated per call, so threads may call them
at once): the batch comparison of ``nnue bench infer`` is one core. numba is imported when this
module is; :mod:`nnue.inference.perspective`, :mod:`nnue.inference.deep` and
:mod:`nnue.inference.sfnnv5` import it on first use and fall back to their torch paths when numba
is missing or :func:`applicable` / :func:`applicable_deep` / :func:`applicable_sfnnv5` says no.
The kernels are compiled on first use and cached by numba
(``cache=True``, next to this file or in ``NUMBA_CACHE_DIR``).
"""
from __future__ import annotations

import numpy as np
import torch
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from nnue.pipeline.compiled.bits import lsb
from nnue.spec import activations as acts

from .exact import acc_int16_proven, cached

#: activation codes of the kernels; an L0 activation not listed here takes the torch path
ACT_CODES = {"crelu": 0, "screlu": 1, "pairwise_crelu": 2}
_REG_BYTES = 64  # one AVX-512 register; on narrower machines LLVM splits each block op in two
_NUM_KEYS = 65 * 16  # slot keys: 16·square + code, square 64 = empty (board_tensor.NUM_KEYS)


# ------------------------------------------------------------------------------------- kernels

@intrinsic
def _rows_sum(typingctx, acc, w, bias, idx, count):
    """``acc[c] = bias[c] + Σ_{s < count} w[idx[s], c]`` for the columns c < L·(H // L), L = the
    lanes of one 512-bit register in acc's dtype (int16: 32, wrapping adds; int32: 16, rows
    and bias sign-extended); columns from L·(H // L) on are left for the caller.

    acc: (H,) int16 or int32, C-contiguous; w: (F, H) int16, C-contiguous; bias: (H,) int16;
    idx: (≥ count,) int32, every value in 0..F − 1 (not checked: the caller's duty); count: int.
    Codegen: for each block of L columns, a vector alloca (promoted to a register by LLVM's
    SROA) is loaded with the bias, then one unaligned vector load and add per row, then one
    store."""
    if not (isinstance(acc, types.Array) and acc.dtype in (types.int16, types.int32)):
        return None
    sig = types.void(acc, w, bias, idx, count)
    wide = acc.dtype == types.int32

    def codegen(context, builder, signature, args):
        acc_v, w_v, b_v, idx_v, cnt = args
        acc_a = context.make_array(signature.args[0])(context, builder, acc_v)
        w_a = context.make_array(signature.args[1])(context, builder, w_v)
        b_a = context.make_array(signature.args[2])(context, builder, b_v)
        i_a = context.make_array(signature.args[3])(context, builder, idx_v)
        i64 = ir.IntType(64)
        lane_bits = 32 if wide else 16
        lanes = _REG_BYTES * 8 // lane_bits
        src_ty = ir.VectorType(ir.IntType(16), lanes)
        acc_ty = ir.VectorType(ir.IntType(lane_bits), lanes)
        h = builder.extract_value(w_a.shape, 1)
        nblk = builder.udiv(h, ir.Constant(i64, lanes))
        n = context.cast(builder, cnt, signature.args[4], types.int64)
        vacc = cgutils.alloca_once(builder, acc_ty)

        def load16(ptr):
            v = builder.load(builder.bitcast(ptr, src_ty.as_pointer()), align=2)
            return builder.sext(v, acc_ty) if wide else v

        with cgutils.for_range(builder, nblk) as blk:
            col = builder.mul(blk.index, ir.Constant(i64, lanes))
            builder.store(load16(builder.gep(b_a.data, [col])), vacc)
            with cgutils.for_range(builder, n) as s:
                f = builder.sext(builder.load(builder.gep(i_a.data, [s.index])), i64)
                row = builder.gep(w_a.data, [builder.add(builder.mul(f, h), col)])
                builder.store(builder.add(builder.load(vacc), load16(row)), vacc)
            out = builder.bitcast(builder.gep(acc_a.data, [col]), acc_ty.as_pointer())
            builder.store(builder.load(vacc), out, align=lane_bits // 8)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def _accumulate(acc, l0w, l0b, idx, count):
    """``acc = l0b + Σ_{s < count} l0w[idx[s]]`` in acc's dtype: the register blocks of
    :func:`_rows_sum`, then the last H mod L columns in a plain loop."""
    _rows_sum(acc, l0w, l0b, idx, count)
    h = l0w.shape[1]
    lanes = 64 // acc.itemsize
    for c in range(h - h % lanes, h):
        t = np.int32(l0b[c])
        for s in range(count):
            t += l0w[idx[s], c]
        acc[c] = t  # int16 scratch: exact, the sum is proven within int16


@njit(cache=True, nogil=True, inline="always")
def _leaves_int16(acc0, acc1, status) -> bool:
    """True, with status = (2, min, max) of both accumulators, when a value leaves int16."""
    lo = min(acc0.min(), acc1.min())
    hi = max(acc0.max(), acc1.max())
    if lo < -32768 or hi > 32767:
        status[0], status[1], status[2] = 2, lo, hi
        return True
    return False


@njit(cache=True, nogil=True, inline="always")
def _l1_sum(acc0, acc1, w, act, qa):
    """Σ_k x_k·w[k] in int64, x the perspective L1 input of the stm accumulator acc0 then the
    nstm accumulator acc1 (:mod:`nnue.inference.perspective`): crelu v, screlu v², pairwise
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


@njit(cache=True, nogil=True, inline="always")
def _lookup(words, i, table, king_rel, keys, idx0, idx1, status):
    """Steps 1–2 of the module docstring for board i of ``words`` (see :func:`_eval_boards`):
    the features of the stm perspective into idx0 and of the nstm perspective into idx1.
    Returns (pieces, count0, count1), or pieces −1 with status set (codes 1, 3 of
    :func:`_eval_boards`) for a board that cannot be encoded."""
    one = np.uint64(1)
    occ = words[i, 0]
    nib = (words[i, 1], words[i, 2])
    ns = 0
    wk = 0
    bk = 0
    nkw = 0
    nkb = 0
    bad = False
    while occ != 0 and ns < 32:
        sq = np.int32(lsb(occ))
        occ &= occ - one
        code = np.int32((nib[ns >> 4] >> np.uint64(4 * (ns & 15))) & np.uint64(15))
        keys[ns] = sq * 16 + code
        if code == 5:
            wk = sq
            nkw += 1
        elif code == 13:
            bk = sq
            nkb += 1
        elif (code & 7) == 7:
            bad = True
        ns += 1
    if occ != 0:  # more than 32 occupied squares: not a packed board
        status[0], status[1] = 3, i
        return -1, 0, 0
    btm = np.int32((words[i, 3] >> np.uint64(7)) & one)
    if king_rel:
        if nkw != 1 or nkb != 1 or bad:
            status[0], status[1] = 1, i
            return -1, 0, 0
        o0 = (btm * 64 + (bk if btm else wk)) * _NUM_KEYS
        o1 = ((1 - btm) * 64 + (wk if btm else bk)) * _NUM_KEYS
    else:
        o0 = btm * _NUM_KEYS
        o1 = (1 - btm) * _NUM_KEYS
    m0 = 0
    m1 = 0
    for s in range(ns):
        f = table[o0 + keys[s]]
        if f >= 0:
            idx0[m0] = f
            m0 += 1
        f = table[o1 + keys[s]]
        if f >= 0:
            idx1[m1] = f
            m1 += 1
    return ns, m0, m1


@njit(cache=True, nogil=True)
def _eval_boards(words, table, king_rel, bucket_of, l0w, l0b, l1w, act, qa, check, acc, out, bucket, status, upto):
    """Steps 1–4 of the module docstring for every board: out[i] = the L1 sum of board i,
    bucket[i] its output bucket.

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
        ns, m0, m1 = _lookup(words, i, table, king_rel, keys, idx0, idx1, status)
        if ns < 0:
            return
        if upto == 1:
            out[i] = idx0[m0 - 1] + idx1[m1 - 1] if m0 and m1 else m0
            continue
        a0, a1 = acc[0], acc[1]
        _accumulate(a0, l0w, l0b, idx0, m0)
        _accumulate(a1, l0w, l0b, idx1, m1)
        if check and _leaves_int16(a0, a1, status):
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
        _accumulate(a0, l0w, l0b, idx0, m0)
        _accumulate(a1, l0w, l0b, idx1, m1)
        if check and _leaves_int16(a0, a1, status):
            return
        if keep:
            for c in range(a0.shape[0]):
                accs[i, 0, c] = a0[c]
                accs[i, 1, c] = a1[c]
        out[i] = _l1_sum(a0, a1, l1w[bucket[i]], act, qa)
    status[0] = 0


# ------------------------------------------------------------------------------------- deep nets

#: hidden activation codes (after L1 and L2) of the deep kernel: crelu ``clamp(y, 0, QA)``,
#: screlu ``clamp(y, 0, QA)² >> l0_shift`` (:mod:`nnue.spec.activations`); others take torch
HIDDEN_CODES = {"crelu": 0, "screlu": 1}


@intrinsic
def _gemv_pairs(typingctx, x, wp, out):
    """``out[m] = Σ_{j < 2·(K // 2)} x[j]·w[m, j]`` in int32 lanes for the outputs m < 16·(M //
    16) (the caller adds input K − 1 when K is odd and computes the last M mod 16 outputs): x
    (K,) int16, wp (K // 2, M, 2) int16 with ``wp[p, m, t] = w[m, 2p + t]`` (the weights in
    input pairs), out (≥ M,) int32; all C-contiguous. Per pair of inputs and block of 16
    outputs: the pair (4 bytes) broadcast to 16 lanes, 32 weights loaded, the 32 products of
    sign-extended int16s (exact in int32), the adjacent products added (even lanes + odd
    lanes: the pattern x86's ``vpmaddwd`` computes in one instruction, with AVX-512 VNNI
    ``vpdpwssd`` with the add) and the 16 sums added to one of four registers of int32 lanes
    (pairs taken four at a time). Exact when every partial sum stays within int32: the caller's
    bound (:func:`_dense_layer`, ``narrow``)."""
    if not all(isinstance(t, types.Array) for t in (x, wp, out)) or x.dtype != types.int16 \
            or wp.dtype != types.int16 or out.dtype != types.int32:
        return None
    return types.void(x, wp, out), _gemv_codegen(False)


@intrinsic
def _gemv_pairs_nz(typingctx, x, wp, out, pidx, count):
    """:func:`_gemv_pairs` over the listed input pairs only: ``out[m] = Σ_{s < count} (x[2p]·w[m,
    2p] + x[2p + 1]·w[m, 2p + 1])`` with p = pidx[s] (pidx (≥ count,) int32, each < K // 2: the
    caller's duty); the same exact arithmetic. The pairs left out must be zero inputs (then the
    sum is :func:`_gemv_pairs`'s)."""
    if not all(isinstance(t, types.Array) for t in (x, wp, out, pidx)) or x.dtype != types.int16 \
            or wp.dtype != types.int16 or out.dtype != types.int32 or pidx.dtype != types.int32:
        return None
    return types.void(x, wp, out, pidx, count), _gemv_codegen(True)


def _gemv_codegen(sparse: bool):
    """The code of :func:`_gemv_pairs` (``sparse``: of :func:`_gemv_pairs_nz`, pairs from a list)."""
    def codegen(context, builder, signature, args):
        xa, wa, oa = (context.make_array(signature.args[k])(context, builder, args[k]) for k in range(3))
        i64, i32, i16 = ir.IntType(64), ir.IntType(32), ir.IntType(16)
        v16x32, v32x16, v32x32 = ir.VectorType(i32, 16), ir.VectorType(i16, 32), ir.VectorType(i32, 32)
        npair = builder.extract_value(wa.shape, 0)
        m = builder.extract_value(wa.shape, 1)
        nblk = builder.udiv(m, ir.Constant(i64, 16))
        even = ir.Constant(v16x32, [ir.Constant(i32, 2 * k) for k in range(16)])
        odd = ir.Constant(v16x32, [ir.Constant(i32, 2 * k + 1) for k in range(16)])
        zeros = ir.Constant(v16x32, None)
        # four accumulators: the multiply-add of a pair has a latency of several cycles, and one
        # accumulator would chain them (measured: 1.2 ms against 0.3 ms for L1 of the bench's
        # deep net, 4,096 positions)
        vaccs = [cgutils.alloca_once(builder, v16x32) for _ in range(4)]
        xpairs = builder.bitcast(xa.data, i32.as_pointer())
        two_m = builder.mul(m, ir.Constant(i64, 2))

        def add_pair(p, vacc, col):
            pair = builder.load(builder.gep(xpairs, [p]), align=2)
            vx = builder.insert_element(ir.Constant(v16x32, ir.Undefined), pair, ir.Constant(i32, 0))
            vx = builder.shuffle_vector(vx, ir.Constant(v16x32, ir.Undefined), zeros)
            vx = builder.sext(builder.bitcast(vx, v32x16), v32x32)
            row = builder.gep(wa.data, [builder.add(builder.mul(p, two_m), col)])
            vw = builder.sext(builder.load(builder.bitcast(row, v32x16.as_pointer()), align=2), v32x32)
            prod = builder.mul(vx, vw)
            sums = builder.add(builder.shuffle_vector(prod, prod, even), builder.shuffle_vector(prod, prod, odd))
            builder.store(builder.add(builder.load(vacc), sums), vacc)

        if sparse:  # the pairs of the list pidx[:count]
            pa = context.make_array(signature.args[3])(context, builder, args[3])
            npair = context.cast(builder, args[4], signature.args[4], types.int64)

            def pair_at(s):
                return builder.sext(builder.load(builder.gep(pa.data, [s])), i64)
        else:
            def pair_at(s):
                return s
        nquad = builder.udiv(npair, ir.Constant(i64, 4))
        with cgutils.for_range(builder, nblk) as blk:
            col = builder.mul(blk.index, ir.Constant(i64, 32))  # int16 offset of the block in a pair row
            for v in vaccs:
                builder.store(zeros, v)
            with cgutils.for_range(builder, nquad) as q:
                for u in range(4):
                    add_pair(pair_at(builder.add(builder.mul(q.index, ir.Constant(i64, 4)), ir.Constant(i64, u))),
                             vaccs[u], col)
            rest = builder.sub(npair, builder.mul(nquad, ir.Constant(i64, 4)))
            with cgutils.for_range(builder, rest) as r:
                add_pair(pair_at(builder.add(builder.mul(nquad, ir.Constant(i64, 4)), r.index)), vaccs[0], col)
            total = builder.add(builder.add(builder.load(vaccs[0]), builder.load(vaccs[1])),
                                builder.add(builder.load(vaccs[2]), builder.load(vaccs[3])))
            builder.store(total, builder.bitcast(builder.gep(oa.data, [builder.mul(
                blk.index, ir.Constant(i64, 16))]), v16x32.as_pointer()), align=4)
        return context.get_dummy_value()

    return codegen


@njit(cache=True, nogil=True, inline="always")
def _dense_layer(x, w, wp, bias, dots, sums, out, narrow, shift, code, qa, l0_shift, status, what):
    """One bucket's dense layer and its activation: ``s[n] = bias[n] + Σ_j w[n, j]·x[j]``,
    checked against int32 (status (what, s, s) and False when one leaves), then
    ``out[n] = act(s[n] >> shift)`` (floor shift), act a HIDDEN_CODES rule; code −1: out[n] =
    s[n]. x (K,) int16; w (M, K) int16 (the int8 weights) and wp the same in input pairs
    (:func:`_gemv_pairs`); dots (≥ M,) int32 and sums (≥ M,) int64 scratch. ``narrow`` 2: the
    caller's bound max_n Σ_j |w[n, j]|·max x + |bias[n]| < 2^31 holds, so no sum can leave
    int32: bias + the int32-lane dot product, activated, no int64 sums and no check (M a
    multiple of 16 and K even; otherwise as 1 without the check). ``narrow`` 1: the
    caller's bound K·max|x|·128 < 2^31 holds, so the dot products run in int32 lanes
    (:func:`_gemv_pairs`; every partial sum below 2^31, no wrap) and the bias is added in int64;
    otherwise, and for fewer than 16 outputs (the output layer: one row, a plain loop LLVM
    vectorizes), each whole sum is int64. The check and the activation run as separate loops
    without early exits, so that LLVM vectorizes them too (one loop with the check inside ran
    element by element: ~10 cycles an output)."""
    m, k = w.shape
    if narrow == 2 and m % 16 == 0 and k % 2 == 0:  # proven within int32: no int64 sums, no check
        _gemv_pairs(x, wp, dots)
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
        _gemv_pairs(x, wp, dots)
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
def _eval_boards_deep(words, table, king_rel, bucket_of, l0w, l0b, act, qa, l0_shift, check,
                      l1w, l1t, l1b, h1, l2w, l2t, l2b, h2, outw, outt, outb, shift, narrow, acc, x0, x1, x2,
                      out, bucket, status):
    """Deep nets (:mod:`nnue.inference.deep`, steps 1–6 of its docstring) for every board:
    out[i] = the output sum of board i (bias included, before the centipawn scaling), bucket[i]
    its output bucket.

    words … check: as :func:`_eval_boards` (act: the L0 activation, ACT_CODES); l0_shift: the
    scheme's shift of the L0 products; l1w (B, N1, L1), l2w (B, N2, N1), outw (B, 1, N2) int16
    (the int8 weights) and l1t, l2t, outt the same in input pairs (B, K // 2, M, 2); l1b (B,
    N1), l2b (B, N2), outb (B, 1) int64; h1, h2: HIDDEN_CODES of the
    activations after L1 and L2; shift: the dense shift log2(QB); narrow: (3,) int64, each
    layer's mode 0 / 1 / 2 (:func:`_dense_layer`; 2 also selects the sparse L1 and the padded
    output layer; outt holds the output weights padded to 16 rows); acc (2, H) scratch as in
    :func:`_eval_boards`; x0 (L1,), x1 (N1,), x2 (N2,) int16 scratch; out, bucket (N,) int64.
    status (3,) int64: the codes of :func:`_eval_boards`, and (4, max, ·) an L0 activation
    above 255 (u8), (5 / 6 / 7, s, s) an L1 / L2 / output sum outside int32. Every sum is an
    exact int64: |x| ≤ 2^30 and |w| ≤ 2^7 over fewer than 2^17 inputs."""
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
        ns, m0, m1 = _lookup(words, i, table, king_rel, keys, idx0, idx1, status)
        if ns < 0:
            return
        a0, a1 = acc[0], acc[1]
        _accumulate(a0, l0w, l0b, idx0, m0)
        _accumulate(a1, l0w, l0b, idx1, m1)
        if check and _leaves_int16(a0, a1, status):
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
            _gemv_pairs_nz(x0, l1t[b], dots, pidx, c)
            _l1_out(dots, l1b[b], x1, h1, shift, qa, l0_shift)
        elif not _dense_layer(x0, l1w[b], l1t[b], l1b[b], dots, sums, x1, narrow[0], shift, h1, qa, l0_shift,
                              status, 5):
            return
        if not _dense_layer(x1, l2w[b], l2t[b], l2b[b], dots, sums, x2, narrow[1], shift, h2, qa,
                            l0_shift, status, 6):
            return
        if narrow[2] == 2 and x2.shape[0] % 2 == 0:  # one block of 16 outputs, 15 of them zero rows
            _gemv_pairs(x2, outt[b], dots)
            o[0] = outb[b, 0] + dots[0]
        elif not _dense_layer(x2, outw[b], outt[b], outb[b], dots, sums, o, narrow[2], shift, -1, qa,
                              l0_shift, status, 7):
            return
        out[i] = o[0]
    status[0] = 0


# ------------------------------------------------------------------------------------- host side

def applicable(net) -> bool:
    """Whether these kernels compute ``net``'s L1 sums exactly: a perspective net with an
    activation of :data:`ACT_CODES`, 0 < QA ≤ 2^15 (each product |x·w| ≤ 2^30·2^15 = 2^45) and
    fewer than 2^17 L1 inputs (so |Σ| < 2^62), int16 weights. The caller keeps the int32 checks."""
    act = net.arch.get("activation")
    return (net.arch.get("kind", "perspective") == "perspective" and act in ACT_CODES
            and 0 < net.scheme.qa <= 1 << 15 and 0 < net.l1w.shape[1] < 1 << 17
            and net.l0w.dtype == torch.int16 and net.l0b.dtype == torch.int16
            and net.l1w.shape[1] == acts.l1_inputs(act, net.l0w.shape[1]))


def _arrays(net) -> dict:
    """The net's tensors as the kernels take them, made once per net (:func:`~nnue.inference.exact.cached`)."""
    def build(l0w, l0b, l1w):
        return {"l0w": np.ascontiguousarray(l0w.numpy()), "l0b": np.ascontiguousarray(l0b.numpy()),
                "l1w": np.ascontiguousarray(l1w.numpy().astype(np.int64))}
    return cached(net, "compiled_arrays", (net.l0w, net.l0b, net.l1w), build)


def _scratch(net, width: int) -> tuple[np.ndarray, bool]:
    """(2, H) accumulator scratch: int16 when no list of ``width`` features can leave int16
    (no check needed), else int32 with the per-position check."""
    proven = acc_int16_proven(net, width)
    return np.empty((2, net.l0w.shape[1]), np.int16 if proven else np.int32), not proven


def _raise(status: np.ndarray, what: str) -> None:
    if status[0] == 1:
        raise ValueError(f"board {int(status[1])}: a king-relative feature set needs exactly one king of "
                         f"each colour and valid piece codes")
    if status[0] == 3:
        raise ValueError(f"board {int(status[1])}: more than 32 occupied squares (a packed board holds 32 pieces)")
    if status[0] == 2:
        raise OverflowError(f"accumulator leaves int16 ({int(status[1])}..{int(status[2])})")
    if status[0] != 0:
        raise RuntimeError(f"{what}: unexpected kernel status {status.tolist()}")


def table_of(net):
    """The feature set's lookup table as the board kernel reads it ((T,) int32, values < F) and
    whether it is king-relative; None when the set is not a TableEncoder or its table reaches past
    the net's inputs (the torch path then raises the IndexError)."""
    import sys

    from nnue.pipeline.features.lookup import TableEncoder

    enc = net.features.encode
    if not isinstance(enc, TableEncoder) or sys.byteorder != "little":  # the kernels read boards as LE words
        return None

    def build(table, l0w):
        if table.numel() and int(table.max()) >= l0w.shape[0]:
            return None
        return np.ascontiguousarray(table.numpy())
    t = cached(net, ("compiled_table", id(enc)), (enc.table_cpu, net.l0w), build)
    return None if t is None else (t, enc.king_relative, enc.max_active)


def _bucket_lut(net) -> np.ndarray:
    """(65,) int64: the net's output bucket of each piece count 0..64 (the bucket function is
    one of the piece count: :meth:`OutputBuckets.of_piece_count`)."""
    return cached(net, "compiled_bucket_lut", (net.l1b,), lambda _: np.ascontiguousarray(
        net.buckets.of_piece_count(torch.arange(65, dtype=torch.int64)).numpy()))


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
        tab = table_of(net)
        if tab is None or not applicable(net):
            return None
        table, king_rel, width = tab
        a = _arrays(net)
        acc, check = _scratch(net, width)
        args = (table, king_rel, _bucket_lut(net), a["l0w"], a["l0b"], a["l1w"],
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
    words = (boards if boards.is_contiguous() else boards.contiguous()).numpy().view(np.uint64)
    _eval_boards(words, *args, acc, out, bucket, status, upto)
    if status[0]:
        _raise(status, "l1_sums_boards")
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
    ints: :func:`l1_sums_boards`, then ``output`` (:func:`nnue.inference.perspective.output`,
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
    acc, check = _scratch(net, stm.shape[1])
    n, h = stm.shape[0], net.l0w.shape[1]
    if n and (int(bucket.min()) < 0 or int(bucket.max()) >= net.l1w.shape[0]):
        raise IndexError(f"output bucket out of range for {net.l1w.shape[0]} buckets")
    out = np.empty(n, np.int64)
    accs = np.empty((n if return_acc else 0, 2, h), np.int32)
    status = np.zeros(3, np.int64)
    as32 = [np.ascontiguousarray(t.to(torch.int32).numpy()) for t in (stm, nstm)]
    _eval_lists(as32[0], as32[1], a["l0w"], a["l0b"], a["l1w"], bucket.contiguous().numpy(),
                ACT_CODES[net.arch["activation"]], net.scheme.qa, check, acc, out, accs, status)
    _raise(status, "l1_sums_lists")
    total = torch.from_numpy(out)
    return (total, torch.from_numpy(accs)) if return_acc else total


def _hidden_max(name: str, scheme) -> int:
    """The largest output of the hidden activation ``name`` (HIDDEN_CODES): crelu QA, screlu
    QA² >> l0_shift."""
    return scheme.qa if name == "crelu" else (scheme.qa * scheme.qa) >> scheme.l0_shift


def applicable_deep(net, l2_act: str) -> bool:
    """Whether :func:`_eval_boards_deep` computes ``net``'s evals exactly: a deep net whose L0
    activation is in :data:`ACT_CODES`, whose activations after L1 and L2 (``l2_act``:
    :func:`nnue.inference.deep.l2_activation`, passed in) are in
    :data:`HIDDEN_CODES` (not gated: l2w has N2 rows) with outputs within int16 (the kernel's
    activations are int16), 0 < QA ≤ 2^15, fewer than 2^17 L1 inputs, int16
    feature-transformer and int8 dense weights."""
    a = net.arch
    return (a.get("kind") == "deep" and a.get("activation") in ACT_CODES
            and a.get("hidden_activation") in HIDDEN_CODES and l2_act in HIDDEN_CODES
            and 0 < net.scheme.qa <= 1 << 15 and 0 < net.l1w.shape[2] < 1 << 17
            and max(_hidden_max(a["hidden_activation"], net.scheme), _hidden_max(l2_act, net.scheme)) <= 32767
            and net.l1w.shape[2] == acts.l1_inputs(a["activation"], net.l0w.shape[1])
            and net.l2w.shape[1] == a["l2_outputs"] and net.l0w.dtype == torch.int16
            and all(t.dtype == torch.int8 for t in (net.l1w, net.l2w, net.outw)))


def _prepared_deep(net, l2_act: str):
    """The arguments of :func:`_eval_boards_deep` besides the boards and the scratch, made once
    per net: ``(args, acc_dtype, (L1, N1, N2))``; None when it does not apply."""
    def build(l0w, l0b, l1w, l1b, l2w, l2b, outw, outb):
        tab = table_of(net)
        if tab is None or not applicable_deep(net, l2_act):
            return None
        table, king_rel, width = tab
        acc, check = _scratch(net, width)
        i16 = lambda t: np.ascontiguousarray(t.numpy().astype(np.int16))  # noqa: E731
        def t16(t):  # (B, M, K) -> (B, K // 2, M, 2): the weights in input pairs (_gemv_pairs)
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
        args = (table, king_rel, _bucket_lut(net), np.ascontiguousarray(l0w.numpy()),
                np.ascontiguousarray(l0b.numpy()), ACT_CODES[a["activation"]], s.qa, s.l0_shift, check,
                i16(l1w), t16(l1w), i64(l1b), HIDDEN_CODES[h1], i16(l2w), t16(l2w), i64(l2b), HIDDEN_CODES[h2],
                i16(outw.unsqueeze(1)), t16(torch.cat([outw.unsqueeze(1), outw.new_zeros(outw.shape[0], 15, outw.shape[1])], 1)),
                i64(outb.unsqueeze(1)), s.dense_shift, narrow)
        return args, acc.dtype, (l1w.shape[2], l1w.shape[1], l2w.shape[1])
    return cached(net, ("compiled_deep", net.arch.get("feature_set"), net.arch.get("activation"),
                        net.arch.get("hidden_activation"), l2_act),
                  (net.l0w, net.l0b, net.l1w, net.l1b, net.l2w, net.l2b, net.outw, net.outb), build)


_DEEP_WHAT = {5: "L1 sum", 6: "L2 sum", 7: "output sum"}


def output_sums_deep(net, boards: torch.Tensor, l2_act: str):
    """``(out, bucket)``, each (N,) int64: a deep net's output sum (bias included, before the
    centipawn scaling, :func:`nnue.inference.exact.to_centipawns`) of each packed board (N, 32)
    uint8 (CPU) and its output bucket (``l2_act``: the activation after L2,
    :func:`nnue.inference.deep.l2_activation`); None when :func:`applicable_deep` or
    :func:`table_of` says no. Raises what :func:`l1_sums_boards` raises, OverflowError for an L0 activation
    above u8 and for an L1, L2 or output sum outside int32 (naming which, as
    :func:`nnue.inference.deep.dense_int` does)."""
    prep = _prepared_deep(net, l2_act)
    if prep is None:
        return None
    args, acc_dtype, (k, n1, n2) = prep
    n = boards.shape[0]
    out, bucket = np.empty(n, np.int64), np.empty(n, np.int64)
    status = np.zeros(3, np.int64)
    acc = np.empty((2, net.l0w.shape[1]), acc_dtype)
    words = (boards if boards.is_contiguous() else boards.contiguous()).numpy().view(np.uint64)
    _eval_boards_deep(words, *args, acc, np.empty(k, np.int16), np.empty(n1, np.int16), np.empty(n2, np.int16),
                      out, bucket, status)
    if status[0] == 4:
        s = net.scheme
        raise OverflowError(f"L0 activation leaves u8 (up to {int(status[1])}): qa {s.qa} with "
                            f"l0_shift {s.l0_shift} does not fit")
    if status[0] in _DEEP_WHAT:
        v = int(status[1])
        raise OverflowError(f"{_DEEP_WHAT[int(status[0])]} leaves the int32 range ({v}..{v})")
    if status[0]:
        _raise(status, "output_sums_deep")
    return torch.from_numpy(out), torch.from_numpy(bucket)


# ------------------------------------------------------------------------ sfnnv5 (Stockfish 15.1)
# Stockfish 15.1's net (:mod:`nnue.inference.sfnnv5`, its steps 1–7) in one pass per board. Every
# sum the engine wraps is computed modulo its width, which needs no bound at all: addition and
# multiplication modulo 2^k do not depend on the order or on intermediate wraps, so
#
# * the feature transformer sums in int16 register lanes with wrapping adds (:func:`_rows_sum`)
#   are the engine's int16 accumulators bit for bit, whatever the weights;
# * each layer's dot product in int32 lanes (:func:`_gemv_pairs`, wrapping adds of exact int16 ×
#   int16 products) is the true dot product modulo 2^32, so ``wrap32(bias + dots)`` is the
#   engine's int32 sum (the torch path computes the exact sum and wraps it: the same integer);
# * the PSQT sums of the position's own bucket are exact in int64 (at most 32 terms below 2^31)
#   and wrapped once.

@njit(cache=True, nogil=True, inline="always")
def _wrap32(t):
    """int64 -> the same value wrapped to int32 (two's complement), as int64."""
    return ((t + np.int64(2147483648)) & np.int64(4294967295)) - np.int64(2147483648)


@njit(cache=True, nogil=True, inline="always")
def _tdiv(a, d):
    """C's ``a / d`` (truncating toward zero) for d > 0."""
    q = abs(a) // d
    return -q if a < 0 else q


@njit(cache=True, nogil=True)
def _eval_boards_sf(words, table, bucket_of, ftw, ftb, psqt, t0, b0, t1, b1, w2, b2, acc, x0, x1, dots,
                    out, bucket, status):
    """Steps 1–7 of :mod:`nnue.inference.sfnnv5` for every board: out[i] = the engine's internal
    value (``NNUE::evaluate(pos, false)``, stm POV, before the centipawn scaling), bucket[i] the
    layer stack.

    words (N, 4) uint64, table: as :func:`_eval_boards` (HalfKAv2_hm, king-relative); bucket_of
    (65,) int64; ftw (F, L1) int16; ftb (L1,) int16; psqt (F, 8) int32; t0 (8, L1 // 2, 16, 2),
    t1 (8, 16, 32, 2) int16: fc_0's and fc_1's int8 weights in input pairs (:func:`_gemv_pairs`);
    b0 (8, 16), b1 (8, 32) int64; w2 (8, 32) int64 and b2 (8,) int64: fc_2; acc (2, L1) int16,
    x0 (L1,) int16, x1 (32,) int16, dots (32,) int32 scratch; out, bucket (N,) int64. status as
    :func:`_eval_boards` (codes 1 and 3; nothing overflows: every sum wraps as the engine's)."""
    n = words.shape[0]
    keys = np.empty(32, np.int32)
    idx0 = np.empty(32, np.int32)
    idx1 = np.empty(32, np.int32)
    s0 = np.empty(16, np.int64)
    x2 = np.empty(32, np.int64)
    half = ftw.shape[1] // 2
    for i in range(n):
        ns, m0, m1 = _lookup(words, i, table, True, keys, idx0, idx1, status)
        if ns < 0:
            return
        a0, a1 = acc[0], acc[1]
        _accumulate(a0, ftw, ftb, idx0, m0)  # int16 lanes: wrapping adds, the engine's accumulator
        _accumulate(a1, ftw, ftb, idx1, m1)
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
        _gemv_pairs(x0, t0[b], dots)
        for k in range(16):
            s0[k] = _wrap32(b0[b, k] + np.int64(dots[k]))
        for k in range(15):
            h = s0[k]
            x1[k] = min((h * h) >> 19, 127)
            x1[15 + k] = min(max(h >> 6, 0), 127)
        x1[30] = 0
        x1[31] = 0
        # step 5: fc_1, ClippedReLU
        _gemv_pairs(x1, t1[b], dots)
        for k in range(32):
            x2[k] = min(max(_wrap32(b1[b, k] + np.int64(dots[k])) >> 6, 0), 127)
        # step 6: fc_2 and the skip from fc_0's 16th output
        t = b2[b]
        for k in range(32):
            t += w2[b, k] * x2[k]
        fwd = _tdiv(_wrap32(s0[15] * 9600), 8128)
        positional = t + fwd  # the engine wraps s2 and this sum to int32: implied by the wrap below
        # step 7: the PSQT difference of the bucket's column, then (psqt + positional) / 16
        ps = _tdiv(_wrap32(p0 - p1), 2)
        out[i] = _tdiv(_wrap32(ps + positional), 16)
    status[0] = 0


def applicable_sfnnv5(net) -> bool:
    """Whether :func:`_eval_boards_sf` evaluates ``net``: an sfnnv5 net whose tensors have the
    dtypes and shapes of :meth:`~nnue.inference.sfnnv5.SFNNv5IntegerNet.tensor_specs` with an
    even L1 (fc_0: 16 outputs; fc_1: 32 × 32; fc_2: 1 × 32; 8 PSQT columns and layer stacks)."""
    if net.arch.get("kind") != "sfnnv5" or net.arch.get("hidden", 1) % 2:
        return False
    specs = type(net).tensor_specs(net.arch)  # the net's own class: this module imports no evaluator
    return (all(getattr(net, k).dtype == dt and tuple(getattr(net, k).shape) == shape
                for k, (dt, shape) in specs.items())
            and tuple(net.fc0_weight.shape[:2]) == (8, 16) and tuple(net.fc1_weight.shape[1:]) == (32, 32)
            and tuple(net.fc2_weight.shape[1:]) == (1, 32) and tuple(net.psqt.shape[1:]) == (8,))


def _table_sf(net):
    """The net's king-relative lookup table ((T,) int32, every value < F), or None (not a
    king-relative TableEncoder, a big-endian machine, or a table reaching past the net's
    inputs: the torch path then raises)."""
    import sys

    from nnue.pipeline.features.lookup import TableEncoder

    enc = net.features.encode
    if not isinstance(enc, TableEncoder) or not enc.king_relative or sys.byteorder != "little":
        return None

    def build(table, ftw):
        if table.numel() and int(table.max()) >= ftw.shape[0]:
            return None
        return np.ascontiguousarray(table.numpy())
    return cached(net, ("compiled_table_sf", id(enc)), (enc.table_cpu, net.ft_weight), build)


def _aligned64(a: np.ndarray) -> np.ndarray:
    """``a`` C-contiguous and starting on a 64-byte boundary (a copy where it is not). The
    register row sums load whole 64-byte blocks of each row; rows that start off a cache line
    split every load over two lines: Stockfish 15.1's own net, read from its ``.nnue`` bytes
    (rows at an odd offset of the file), took 12.4 ms per 4,096 positions against 8.9 ms for
    the same tensors copied (scratch measurement, one core, load ~3)."""
    a = np.ascontiguousarray(a)
    if a.ctypes.data % 64 == 0:
        return a
    raw = np.empty(a.nbytes + 64, np.uint8)
    off = -raw.ctypes.data % 64
    out = raw[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _prepared_sf(net):
    """The arguments of :func:`_eval_boards_sf` besides the boards and the scratch, made once per
    net (again when a tensor is replaced or changed in place); None when it does not apply."""
    def build(ftw, ftb, psqt, w0, b0, w1, b1, w2, b2):
        table = _table_sf(net)
        if table is None or not applicable_sfnnv5(net):
            return None

        def pairs(t):  # (S, M, K) -> (S, K // 2, M, 2) int16: the weights in input pairs (_gemv_pairs)
            s, m, k = t.shape
            return np.ascontiguousarray(t.reshape(s, m, k // 2, 2).permute(0, 2, 1, 3).numpy().astype(np.int16))
        i64 = lambda t: np.ascontiguousarray(t.numpy().astype(np.int64))  # noqa: E731
        lut = np.ascontiguousarray(net.buckets.of_piece_count(torch.arange(65, dtype=torch.int64)).numpy())
        return (table, lut, _aligned64(ftw.numpy()), _aligned64(ftb.numpy()), _aligned64(psqt.numpy()), pairs(w0), i64(b0), pairs(w1), i64(b1), i64(w2[:, 0]),
                i64(b2[:, 0]))
    return cached(net, "compiled_sf", (net.ft_weight, net.ft_bias, net.psqt, net.fc0_weight, net.fc0_bias,
                                       net.fc1_weight, net.fc1_bias, net.fc2_weight, net.fc2_bias), build)


def values_sfnnv5(net, boards: torch.Tensor):
    """``(values, bucket)``, each (N,) int64: Stockfish 15.1's internal value
    (``NNUE::evaluate(pos, false)``, stm POV; :func:`nnue.inference.sfnnv5.values` gives the
    same integers) and the layer stack of each packed board (N, 32) uint8 (CPU); None when
    :func:`applicable_sfnnv5` says no or the feature set has no king-relative table. Raises
    ValueError for a board without exactly one king a side or with an unused piece code, or
    with more than 32 occupied squares, naming its row. Never raises on overflow: every sum
    wraps as the engine's do."""
    prep = _prepared_sf(net)
    if prep is None:
        return None
    n, h = boards.shape[0], net.ft_weight.shape[1]
    out, bucket = np.empty(n, np.int64), np.empty(n, np.int64)
    status = np.zeros(3, np.int64)
    words = (boards if boards.is_contiguous() else boards.contiguous()).numpy().view(np.uint64)
    _eval_boards_sf(words, *prep, np.empty((2, h), np.int16), np.empty(h, np.int16), np.empty(32, np.int16),
                    np.empty(32, np.int32), out, bucket, status)
    if status[0]:
        _raise(status, "values_sfnnv5")
    return torch.from_numpy(out), torch.from_numpy(bucket)
