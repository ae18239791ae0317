"""The exact-arithmetic core every integer net kind shares: the feature transformer (float32
``embedding_bag`` over int16 rows, exact below 2^24), the int16/int32 range checks, the int8
``torch._int_mm`` exactness probe and weight digits, and the derived-tensor cache.

Used by the kinds with an ``l0w``/``l0b`` feature transformer (perspective, deep, tiny:
:mod:`nnue.inference.kinds`), :mod:`nnue.inference.dense` and :mod:`nnue.inference.sparse_l1`;
every name here is public. Nets are duck-typed: anything with ``l0w`` (F, H) int16, ``l0b``
(H,) int16, ``features`` and ``buckets`` (:class:`nnue.inference.net.NetFile`).
"""
from __future__ import annotations

import numpy as np
import torch

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def cached(net, key, sources: tuple[torch.Tensor, ...], build):
    """A value derived from some of the net's tensors, built once and kept on the net; rebuilt
    when one of ``sources`` is replaced or modified in place (tensor ``_version``)."""
    cache = net.__dict__.setdefault("_float_cache", {})
    stamp = tuple(t._version for t in sources)
    hit = cache.get(key)
    if hit is None or len(hit[0]) != len(sources) or any(a is not b for a, b in zip(hit[0], sources)) \
            or hit[1] != stamp:
        hit = cache[key] = (sources, stamp, build(*sources))
    return hit[2]


def l0_rows(net) -> tuple[np.ndarray, np.ndarray]:
    """The feature transformer's rows as the incremental accumulator adds them: (``l0w`` (F, H)
    int32, ``l0b`` (H,) int32) NumPy arrays (int32 rows: NumPy adds them without a cast), made
    once per net (the ``accumulator_table`` of the kinds whose accumulators are these sums)."""
    return cached(net, "l0_rows", (net.l0w, net.l0b),
                  lambda w, b: (w.numpy().astype(np.int32), b.numpy().astype(np.int32)))


# Exact integer evaluation. Every value below is an integer; the heavy steps run on float or
# int8 kernels only where a bound proves them exact (each function states its bound):
#
# 1. feature transformer: one float32 embedding_bag per step of positions over the rows of
#    ft_table (a zero row for the −1 padding, the bias row once per bag): a bag sums at most
#    A + 1 ≤ 257 int16 values, every partial sum is below 257·2^15 < 2^24, and float32 holds
#    every integer below 2^24, so no addition rounds whatever order the kernel adds in;
# 2. L1 sums of every bucket needed (see l1_plan): int8 torch._int_mm on byte digits of the
#    activations and int8 digits of the weights (int32 partial sums below K·2^13 < 2^31,
#    recombined in int64), or float64 (products < 2^31, sums < 2^53);
# 3. the position's own bucket, the int32 checks and the truncating divisions, in int64.

# Positions per step of forward_int / evaluate. Measured on the bench machine (one core): 512
# keeps the step's temporaries (1 MiB of float32 accumulators at H = 256) in L2 and recycled by
# the allocator; 1024 makes glibc hand back and re-fault pages (~1,500 page faults per 4,096
# evals, +50 % time), 256 and below pay the per-op dispatch more often.
STEP = 512

def ft_table(net) -> torch.Tensor:
    """(F + 2, H) float32: row 0 zeros (where −1 padding points), row f + 1 = ``l0w[f]``, row
    F + 1 = ``l0b``, so that a bag of (indices + 1) and F + 1 sums an accumulator, bias included."""
    def build(l0w, l0b):
        h = l0w.shape[1]
        return torch.cat((torch.zeros(1, h), l0w.float(), l0b.float().view(1, h))).contiguous()
    return cached(net, "ft_table", (net.l0w, net.l0b), build)


_OFFSETS: dict[tuple[int, int], torch.Tensor] = {}


def embedding_sum(table: torch.Tensor, bags: torch.Tensor) -> torch.Tensor:
    """Sum of the rows of ``table`` named by each row of ``bags`` (2-D, equal-width bags):
    ``torch.embedding_bag`` (mode sum) with cached int32 offsets, as
    ``F.embedding_bag(bags, table, mode="sum")`` computes it, less the per-call Python work."""
    nb, w = bags.shape
    if w == 0:
        return torch.zeros((nb, table.shape[1]))
    offsets = _OFFSETS.get((nb, w))
    if offsets is None:
        offsets = torch.arange(0, nb * w, w, dtype=torch.int32)
        if nb == 2 * STEP:  # full steps only: the cache stays small (≤ 257 widths)
            _OFFSETS[(nb, w)] = offsets
    return torch.embedding_bag(table, bags.reshape(-1), offsets, False, 0)[0]


def make_bags(stm: torch.Tensor, nstm: torch.Tensor, bias_row: int | None = None) -> torch.Tensor:
    """(m, w) −1-padded index lists of both perspectives -> (2m, w (+ 1)) int32 bags of
    :func:`ft_table` rows: row 2i = stm[i] + 1, row 2i + 1 = nstm[i] + 1, each led by
    ``bias_row`` when given."""
    m, w = stm.shape
    b = 0 if bias_row is None else 1
    idx = torch.empty((m, 2, w + b), dtype=torch.int32)
    if b:
        idx[:, :, 0] = bias_row
    torch.add(stm, 1, out=idx[:, 0, b:])
    torch.add(nstm, 1, out=idx[:, 1, b:])
    return idx.view(2 * m, w + b)


def check_indices(net, *lists: torch.Tensor) -> None:
    f = net.l0w.shape[0]
    for t in lists:
        if t.numel() and int(t.max()) >= f:
            raise IndexError(f"feature index {int(t.max())} out of range for {f} inputs")


def accumulators_f32(net, indices: torch.Tensor) -> torch.Tensor:
    """Accumulators as exact integers held in float32: (N, A) indices, −1 padded (any negative
    value is padding) -> (N, H) float32, bias included.

    One ``embedding_bag`` over the rows of :func:`ft_table` (the zero row for padding, the bias
    row in every bag): each partial sum adds at most A + 1 ≤ 257 int16 values and stays below
    2^24 in magnitude, so float32 holds it exactly in any summation order."""
    if indices.shape[1] > 256:
        raise ValueError("more than 256 active features would break the float32 exactness bound")
    check_indices(net, indices)
    table = ft_table(net)
    n, a = indices.shape
    idx = torch.empty((n, a + 1), dtype=torch.int32)
    idx[:, 0] = table.shape[0] - 1
    torch.add(indices.clamp(min=-1), 1, out=idx[:, 1:])
    return embedding_sum(table, idx) if n else torch.zeros((0, table.shape[1]))




def accumulators(net, indices: torch.Tensor) -> torch.Tensor:
    """Integer feature transformer: (N, A) int32 indices, −1 padded -> (N, H) int32.

    Runs as a float32 ``embedding_bag`` (:func:`accumulators_f32`): every partial sum of ≤ 257
    int16 values (the rows and the bias) is below 2^24 in magnitude, so float32 holds it exactly
    (DESIGN.md, "exact integer arithmetic").
    """
    return accumulators_f32(net, indices).to(torch.int32)


def check_int32(t, what: str) -> None:
    """OverflowError naming ``what`` when a value of ``t`` (a tensor, or one Python int) leaves
    the int32 range an engine holds its sums in."""
    if isinstance(t, int):
        if t < INT32_MIN or t > INT32_MAX:
            raise OverflowError(f"{what} leaves the int32 range ({t})")
    elif t.numel():
        lo, hi = torch.aminmax(t)
        if lo < INT32_MIN or hi > INT32_MAX:
            raise OverflowError(f"{what} leaves the int32 range ({int(lo)}..{int(hi)})")


def trunc_div(a, b: int):
    """C integer division (truncates toward zero; Python's ``//`` floors): ``a`` a Python int or
    an integer tensor, ``b`` > 0 an int. Same type as ``a``."""
    if isinstance(a, int):
        return a // b if a >= 0 else -((-a) // b)
    return torch.div(a, b, rounding_mode="trunc")


def to_centipawns(out, scheme):
    """The last step of every kind but sfnnv5: the output sum (int or int64 tensor; units of
    QA·QB) -> centipawns, ``out · SCALE / (QA · QB)`` truncated toward zero (nnue-pytorch's and
    bullet's output scaling; the QuantScheme in the net's header gives QA, QB and SCALE)."""
    return trunc_div(out * scheme.scale, scheme.qa * scheme.qb)


def acc_int16_proven(net, width: int) -> bool:
    """True when no accumulator of at most ``width`` active features can leave int16, whatever
    the features (repeats included): |l0b[h]| + width·max_f |l0w[f][h]| ≤ 32767 for every
    neuron h. The per-step range check is skipped then (the export audit's bound, with the 32
    largest rows, is tighter, but needs to know which rows can meet)."""
    def build(l0w, l0b):
        colmax = (l0w.to(torch.int64).abs().amax(0) if l0w.shape[0]
                  else torch.zeros_like(l0b, dtype=torch.int64))
        return {"colmax": colmax, "absb": l0b.to(torch.int64).abs(), "by_width": {}}
    c = cached(net, "acc_bound", (net.l0w, net.l0b), build)
    ok = c["by_width"].get(width)
    if ok is None:
        ok = c["by_width"][width] = not c["absb"].numel() or \
            bool((c["absb"] + width * c["colmax"]).max() <= 32767)
    return ok


def check_acc_int16(acc) -> None:
    """OverflowError when an accumulator value (a tensor or a NumPy array, any integer or exact
    float dtype) leaves int16, the feature transformer's output type."""
    if isinstance(acc, torch.Tensor):
        if not acc.numel():
            return
        lo, hi = torch.aminmax(acc)
    else:
        if not acc.size:
            return
        lo, hi = acc.min(), acc.max()
    if lo < -32768 or hi > 32767:
        raise OverflowError(f"accumulator leaves int16 ({int(lo)}..{int(hi)})")


_INT_MM_OK: dict[tuple, bool] = {}


def int_mm_is_exact(k2: int, cols: int) -> bool:
    """Whether ``torch._int_mm`` computes (M, k2) × (k2, cols) int8 products exactly here:
    checked once per shape, for several row counts, on the extreme inputs of the int8 L1 path
    (inputs −128 and 127 against digits −64 and 64: the largest pair sums a saturating u8×s8
    kernel could see) and on random ones, against float64 (exact: |sum| ≤ k2·2^14 < 2^53).
    Not a formality: with ONEDNN_MAX_CPU_ISA=AVX512_CORE (AVX-512 without VNNI) this torch's
    one-column product returns wrong sums for positive digits, while 16 columns are exact."""
    key = (k2, cols, torch.get_num_threads(),
           torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled)
    ok = _INT_MM_OK.get(key)
    if ok is None:
        ok = True
        g = torch.Generator().manual_seed(0)
        try:
            for m in (1, 2, 5, 64, 333, STEP):
                mats = [(torch.full((m, k2), a, dtype=torch.int8),
                         torch.full((k2, cols), d, dtype=torch.int8)) for a in (-128, 127) for d in (-64, 64)]
                mats.append((torch.randint(-128, 128, (m, k2), generator=g, dtype=torch.int8),
                             torch.randint(-64, 65, (k2, cols), generator=g, dtype=torch.int8)))
                for a, d in mats:
                    ref = (a.double() @ d.double()).to(torch.int64)
                    ok = ok and torch.equal(torch._int_mm(a, d).to(torch.int64), ref)
        except RuntimeError:  # no int8 product on this build
            ok = False
        _INT_MM_OK[key] = ok
    return ok


def weight_digits(w: torch.Tensor) -> list[torch.Tensor]:
    """int64 weights -> digits d_j with w = Σ_j 128^j·d_j, every |d_j| ≤ 64: [w] itself when
    every |w| ≤ 64, else balanced base 128 (each d_j in [−64, 63]; 2 digits for |w| ≤ 8191,
    3 for any int16). Exact integer arithmetic."""
    if not w.numel() or int(w.abs().max()) <= 64:
        return [w]
    digits = []
    while bool((w != 0).any()):
        d = torch.remainder(w + 64, 128) - 64
        digits.append(d)
        w = torch.div(w - d, 128, rounding_mode="floor")  # exact: w − d ≡ 0 (mod 128)
    return digits


def bag_rows(net, enc) -> torch.Tensor | None:
    """For a :class:`~nnue.pipeline.features.lookup.TableEncoder`: its table mapped to rows of
    :func:`ft_table` (feature f -> f + 1, padding −1 -> the zero row 0). None when the table
    reaches past the net's inputs (the generic path then raises the IndexError)."""
    def build(table, l0w):
        return None if table.numel() and int(table.max()) >= l0w.shape[0] else table + 1
    return cached(net, ("bag_table", id(enc)), (enc.table_cpu, net.l0w), build)



def sorted_steps(net, boards: torch.Tensor, chunk: int):
    """The feature-transformer half of :func:`evaluate`, shared with deep nets.

    boards: (N, 32) uint8. Returns ``(order, bucket, first, steps)``: ``order`` (N,) int64, the
    stable sort of the positions by piece count; ``bucket`` (N,) int64, the output buckets in
    that order (non-decreasing); ``first`` (buckets + 1) list, where each bucket starts; and
    ``steps``, a generator of ``(s, e, acc, b_lo, b_hi)``: the sorted positions s..e (at most
    ``STEP``), their accumulators ``acc`` (2·(e − s), H), rows 2i stm and 2i + 1 nstm, bias
    included, exact integers as int16 (when proven in range) or float32 (range-checked), and
    the step's first and last bucket. Raises what the encoder raises (bad boards), IndexError
    for features beyond the net's inputs, OverflowError for an accumulator outside int16."""
    from nnue.pipeline.features.board_tensor import piece_count
    from nnue.pipeline.features.lookup import TableEncoder

    fs, buckets = net.features, net.buckets
    n = boards.shape[0]
    pieces = piece_count(boards)  # also validates shape and dtype
    pieces, order = torch.sort(pieces, stable=True)
    boards = boards.index_select(0, order)
    bucket = buckets.of_piece_count(pieces)  # = buckets.of(boards), non-decreasing
    first = torch.searchsorted(bucket, torch.arange(buckets.count + 1)).tolist()

    def steps():
        enc = fs.encode
        bag_table = bag_rows(net, enc) if isinstance(enc, TableEncoder) else None
        table = ft_table(net)
        # every step's last piece count and first and last bucket, in one read each
        starts = list(range(0, n, STEP))
        ends = starts[1:] + [n]
        last = torch.tensor(ends) - 1
        widths, b_hi = pieces[last].tolist(), bucket[last].tolist()
        b_lo = bucket[torch.tensor(starts)].tolist()
        per_encode = max(chunk, 4096) // STEP * STEP
        proven: dict[int, bool] = {}
        bias16, bias32 = net.l0b.view(1, -1), table[-1]
        for i, s in enumerate(starts):
            e, m = ends[i], ends[i] - starts[i]
            if s % per_encode == 0:  # encode the next per_encode positions
                s0, b = s, boards[s:s + per_encode]
                if bag_table is not None:
                    keys, offsets = enc.lookup_keys(b)
                    a = keys.shape[1]
                    keys, offsets = keys.unsqueeze(1), offsets.unsqueeze(2)
                else:
                    stm, nstm = enc(b)
                    check_indices(net, stm, nstm)
                    a = stm.shape[1]
            w = min(a, widths[i])
            if bag_table is not None:
                key = torch.empty((m, 2, w), dtype=torch.int32)
                torch.add(keys[s - s0:e - s0, :, :w], offsets[s - s0:e - s0], out=key)
                bags = bag_table.index_select(0, key.view(-1)).view(2 * m, w)
            else:
                st, ns = stm[s - s0:e - s0], nstm[s - s0:e - s0]
                if w < a and (int(st[:, w:].max()) >= 0 or int(ns[:, w:].max()) >= 0):
                    w = a
                bags = make_bags(st[:, :w], ns[:, :w])
            acc = embedding_sum(table, bags)  # bias not included
            if w not in proven:
                proven[w] = acc_int16_proven(net, w)
            if proven[w]:  # |Σ rows| + |l0b| ≤ 32767: int16 holds the sum and the biased sum
                acc = acc.to(torch.int16).add_(bias16)
            else:
                check_acc_int16(acc.add_(bias32))
            yield s, e, acc, b_lo[i], b_hi[i]

    return order, bucket, first, steps()


