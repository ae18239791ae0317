"""The compiled (numba) building blocks every kind's compiled kernels share: the packed-board
decoder and feature lookup, the feature transformer's register-held row sums, the int16 × int16
pair products of the dense layers, C's wrapping and truncating integer ops, and the host-side
helpers (lookup tables, scratch, status codes).

Each kind with compiled kernels has its own ``compiled`` module beside its kind module
(:mod:`nnue.inference.kinds.perspective.compiled`, :mod:`nnue.inference.kinds.deep.compiled`,
:mod:`nnue.inference.kinds.sfnnv5.compiled`): one pass per position from the packed board to the
kind's output, built from these pieces. Per position (the first three steps are shared):

1. decode the 32-byte packed board (DESIGN.md, "Packed board"): the occupied squares in
   ascending order (more than 32 is refused: the format holds 32 piece codes), each slot's key
   ``16·square + code``, both king squares and the side to move; a king-relative feature set
   needs exactly one king a side and no unused piece code (7 or 15), as
   :func:`nnue.pipeline.features.lookup.king_squares` requires (:func:`lookup`);
2. each perspective's features from the feature set's own lookup table
   (:class:`~nnue.pipeline.features.lookup.TableEncoder`: entry ``offset_p + key``, −1 = no
   feature), the table offsets of :meth:`TableEncoder.lookup_keys` (:func:`table_of`);
3. the feature transformer, ``acc_p = l0b + Σ l0w[f]`` (:func:`rows_sum`, :func:`accumulate`):
   the columns in blocks of one 512-bit register, each block summed over all the position's rows
   in a register (one load and one add per row and block) and stored once. int16 lanes (wrapping
   adds) when :func:`nnue.inference.exact.acc_int16_proven` shows that no partial sum of the
   set's widest list can leave int16 (then none wraps), else int32 lanes from sign-extended rows
   (exact: |sum| ≤ 257·2^15 < 2^31 for the at most 256 features ``forward_int`` accepts, the bias
   included) and a range check against int16 per position (:func:`leaves_int16`, :func:`scratch`).

Why a register-held accumulator: numba's plain loop ``acc[h] += w[h]`` keeps the accumulator in
memory (a load and a store per row and vector) and measured 2.1 ms for the 4,096 sample
positions of ``nnue bench infer`` (chess768 → 256, one core), slower than torch's float32
``embedding_bag`` (1.8 ms, FBGEMM's generated kernel); the LLVM vector loop of
:func:`rows_sum` took 0.86 ms on the same lists (side by side in one process; inside the whole
kernel the feature-transformer phase measures 1.07 ms: ``bench/results/infer_cpu.json``,
``allocator_neutral.profile``).

Only serial kernels (one thread, ``nogil``, scratch allocated per call, so threads may call them
at once): the batch comparison of ``nnue bench infer`` is one core. numba is imported when this
module (or a kind's ``compiled`` module) is; the kinds import their compiled module on first use
(:func:`nnue.inference.backends.kernels`) and fall back to their torch paths when numba is missing
or the kernels decline a net. The kernels are compiled on first use and cached by numba
(``cache=True``, next to each module or in ``NUMBA_CACHE_DIR``).
"""
from __future__ import annotations

import numpy as np
import torch
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from nnue.pipeline.compiled.bits import lsb

from .exact import acc_int16_proven, cached

#: activation codes of the kernels after the feature transformer (the L0 activations of
#: :mod:`nnue.spec.activations`); an L0 activation not listed here takes the torch path
ACT_CODES = {"crelu": 0, "screlu": 1, "pairwise_crelu": 2}
REG_BYTES = 64  # one AVX-512 register; on narrower machines LLVM splits each block op in two
NUM_KEYS = 65 * 16  # slot keys: 16·square + code, square 64 = empty (board_tensor.NUM_KEYS)


# ------------------------------------------------------------------------------------- kernels

@intrinsic
def rows_sum(typingctx, acc, w, bias, idx, count):
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
        lanes = REG_BYTES * 8 // lane_bits
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
def accumulate(acc, l0w, l0b, idx, count):
    """``acc = l0b + Σ_{s < count} l0w[idx[s]]`` in acc's dtype: the register blocks of
    :func:`rows_sum`, then the last H mod L columns in a plain loop."""
    rows_sum(acc, l0w, l0b, idx, count)
    h = l0w.shape[1]
    lanes = 64 // acc.itemsize
    for c in range(h - h % lanes, h):
        t = np.int32(l0b[c])
        for s in range(count):
            t += l0w[idx[s], c]
        acc[c] = t  # int16 scratch: exact, the sum is proven within int16


@njit(cache=True, nogil=True, inline="always")
def leaves_int16(acc0, acc1, status) -> bool:
    """True, with status = (2, min, max) of both accumulators, when a value leaves int16."""
    lo = min(acc0.min(), acc1.min())
    hi = max(acc0.max(), acc1.max())
    if lo < -32768 or hi > 32767:
        status[0], status[1], status[2] = 2, lo, hi
        return True
    return False


@njit(cache=True, nogil=True, inline="always")
def lookup(words, i, table, king_rel, keys, idx0, idx1, status):
    """Steps 1–2 of the module docstring for board i of ``words`` ((N, 4) uint64,
    :func:`board_words`), ``table`` (:func:`table_of`) king-relative or not: the features of the
    stm perspective into idx0 and of the nstm perspective into idx1, the slot keys into keys
    (32,). Returns (pieces, count0, count1), or pieces −1 with status set for a board that
    cannot be encoded (the codes of :func:`raise_status`: 1 a king-relative set without one king
    a side or with an unused piece code, 3 more than 32 occupied squares)."""
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
        o0 = (btm * 64 + (bk if btm else wk)) * NUM_KEYS
        o1 = ((1 - btm) * 64 + (wk if btm else bk)) * NUM_KEYS
    else:
        o0 = btm * NUM_KEYS
        o1 = (1 - btm) * NUM_KEYS
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


@intrinsic
def gemv_pairs(typingctx, x, wp, out):
    """``out[m] = Σ_{j < 2·(K // 2)} x[j]·w[m, j]`` in int32 lanes for the outputs m < 16·(M //
    16) (the caller adds input K − 1 when K is odd and computes the last M mod 16 outputs): x
    (K,) int16, wp (K // 2, M, 2) int16 with ``wp[p, m, t] = w[m, 2p + t]`` (the weights in
    input pairs), out (≥ M,) int32; all C-contiguous. Per pair of inputs and block of 16
    outputs: the pair (4 bytes) broadcast to 16 lanes, 32 weights loaded, the 32 products of
    sign-extended int16s (exact in int32), the adjacent products added (even lanes + odd
    lanes: the pattern x86's ``vpmaddwd`` computes in one instruction, with AVX-512 VNNI
    ``vpdpwssd`` with the add) and the 16 sums added to one of four registers of int32 lanes
    (pairs taken four at a time). Exact when every partial sum stays within int32: the caller's
    bound (the deep kernel's ``dense_layer``, ``narrow``)."""
    if not all(isinstance(t, types.Array) for t in (x, wp, out)) or x.dtype != types.int16 \
            or wp.dtype != types.int16 or out.dtype != types.int32:
        return None
    return types.void(x, wp, out), _gemv_codegen(False)


@intrinsic
def gemv_pairs_nz(typingctx, x, wp, out, pidx, count):
    """:func:`gemv_pairs` over the listed input pairs only: ``out[m] = Σ_{s < count} (x[2p]·w[m,
    2p] + x[2p + 1]·w[m, 2p + 1])`` with p = pidx[s] (pidx (≥ count,) int32, each < K // 2: the
    caller's duty); the same exact arithmetic. The pairs left out must be zero inputs (then the
    sum is :func:`gemv_pairs`'s)."""
    if not all(isinstance(t, types.Array) for t in (x, wp, out, pidx)) or x.dtype != types.int16 \
            or wp.dtype != types.int16 or out.dtype != types.int32 or pidx.dtype != types.int32:
        return None
    return types.void(x, wp, out, pidx, count), _gemv_codegen(True)


def _gemv_codegen(sparse: bool):
    """The code of :func:`gemv_pairs` (``sparse``: of :func:`gemv_pairs_nz`, pairs from a list)."""
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


# C's integer ops on int64 values, for kernels that compute an engine's wrapping int32 sums
# (sfnnv5): addition and multiplication modulo 2^k do not depend on the order or on intermediate
# wraps, so a sum computed exactly (or in wrapping int32 lanes) and wrapped once is the engine's.

@njit(cache=True, nogil=True, inline="always")
def wrap32(t):
    """int64 -> the same value wrapped to int32 (two's complement), as int64."""
    return ((t + np.int64(2147483648)) & np.int64(4294967295)) - np.int64(2147483648)


@njit(cache=True, nogil=True, inline="always")
def tdiv(a, d):
    """C's ``a / d`` (truncating toward zero) for d > 0."""
    q = abs(a) // d
    return -q if a < 0 else q



# ------------------------------------------------------------------------------------- host side

def scratch(net, width: int) -> tuple[np.ndarray, bool]:
    """(2, H) accumulator scratch: int16 when no list of ``width`` features can leave int16
    (no check needed), else int32 with the per-position check."""
    proven = acc_int16_proven(net, width)
    return np.empty((2, net.l0w.shape[1]), np.int16 if proven else np.int32), not proven


def raise_status(status: np.ndarray, what: str) -> None:
    """Raise what a kernel's ``status`` (3,) int64 reports: (0, ·, ·) done, nothing; (1, i, ·)
    board i has not exactly one king a side or an unused piece code (king-relative sets only;
    ValueError); (2, lo, hi) an accumulator left int16 (OverflowError with its min and max);
    (3, i, ·) board i has more than 32 occupied squares (ValueError); any other code:
    RuntimeError naming ``what`` (the kernel's own codes are the caller's to raise first)."""
    if status[0] == 1:
        raise ValueError(f"board {int(status[1])}: a king-relative feature set needs exactly one king of "
                         f"each colour and valid piece codes")
    if status[0] == 3:
        raise ValueError(f"board {int(status[1])}: more than 32 occupied squares (a packed board holds 32 pieces)")
    if status[0] == 2:
        raise OverflowError(f"accumulator leaves int16 ({int(status[1])}..{int(status[2])})")
    if status[0] != 0:
        raise RuntimeError(f"{what}: unexpected kernel status {status.tolist()}")


def table_of(net, rows: torch.Tensor, king_relative: bool = False):
    """The feature set's lookup table as the board kernels read it ((T,) int32, values < F),
    whether it is king-relative, and the set's widest list: ``(table, king_rel, max_active)``.
    rows: the net's feature-transformer weights (F rows), the bound every table value must stay
    below. None when the set is not a TableEncoder (or not a king-relative one, with
    ``king_relative``), on a big-endian machine (the kernels read boards as little-endian
    words), or when the table reaches past the net's inputs (the torch path then raises the
    IndexError)."""
    import sys

    from nnue.pipeline.features.lookup import TableEncoder

    enc = net.features.encode
    if not isinstance(enc, TableEncoder) or (king_relative and not enc.king_relative) or sys.byteorder != "little":
        return None

    def build(table, w):
        if table.numel() and int(table.max()) >= w.shape[0]:
            return None
        return np.ascontiguousarray(table.numpy())
    t = cached(net, ("compiled_table", id(enc)), (enc.table_cpu, rows), build)
    return None if t is None else (t, enc.king_relative, enc.max_active)


def bucket_lut(net) -> np.ndarray:
    """(65,) int64: the net's output bucket of each piece count 0..64 (the bucket function is
    one of the piece count: :meth:`OutputBuckets.of_piece_count`), made once per net."""
    lut = net.__dict__.get("_compiled_bucket_lut")
    if lut is None or lut[0] != net.arch.get("output_buckets"):
        lut = (net.arch.get("output_buckets"), np.ascontiguousarray(
            net.buckets.of_piece_count(torch.arange(65, dtype=torch.int64)).numpy()))
        net.__dict__["_compiled_bucket_lut"] = lut
    return lut[1]


def board_words(boards: torch.Tensor) -> np.ndarray:
    """Packed boards (N, 32) uint8 (CPU) as the kernels read them: (N, 4) uint64, little-endian
    (word 0 the occupancy, words 1–2 the 32 piece nibbles, low nibble first, byte 24 = the low
    byte of word 3: bit 7 black to move)."""
    return (boards if boards.is_contiguous() else boards.contiguous()).numpy().view(np.uint64)


def aligned64(a: np.ndarray) -> np.ndarray:
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

