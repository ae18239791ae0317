"""Reference ops: sparse feature transformer vs a dense one-hot product, activations, gradcheck."""
from __future__ import annotations

import pytest
import torch

from nnue.kernels import reference, sparse_ft_pair

TOL = {torch.float32: dict(atol=1e-5, rtol=1e-5), torch.float64: dict(atol=1e-12, rtol=1e-12)}


def _dense(weight, bias, idx):
    onehot = torch.zeros(idx.shape[0], weight.shape[0], dtype=weight.dtype)
    for r in range(idx.shape[0]):
        for i in idx[r].tolist():
            if i >= 0:
                onehot[r, i] += 1.0  # duplicates count twice, as in a gather-sum
    return onehot @ weight + bias


def _indices(B, A, F, gen):
    idx = torch.randint(0, F, (B, A), generator=gen, dtype=torch.int32)
    idx[torch.rand(B, A, generator=gen) < 0.3] = -1
    if B > 1:
        idx[0] = -1                       # a row that is all padding
        idx[1, :3] = F - 1                # duplicates at the last feature
    return idx


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("B,H", [(1, 1023), (7, 16), (33, 64)])
def test_sparse_ft_forward_backward_matches_dense(dtype, B, H):
    gen = torch.Generator().manual_seed(B * H)
    F, A = 50, 32
    w = torch.randn(F, H, dtype=dtype, generator=gen, requires_grad=True)
    b = torch.randn(H, dtype=dtype, generator=gen, requires_grad=True)
    idx = _indices(B, A, F, gen)
    grad_out = torch.randn(B, H, dtype=dtype, generator=gen)
    got = reference.sparse_ft(w, b, idx)
    gw, gb = torch.autograd.grad(got, (w, b), grad_out)
    want = _dense(w, b, idx)
    ww, wb = torch.autograd.grad(want, (w, b), grad_out)
    torch.testing.assert_close(got, want, **TOL[dtype])
    torch.testing.assert_close(gw, ww, **TOL[dtype])
    torch.testing.assert_close(gb, wb, **TOL[dtype])


def test_sparse_ft_gradcheck_float64():
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(20, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, generator=gen, requires_grad=True)
    idx = _indices(4, 6, 20, gen)
    assert torch.autograd.gradcheck(lambda w, b: reference.sparse_ft(w, b, idx), (w, b))


@pytest.mark.parametrize("name", ["crelu", "screlu", "pairwise_crelu", "relu", "hardswish", "swish", "none"])
def test_activation_definitions(name):
    x = torch.linspace(-3, 3, 24, dtype=torch.float64).reshape(2, 12)
    y = reference.activate(name, x)
    c = x.clamp(0, 1)
    expect = {
        "crelu": c, "screlu": c * c, "pairwise_crelu": c[:, :6] * c[:, 6:], "relu": x.clamp(min=0),
        "hardswish": x * (x / 6 + 0.5).clamp(0, 1), "swish": x / (1 + torch.exp(-x)), "none": x,
    }[name]
    torch.testing.assert_close(y, expect)
    xr = x.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: reference.activate(name, t), (xr + 0.013,))


def test_pair_concatenates_stm_first():
    gen = torch.Generator().manual_seed(1)
    w, b = torch.randn(30, 8, generator=gen), torch.randn(8, generator=gen)
    stm, nstm = _indices(3, 5, 30, gen), _indices(3, 5, 30, gen)
    out = sparse_ft_pair(w, b, stm, nstm, "crelu")
    torch.testing.assert_close(out[:, :8], reference.sparse_ft(w, b, stm).clamp(0, 1))
    torch.testing.assert_close(out[:, 8:], reference.sparse_ft(w, b, nstm).clamp(0, 1))
    assert sparse_ft_pair(w, b, stm, nstm, "pairwise_crelu").shape == (3, 8)
    with pytest.raises(ValueError):
        sparse_ft_pair(w, b, stm, nstm, "crelu", backend="cuda-magic")
    with pytest.raises(ValueError):
        reference.activate("gelu", w)
