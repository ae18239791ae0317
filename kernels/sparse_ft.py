"""Fused feature transformer in Triton: both perspectives' gather-sums and the activation, one launch.

Forward (:func:`_sparse_ft_pair_fwd_fused`), for each position b and perspective p (stm, nstm):

    acc_p = bias + Σ_{i valid} weight[idx_p[b, i]]       fp32 accumulation, −1 (any negative) = padding
    out[b, p·H' : (p+1)·H'] = act(acc_p)                 stored in weight's dtype

with H' = H, or H/2 for ``pairwise_crelu`` (crelu(acc[:H/2])·crelu(acc[H/2:]), the stm block first).
The same definitions as :func:`nnue.kernels.reference.sparse_ft_pair`, the spec this is tested
against; the activations' device code is shared with :mod:`nnue.kernels.activations`.

Backward (:func:`_sparse_ft_pair_bwd_fused`): ``grad_acc = grad_out · act'(acc)`` from the fp32
accumulators the forward saved (B·2·H·4 bytes, far less than the 32 gathered rows a recompute
would read again), scatter-added into an fp32 weight gradient with relaxed atomics (repeated
indices, within a row or across rows, simply add twice), and the bias gradient reduced per
program into a small (programs, H) buffer that the host sums: deterministic, and no contention
on H addresses. (The weight gradient's summation order varies from run to run, as with any
atomic scatter-add, the CUDA reference's included.) Nothing dense of size (B, F) is ever built.

Memory traffic of a launch is counted in ``bench/bench_sparse_ft.py``; the targets (issue 5) are
≥ 3× the EmbeddingBag reference for forward + backward and ≥ 60 % of the bandwidth floor on an H200.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch.autograd.function import once_differentiable

from nnue.spec import activations as spec

from .activations import check_device, triton_ops

#: the activations the fused kernel takes: every one with Triton code (:func:`triton_ops`), as at import
ACTIVATIONS = tuple(n for n, a in spec.ACTIVATIONS.items() if a.triton_fwd is not None)
WEIGHT_DTYPES = (torch.float32, torch.bfloat16)
INDEX_DTYPES = (torch.int32, torch.int64)

# Host-side sizing. A program holds a (BLOCK_A, BLOCK_H) tile of gathered weights: 32 × 256 fp32 =
# 32 KiB = 64 values a thread at 4 warps, all loads in flight at once to cover DRAM latency. The
# sm_90 cubins (python -m nnue.kernels.compile_check) use 80 registers for the forward (117 for
# pairwise) and 122-128 for the backward (200-240 for pairwise at its halved block), no spills.
# Not timed on a GPU yet (none in the session that wrote this): bench_sparse_ft.py --sweep times
# the alternatives, and these constants should follow its result.
TILE_ELEMENTS = 32 * 256
MAX_BLOCK_H = 256
MAX_ACTIVE = 256            # index slots per row; chess768 and HalfKAv2_hm need ≤ 32
BWD_ROWS = 16               # positions per backward program: bias partials = B/16 rows of H floats
NUM_WARPS = 4
MAX_GRID_DIM = 65535        # CUDA's limit on grid axes 1 and 2


@triton.jit
def _sparse_ft_pair_fwd_fused(
    w_ptr,     # (F, H) weight, row-major contiguous, fp32 or bf16: row f holds feature f's H weights
    b_ptr,     # (H,) bias, weight's dtype
    stm_ptr,   # (B, A) int32/int64 active features of the side to move, negative = padding
    nstm_ptr,  # (B, A) the same for the side not to move
    out_ptr,   # (B, 2·HO) output, weight's dtype: [act(acc_stm), act(acc_nstm)]
    acc_ptr,   # (B, 2, H) fp32 pre-activation accumulators, written only if SAVE_ACC
    F, H, HO, A,  # features, accumulator width, output width per perspective (H or H/2), slots per row
    FWD: tl.constexpr, PAIRS: tl.constexpr,  # the activation's forward; PAIRS: fwd(half 1)·fwd(half 2)
    SAVE_ACC: tl.constexpr, BLOCK_A: tl.constexpr, BLOCK_H: tl.constexpr,
):
    # One program: one position × one block of BLOCK_H output columns, both perspectives.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    col_ok = cols < HO
    slots = tl.arange(0, BLOCK_A)
    for p in tl.static_range(2):
        if p == 0:
            idx_row = stm_ptr + row * A
        else:
            idx_row = nstm_ptr + row * A
        idx = tl.load(idx_row + slots, mask=slots < A, other=-1).to(tl.int64)
        # idx >= F would read outside the weight: masked here for memory safety, and reported by the
        # host's asynchronous range check.
        valid = (idx >= 0) & (idx < F)
        tile_mask = valid[:, None] & col_ok[None, :]
        rows = w_ptr + idx[:, None] * H
        acc = tl.load(b_ptr + cols, mask=col_ok, other=0.0).to(tl.float32)
        acc += tl.sum(tl.load(rows + cols[None, :], mask=tile_mask, other=0.0).to(tl.float32), axis=0)
        if PAIRS:  # pairwise_crelu: the partner column HO to the right, same rows
            acc2 = tl.load(b_ptr + HO + cols, mask=col_ok, other=0.0).to(tl.float32)
            acc2 += tl.sum(tl.load(rows + HO + cols[None, :], mask=tile_mask, other=0.0).to(tl.float32), axis=0)
            y = FWD(acc) * FWD(acc2)
        else:
            y = FWD(acc)
        tl.store(out_ptr + row * 2 * HO + p * HO + cols, y.to(out_ptr.dtype.element_ty), mask=col_ok)
        if SAVE_ACC:
            acc_row = acc_ptr + (row * 2 + p) * H
            tl.store(acc_row + cols, acc, mask=col_ok)
            if PAIRS:
                tl.store(acc_row + HO + cols, acc2, mask=col_ok)


@triton.jit
def _scatter_add_rows(gw_ptr, idx, valid, cols, col_ok, g, H):
    """gw[idx[i], cols] += g for every valid slot i (relaxed atomics: repeats add up)."""
    ptrs = gw_ptr + idx[:, None] * H + cols[None, :]
    tl.atomic_add(ptrs, g[None, :], mask=valid[:, None] & col_ok[None, :], sem="relaxed")


@triton.jit
def _sparse_ft_pair_bwd_fused(
    gout_ptr,     # (B, 2·HO) gradient of the output, contiguous, weight's dtype
    acc_ptr,      # (B, 2, H) fp32 accumulators saved by the forward (unread when LINEAR)
    stm_ptr,      # (B, A) int32/int64 indices, as in the forward
    nstm_ptr,     # (B, A)
    gw_ptr,       # (F, H) fp32 weight gradient, zero-initialised, accumulated with atomics
    gb_part_ptr,  # (cdiv(B, ROWS), H) fp32 per-program partial bias gradients (written)
    B, F, H, HO, A,
    FWD: tl.constexpr, GRAD: tl.constexpr,  # the activation's forward and derivative (triton_ops)
    PAIRS: tl.constexpr, LINEAR: tl.constexpr,  # pairwise product; derivative 1 (no accumulator)
    ROWS: tl.constexpr, BLOCK_A: tl.constexpr, BLOCK_H: tl.constexpr,
):
    # One program: ROWS positions × one block of BLOCK_H output columns, both perspectives.
    rb = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    col_ok = cols < HO
    slots = tl.arange(0, BLOCK_A)
    gb = tl.zeros((BLOCK_H,), tl.float32)
    gb2 = tl.zeros((BLOCK_H,), tl.float32)   # pairwise: the partner columns' bias gradient
    for r in range(ROWS):
        row = (rb * ROWS + r).to(tl.int64)
        # Rows past B load nothing: zero slots and zero columns (vector masks only, which the
        # interpreter also accepts).
        a_lim = tl.where(row < B, A, 0)
        m = cols < tl.where(row < B, HO, 0)
        for p in tl.static_range(2):
            if p == 0:
                idx_row = stm_ptr + row * A
            else:
                idx_row = nstm_ptr + row * A
            idx = tl.load(idx_row + slots, mask=slots < a_lim, other=-1).to(tl.int64)
            valid = (idx >= 0) & (idx < F)
            g = tl.load(gout_ptr + row * 2 * HO + p * HO + cols, mask=m, other=0.0).to(tl.float32)
            acc_row = acc_ptr + (row * 2 + p) * H
            if PAIRS:  # pairwise: y = fwd(a)·fwd(b), the product rule
                a = tl.load(acc_row + cols, mask=m, other=0.0)
                b = tl.load(acc_row + HO + cols, mask=m, other=0.0)
                ga = g * FWD(b) * GRAD(a)
                gb_ = g * FWD(a) * GRAD(b)
                _scatter_add_rows(gw_ptr, idx, valid, cols, col_ok, ga, H)
                _scatter_add_rows(gw_ptr, idx, valid, cols + HO, col_ok, gb_, H)
                gb += ga
                gb2 += gb_
            else:
                if LINEAR:  # act' = 1, no accumulator needed
                    ga = g
                else:
                    ga = g * GRAD(tl.load(acc_row + cols, mask=m, other=0.0))
                _scatter_add_rows(gw_ptr, idx, valid, cols, col_ok, ga, H)
                gb += ga
    tl.store(gb_part_ptr + rb * H + cols, gb, mask=col_ok)
    if PAIRS:
        tl.store(gb_part_ptr + rb * H + HO + cols, gb2, mask=col_ok)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def block_sizes(A: int, HO: int, block_h: int | None = None) -> tuple[int, int]:
    """(BLOCK_A, BLOCK_H) for A index slots and HO output columns per perspective.

    BLOCK_A covers all A slots (one masked load of a row's indices); BLOCK_H fills the tile budget
    TILE_ELEMENTS. Raises ValueError on A outside 1..MAX_ACTIVE or a block_h that is not a power of
    two, and on widths whose column grid would exceed CUDA's grid limit.
    """
    if not 1 <= A <= MAX_ACTIVE:
        raise ValueError(f"sparse_ft_pair: {A} index slots per row; the Triton kernel handles 1..{MAX_ACTIVE}")
    block_a = _next_pow2(A)
    if block_h is None:
        block_h = min(MAX_BLOCK_H, _next_pow2(HO), max(16, TILE_ELEMENTS // block_a))
    elif block_h < 1 or block_h & (block_h - 1):
        raise ValueError(f"sparse_ft_pair: block_h {block_h} must be a power of two")
    if triton.cdiv(HO, block_h) > MAX_GRID_DIM:
        raise ValueError(f"sparse_ft_pair: width {HO} needs more than {MAX_GRID_DIM} column blocks of {block_h}")
    return block_a, block_h


def bwd_block_h(pairs: bool, block_h: int) -> int:
    """The backward's column block: the forward's, halved for a pairwise activation above 64 columns (its
    backward scatters two tiles). Measured on the sm_90 cubin (kernels/compile_check.py, cuobjdump):
    pairwise backward at 256 columns, 4 warps: 255 registers + 24 B of stack (spills); at 128: 168
    registers, no spills. The other activations' backward at 256: 122 registers."""
    return block_h // 2 if pairs and block_h > 64 else block_h


def check_inputs(weight: torch.Tensor, bias: torch.Tensor, stm: torch.Tensor, nstm: torch.Tensor,
                 activation: str) -> None:
    """Raise a clear error unless the fused kernel can take these arguments.

    ValueError: unknown activation, wrong ranks or shapes, A outside 1..MAX_ACTIVE, non-contiguous
    tensors, odd H with pairwise_crelu, mixed devices. TypeError: weight/bias not fp32 or bf16 (one dtype), indices
    not int32/int64. RuntimeError: a device Triton can't run on.
    """
    known = [n for n, a in spec.ACTIVATIONS.items() if a.triton_fwd is not None]
    if activation not in known:
        raise ValueError(f"sparse_ft_pair: unknown activation {activation!r}; known: {', '.join(known)}")
    if weight.dim() != 2 or bias.shape != (weight.shape[1],):
        raise ValueError(f"sparse_ft_pair: weight must be (F, H) and bias (H,); got weight {tuple(weight.shape)}, "
                         f"bias {tuple(bias.shape)}")
    if weight.dtype not in WEIGHT_DTYPES or bias.dtype != weight.dtype:
        raise TypeError(f"sparse_ft_pair: weight and bias must share one dtype of {WEIGHT_DTYPES}; "
                        f"got {weight.dtype}, {bias.dtype}")
    if stm.dim() != 2 or stm.shape != nstm.shape:
        raise ValueError(f"sparse_ft_pair: stm and nstm must both be (B, A); got {tuple(stm.shape)}, "
                         f"{tuple(nstm.shape)}")
    if not 1 <= stm.shape[1] <= MAX_ACTIVE:
        raise ValueError(f"sparse_ft_pair: {stm.shape[1]} index slots per row; the Triton kernel handles "
                         f"1..{MAX_ACTIVE}")
    if stm.dtype not in INDEX_DTYPES or nstm.dtype not in INDEX_DTYPES:
        raise TypeError(f"sparse_ft_pair: indices must be int32 or int64; got {stm.dtype}, {nstm.dtype}")
    devices = {t.device for t in (weight, bias, stm, nstm)}
    if len(devices) != 1:
        raise ValueError(f"sparse_ft_pair: all tensors must be on one device; got {sorted(map(str, devices))}")
    for name, t in (("weight", weight), ("bias", bias), ("stm", stm), ("nstm", nstm)):
        if not t.is_contiguous():
            raise ValueError(f"sparse_ft_pair: {name} {tuple(t.shape)} is not contiguous; call .contiguous()")
    if triton_ops(activation).pairs and weight.shape[1] % 2:
        raise ValueError(f"sparse_ft_pair: {activation} needs an even hidden size, got {weight.shape[1]}")
    check_device(weight, "sparse_ft_pair")


class SparseFTPair(torch.autograd.Function):
    """Fused both-perspective feature transformer + activation; gradients for weight and bias."""

    @staticmethod
    def forward(ctx, weight, bias, stm, nstm, activation: str, block_h: int | None, save_acc: bool):
        (F, H), (B, A) = weight.shape, stm.shape
        act = triton_ops(activation)
        HO = H // 2 if act.pairs else H
        block_a, block_h = block_sizes(A, HO, block_h)
        out = torch.empty(B, 2 * HO, dtype=weight.dtype, device=weight.device)
        save_acc = save_acc and not act.linear
        acc = torch.empty((B, 2, H) if save_acc else (0,), dtype=torch.float32, device=weight.device)
        if B:
            _sparse_ft_pair_fwd_fused[(B, triton.cdiv(HO, block_h))](
                weight, bias, stm, nstm, out, acc, F, H, HO, A,
                FWD=act.fwd, PAIRS=act.pairs, SAVE_ACC=save_acc, BLOCK_A=block_a, BLOCK_H=block_h, num_warps=NUM_WARPS)
        ctx.save_for_backward(stm, nstm, acc)
        ctx.dims, ctx.act, ctx.blocks, ctx.wdtype = (B, F, H, HO, A), act, (block_a, block_h), weight.dtype
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        stm, nstm, acc = ctx.saved_tensors
        (B, F, H, HO, A), (block_a, block_h) = ctx.dims, ctx.blocks
        device = stm.device
        grad_out = grad_out.to(ctx.wdtype).contiguous()  # autograd may pass an expanded gradient
        # fp32 accumulation whatever the weight dtype (fp32 atomics everywhere; bf16 cast once at the end).
        gw = torch.zeros(F, H, dtype=torch.float32, device=device)
        n_rb = triton.cdiv(B, BWD_ROWS)
        block_h = bwd_block_h(ctx.act.pairs, block_h)
        gb_part = torch.zeros(max(n_rb, 1), H, dtype=torch.float32, device=device)
        if B:
            if not ctx.act.linear and acc.numel() == 0:
                raise RuntimeError("sparse_ft_pair: backward without saved accumulators (forward ran with "
                                   "save_acc=False)")
            _sparse_ft_pair_bwd_fused[(n_rb, triton.cdiv(HO, block_h))](
                grad_out, acc, stm, nstm, gw, gb_part, B, F, H, HO, A,
                FWD=ctx.act.fwd, GRAD=ctx.act.grad, PAIRS=ctx.act.pairs, LINEAR=ctx.act.linear, ROWS=BWD_ROWS, BLOCK_A=block_a, BLOCK_H=block_h, num_warps=NUM_WARPS)
        gb = gb_part.sum(0)
        return gw.to(ctx.wdtype), gb.to(ctx.wdtype), None, None, None, None, None


def sparse_ft_pair(weight: torch.Tensor, bias: torch.Tensor, stm: torch.Tensor, nstm: torch.Tensor,
                   activation: str, block_h: int | None = None) -> torch.Tensor:
    """Both perspectives through the feature transformer and ``activation``, fused, in one launch.

    weight (F, H) and bias (H,): fp32 or bf16, contiguous; stm, nstm: (B, A) int32/int64, negative =
    padding, A ≤ MAX_ACTIVE; all on one CUDA device (or CPU under TRITON_INTERPRET=1). Returns
    (B, 2·H) — or (B, H) for pairwise_crelu — in weight's dtype, stm half first; differentiable in
    weight and bias. block_h overrides the column block (a power of two; for benchmark sweeps).
    Errors: see :func:`check_inputs` and :func:`block_sizes`; an index ≥ F fails an asynchronous
    device assert (the kernel itself skips it, so memory stays safe).
    """
    check_inputs(weight, bias, stm, nstm, activation)
    F = weight.shape[0]
    if stm.numel():
        # One reduction over the indices (B·2·A values, ~0.1 % of the kernel's traffic), no host sync.
        in_range = torch.maximum(stm.max(), nstm.max()) < F
        try:
            torch._assert_async(in_range, f"sparse_ft_pair: feature index >= {F} (the weight's row count)")
        except NotImplementedError:  # a build without the message overload on this device
            torch._assert_async(in_range)
    save_acc = torch.is_grad_enabled() and (weight.requires_grad or bias.requires_grad)
    return SparseFTPair.apply(weight, bias, stm, nstm, activation, block_h, save_acc)
