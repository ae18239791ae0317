"""Fused feature transformer (Triton) against the torch reference: forward, backward, edge cases,
host-side errors, backend dispatch, and a small net trained with each backend.

Triton runs here on CPU tensors under TRITON_INTERPRET=1 (small odd sizes: the interpreter executes
every program in Python); the ``gpu`` tests repeat the comparison at the target sizes on CUDA.
"""
from __future__ import annotations

import io

import pytest
import torch

import nnue.kernels as K
from nnue.kernels import activations, reference, sparse_ft
from nnue.trainer.loss import wdl_loss
from nnue.trainer.kinds.perspective import Arch, PerspectiveNet
from tests.kernels.kernel_testing import DTYPE_TOLS, fp32_leaf, make_indices, make_weights, needs_cuda, needs_interpreter

ACTS = list(sparse_ft.ACTIVATIONS)


def _width(activation: str, h: int) -> int:
    """Accumulator width H giving h output columns per perspective (pairwise halves it)."""
    return 2 * h if activation == "pairwise_crelu" else h


def _compare(weight, bias, stm, nstm, activation, atol, rtol, block_h=None):
    """Triton vs the fp32 reference on the same inputs, one shared random grad_out."""
    out = sparse_ft.sparse_ft_pair(weight, bias, stm, nstm, activation, block_h=block_h)
    w32, b32 = fp32_leaf(weight), fp32_leaf(bias)
    want = reference.sparse_ft_pair(w32, b32, stm, nstm, activation)
    assert out.shape == want.shape and out.dtype == weight.dtype
    gen = torch.Generator(device=weight.device).manual_seed(7)
    grad_out = torch.randn(want.shape, generator=gen, device=weight.device).to(weight.dtype)
    gw, gb = torch.autograd.grad(out, (weight, bias), grad_out)
    ww, wb = torch.autograd.grad(want, (w32, b32), grad_out.float())
    assert gw.dtype == weight.dtype and gb.dtype == bias.dtype
    torch.testing.assert_close(out.float(), want, atol=atol, rtol=rtol)
    torch.testing.assert_close(gw.float(), ww, atol=atol, rtol=rtol)
    torch.testing.assert_close(gb.float(), wb, atol=atol, rtol=rtol)


@needs_interpreter
@pytest.mark.parametrize("dtype,atol,rtol", DTYPE_TOLS)
# (1, 1023): one program row, four column blocks, the last partial; 0.6 s in the interpreter.
@pytest.mark.parametrize("B,h", [(1, 7), (1, 33), (5, 7), (5, 33), (1, 1023)])
@pytest.mark.parametrize("activation", ACTS)
def test_matches_reference(activation, B, h, dtype, atol, rtol):
    gen = torch.Generator().manual_seed(1000 * B + h)
    F, A = 41, 32
    w, b = make_weights(F, _width(activation, h), dtype, gen)
    stm, nstm = make_indices(B, A, F, gen)
    _compare(w, b, stm, nstm, activation, atol, rtol)


@needs_interpreter
@pytest.mark.parametrize("A", [1, 3, 37])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_slot_counts_and_index_dtypes(A, index_dtype):
    """A not a power of two (masked slots), A = 1, and int64 indices."""
    gen = torch.Generator().manual_seed(A)
    w, b = make_weights(23, 9, torch.float32, gen)
    stm, nstm = make_indices(4, A, 23, gen, dtype=index_dtype)
    _compare(w, b, stm, nstm, "screlu", 1e-5, 1e-5)


@needs_interpreter
@pytest.mark.parametrize("activation", ["crelu", "pairwise_crelu"])
def test_several_column_blocks(activation):
    """block_h smaller than the width: programs along the columns, a partial last block."""
    gen = torch.Generator().manual_seed(3)
    w, b = make_weights(30, _width(activation, 37), torch.float32, gen)
    stm, nstm = make_indices(3, 8, 30, gen)
    _compare(w, b, stm, nstm, activation, 1e-5, 1e-5, block_h=16)


@needs_interpreter
def test_all_padding_and_heavy_duplicates():
    """Every row padding -> act(bias) and a zero weight gradient; one feature 32× in every row of
    both perspectives -> its gradient is the sum of 2·B·32 contributions (atomics don't lose any)."""
    gen = torch.Generator().manual_seed(5)
    F, H, B, A = 11, 13, 6, 32
    w, b = make_weights(F, H, torch.float32, gen)
    pad = torch.full((B, A), -1, dtype=torch.int32)
    out = sparse_ft.sparse_ft_pair(w, b, pad, pad, "crelu")
    torch.testing.assert_close(out, b.detach().clamp(0, 1).repeat(B, 2))
    gw, gb = torch.autograd.grad(out.sum(), (w, b))  # expanded (stride-0) grad_out, too
    assert not gw.any()
    torch.testing.assert_close(gb, 2.0 * B * ((b >= 0) & (b <= 1)).float())

    # Integer-valued gradients make every partial sum exact in fp32, so any lost or doubled atomic
    # update shows as an exact mismatch, whatever the summation order.
    same = torch.full((B, A), F - 1, dtype=torch.int32)
    out = sparse_ft.sparse_ft_pair(w, b, same, same.clone(), "none")
    g = torch.randint(-3, 4, out.shape, generator=gen).float()
    gw, gb = torch.autograd.grad(out, (w, b), g)
    want = torch.zeros(F, H)
    want[F - 1] = A * (g[:, :H] + g[:, H:]).sum(0)
    torch.testing.assert_close(gw, want, atol=0, rtol=0)
    torch.testing.assert_close(gb, (g[:, :H] + g[:, H:]).sum(0), atol=0, rtol=0)
    # With random gradients the 384 same-row terms reach partial sums of ~300: fp32 order noise ~1e-4.
    _compare(w, b, same, same.clone(), "screlu", 1e-3, 1e-4)


@needs_interpreter
@pytest.mark.parametrize("activation", ["crelu", "screlu", "relu", "hardswish"])
def test_kinks_follow_torch(activation):
    """Accumulators exactly on a kink (0, 1, ±3) get torch's gradient there (inclusive clamp bounds,
    strict relu), in forward and backward. A wrong kink convention would be off by O(1); the 1e-6
    allows for hardswish's derivative being evaluated in a different order than autograd's chain."""
    kinks = torch.tensor([0.0, 1.0, -3.0, 3.0, 0.5, -0.5, 2.0, -4.0])
    w = torch.zeros(2, 8, requires_grad=True)
    b = kinks.clone().requires_grad_(True)
    idx = torch.tensor([[0, -1], [-1, -1]], dtype=torch.int32)
    out = sparse_ft.sparse_ft_pair(w, b, idx, idx, activation)
    w32, b32 = fp32_leaf(w), fp32_leaf(b)
    want = reference.sparse_ft_pair(w32, b32, idx, idx, activation)
    g = torch.arange(1.0, out.numel() + 1).reshape(out.shape)
    torch.testing.assert_close(out, want, atol=0, rtol=0)
    for got, exp in zip(torch.autograd.grad(out, (w, b), g), torch.autograd.grad(want, (w32, b32), g)):
        torch.testing.assert_close(got, exp, atol=0, rtol=1e-6)


@needs_interpreter
def test_no_grad_forward_and_empty_batch():
    gen = torch.Generator().manual_seed(9)
    w, b = make_weights(20, 6, torch.float32, gen)
    stm, nstm = make_indices(3, 4, 20, gen)
    with torch.no_grad():
        out = sparse_ft.sparse_ft_pair(w, b, stm, nstm, "screlu")
    assert not out.requires_grad
    torch.testing.assert_close(out, reference.sparse_ft_pair(w.detach(), b.detach(), stm, nstm, "screlu"))
    empty = torch.empty(0, 4, dtype=torch.int32)
    assert sparse_ft.sparse_ft_pair(w, b, empty, empty, "pairwise_crelu").shape == (0, 6)


@pytest.mark.parametrize("B,H", [(1, 1023), (5, 33)])
@pytest.mark.parametrize("activation", ACTS)
def test_dispatch_torch_path_matches_pairwise_reference(activation, B, H):
    """backend='torch' (and 'auto' on CPU) is the reference pair, odd sizes included."""
    gen = torch.Generator().manual_seed(B + H)
    H = _width(activation, H)
    w, b = make_weights(50, H, torch.float32, gen)
    stm, nstm = make_indices(B, 32, 50, gen)
    want = torch.cat([reference.activate(activation, reference.sparse_ft(w, b, i)) for i in (stm, nstm)], 1)
    for backend in ("torch", "auto"):
        torch.testing.assert_close(K.sparse_ft_pair(w, b, stm, nstm, activation, backend), want)


@pytest.mark.parametrize("activation", ACTS)
def test_reference_pair_gradcheck_float64(activation):
    gen = torch.Generator().manual_seed(11)
    w = (torch.randn(15, 6, dtype=torch.float64, generator=gen) * 0.4).requires_grad_(True)
    b = (torch.randn(6, dtype=torch.float64, generator=gen) * 0.4 + 0.3).requires_grad_(True)
    stm, nstm = make_indices(4, 5, 15, gen)
    assert torch.autograd.gradcheck(lambda w, b: reference.sparse_ft_pair(w, b, stm, nstm, activation), (w, b))


def test_auto_uses_reference_on_cpu(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("auto must not run Triton on CPU tensors")
    monkeypatch.setattr(sparse_ft, "sparse_ft_pair", boom)
    gen = torch.Generator().manual_seed(0)
    w, b = make_weights(10, 4, torch.float32, gen)
    stm, nstm = make_indices(2, 3, 10, gen)
    assert K.sparse_ft_pair(w, b, stm, nstm, "crelu", "auto").shape == (2, 8)
    assert K.resolve_backend("auto", torch.device("cpu")) == "torch"
    assert K.resolve_backend("triton", torch.device("cpu")) == "triton"
    with pytest.raises(ValueError, match="backend"):
        K.sparse_ft_pair(w, b, stm, nstm, "crelu", "cuda-magic")


@needs_interpreter
def test_dispatch_triton_takes_index_views():
    """The model-facing dispatch makes index views contiguous; the kernel's own entry refuses them."""
    gen = torch.Generator().manual_seed(2)
    w, b = make_weights(12, 6, torch.float32, gen)
    stm = torch.randint(-1, 12, (4, 3), generator=gen, dtype=torch.int32).t()   # (3, 4), a view
    nstm = torch.randint(-1, 12, (4, 3), generator=gen, dtype=torch.int32).t()
    want = reference.sparse_ft_pair(w, b, stm, nstm, "crelu")
    torch.testing.assert_close(K.sparse_ft_pair(w, b, stm, nstm, "crelu", "triton"), want)
    with pytest.raises(ValueError, match="contiguous"):
        sparse_ft.sparse_ft_pair(w, b, stm, nstm, "crelu")


def test_triton_on_cpu_without_interpreter_raises(monkeypatch):
    monkeypatch.setattr(activations, "INTERPRETED", False)
    gen = torch.Generator().manual_seed(0)
    w, b = make_weights(10, 4, torch.float32, gen)
    stm, nstm = make_indices(2, 3, 10, gen)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        K.sparse_ft_pair(w, b, stm, nstm, "crelu", "triton")


@pytest.mark.parametrize("case,error,match", [
    ("activation", ValueError, "unknown activation"),
    ("weight_dtype", TypeError, "dtype"),
    ("bias_dtype", TypeError, "dtype"),
    ("index_dtype", TypeError, "int32 or int64"),
    ("bias_shape", ValueError, "bias"),
    ("index_shape", ValueError, r"\(B, A\)"),
    ("noncontiguous", ValueError, "contiguous"),
    ("pairwise_odd", ValueError, "even"),
    ("too_many_slots", ValueError, "index slots"),
    ("meta_device", ValueError, "one device"),
])
def test_host_checks_raise_clear_errors(case, error, match):
    gen = torch.Generator().manual_seed(0)
    w, b = make_weights(10, 4, torch.float32, gen)
    stm, nstm = make_indices(2, 3, 10, gen)
    act = "crelu"
    if case == "activation":
        act = "gelu"
    elif case == "weight_dtype":
        w, b = w.double(), b.double()
    elif case == "bias_dtype":
        b = b.bfloat16()
    elif case == "index_dtype":
        stm, nstm = stm.short(), nstm.short()
    elif case == "bias_shape":
        b = b[:3]
    elif case == "index_shape":
        nstm = nstm[:1]
    elif case == "noncontiguous":
        stm = torch.randint(0, 10, (3, 2), dtype=torch.int32).t()
    elif case == "pairwise_odd":
        w, b, act = w[:, :3].contiguous(), b[:3].contiguous(), "pairwise_crelu"
    elif case == "too_many_slots":
        stm = nstm = torch.zeros(2, sparse_ft.MAX_ACTIVE + 1, dtype=torch.int32)
    elif case == "meta_device":
        stm = stm.to("meta")
    with pytest.raises(error, match=match):
        sparse_ft.sparse_ft_pair(w, b, stm, nstm, act)


@needs_interpreter
def test_index_out_of_range_raises():
    gen = torch.Generator().manual_seed(0)
    w, b = make_weights(10, 4, torch.float32, gen)
    stm, nstm = make_indices(2, 3, 10, gen)
    stm[1, 0] = 10
    with pytest.raises(RuntimeError, match="feature index >= 10"):
        sparse_ft.sparse_ft_pair(w, b, stm, nstm, "crelu")


def _train(net: PerspectiveNet, batches, steps: int) -> list[float]:
    """A few AdamW steps with the trainer's loss and weight clipping; the loss of every step."""
    opt = torch.optim.AdamW(net.parameters(), lr=3e-2)
    losses = []
    for stm, nstm, bucket, score, result in batches[:steps]:
        loss = wdl_loss(net(stm, nstm, bucket), score, result)
        opt.zero_grad()
        loss.backward()
        opt.step()
        net.clip_weights(1.98, 1.98)
        losses.append(loss.item())
    return losses


def _batches(n: int, B: int, F: int, buckets: int, gen: torch.Generator):
    out = []
    for _ in range(n):
        stm, nstm = make_indices(B, 32, F, gen, pad=0.4)
        out.append((stm, nstm, torch.randint(0, buckets, (B,), generator=gen),
                    torch.randn(B, generator=gen) * 300, torch.randint(0, 3, (B,), generator=gen) / 2))
    return out


def _round_trip(activation: str, backend: str, device: str, F: int, H: int, B: int, steps: int, tol: dict):
    """Train the same net with `backend` and with the reference: equal loss curves, equal state-dict
    layout, and each backend's trained state dict loads into a net of the other and evaluates alike."""
    arch = Arch(F, H, activation, 4)
    gen = torch.Generator().manual_seed(42)
    batches = [tuple(t.to(device) for t in b) for b in _batches(steps + 1, B, F, 4, gen)]
    torch.manual_seed(0)
    ref = PerspectiveNet(arch, backend="torch").to(device)
    fused = PerspectiveNet(arch, backend=backend).to(device)
    fused.load_state_dict(ref.state_dict())
    ref_losses, fused_losses = _train(ref, batches, steps), _train(fused, batches, steps)
    torch.testing.assert_close(torch.tensor(fused_losses), torch.tensor(ref_losses), **tol)

    sd_ref, sd_fused = ref.state_dict(), fused.state_dict()
    assert list(sd_ref) == list(sd_fused) == ["ft.weight", "ft.bias", "l1.weight", "l1.bias"]
    for k in sd_ref:
        assert (sd_ref[k].shape, sd_ref[k].dtype) == (sd_fused[k].shape, sd_fused[k].dtype), k
        torch.testing.assert_close(sd_fused[k], sd_ref[k], **tol)

    stm, nstm, bucket = batches[-1][:3]
    for trained, other_backend in ((fused, "torch"), (ref, backend)):
        buf = io.BytesIO()
        torch.save(trained.state_dict(), buf)
        buf.seek(0)
        loaded = PerspectiveNet(arch, backend=other_backend).to(device)
        loaded.load_state_dict(torch.load(buf, weights_only=True))
        with torch.no_grad():
            torch.testing.assert_close(loaded(stm, nstm, bucket), trained(stm, nstm, bucket), **tol)


@needs_interpreter
@pytest.mark.parametrize("activation", ["crelu", "screlu", "pairwise_crelu"])
def test_net_trains_alike_with_each_backend(activation):
    _round_trip(activation, "triton", "cpu", F=96, H=16, B=24, steps=5, tol=dict(atol=1e-5, rtol=1e-5))


# ---- GPU (``-m gpu``; bench/gpu_kernels.sh) ----------------------------------------------------

@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype,atol,rtol", [
    pytest.param(torch.float32, 1e-4, 1e-4, id="fp32"),
    pytest.param(torch.bfloat16, 2e-2, 1.6e-2, id="bf16"),
])
@pytest.mark.parametrize("activation", ACTS)
def test_gpu_target_size_matches_reference(activation, dtype, atol, rtol):
    """The issue's target case: B = 16384, HalfKAv2_hm-sized F = 45056, H = 1024, 32 slots."""
    gen = torch.Generator().manual_seed(0)
    F, H, B, A = 45056, 1024, 16384, 32
    w, b = make_weights(F, H, dtype, gen)
    stm, nstm = make_indices(B, A, F, gen, pad=0.05)
    w, b = w.detach().cuda().requires_grad_(True), b.detach().cuda().requires_grad_(True)
    _compare(w, b, stm.cuda(), nstm.cuda(), activation, atol, rtol)


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("activation", ["crelu", "screlu", "pairwise_crelu"])
def test_gpu_net_trains_alike_with_each_backend(activation):
    _round_trip(activation, "auto", "cuda", F=45056, H=256, B=4096, steps=20, tol=dict(atol=1e-4, rtol=1e-4))
