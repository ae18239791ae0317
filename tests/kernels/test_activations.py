"""Fused elementwise activations (Triton) against the torch reference: forward and backward with one
shared grad_out, odd shapes, kinks, host-side errors, dispatch; gradcheck of the references."""
from __future__ import annotations

import pytest
import torch

import nnue.kernels as K
from nnue.kernels import activations, reference
from tests.kernels.kernel_testing import DTYPE_TOLS, fp32_leaf, needs_cuda, needs_interpreter

SHAPES = [(1,), (1, 1023), (7, 33), (3, 5, 7), (2, 1025)]  # (2, 1025): two programs, a partial block


def _check(got_fn, want_fn, inputs, atol, rtol):
    """got_fn on ``inputs`` vs want_fn on fp32 copies; one random grad_out for both backwards."""
    out = got_fn(*inputs)
    ref_inputs = [fp32_leaf(t) for t in inputs]
    want = want_fn(*ref_inputs)
    assert out.shape == want.shape and out.dtype == inputs[0].dtype
    grad_out = torch.randn(want.shape, generator=torch.Generator().manual_seed(7)).to(out.dtype)
    got_g = torch.autograd.grad(out, inputs, grad_out)
    want_g = torch.autograd.grad(want, ref_inputs, grad_out.float())
    torch.testing.assert_close(out.float(), want, atol=atol, rtol=rtol)
    for g, w in zip(got_g, want_g):
        assert g.dtype == inputs[0].dtype
        torch.testing.assert_close(g.float(), w, atol=atol, rtol=rtol)


@needs_interpreter
@pytest.mark.parametrize("dtype,atol,rtol", DTYPE_TOLS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("name", activations.ELEMENTWISE)
def test_activation_matches_reference(name, shape, dtype, atol, rtol):
    gen = torch.Generator().manual_seed(len(shape) * 100 + shape[-1])
    x = (torch.randn(shape, generator=gen) * 3).to(dtype).requires_grad_(True)
    _check(lambda t: activations.activate(name, t), lambda t: reference.activate(name, t), [x], atol, rtol)


@needs_interpreter
@pytest.mark.parametrize("gate", activations.GATES)
@pytest.mark.parametrize("dtype,atol,rtol", DTYPE_TOLS)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_swiglu_matches_reference(shape, dtype, atol, rtol, gate):
    gen = torch.Generator().manual_seed(shape[-1])
    a = (torch.randn(shape, generator=gen) * 3).to(dtype).requires_grad_(True)
    b = torch.randn(shape, generator=gen).to(dtype).requires_grad_(True)
    _check(lambda x, y: activations.swiglu(x, y, gate), lambda x, y: reference.swiglu(x, y, gate), [a, b], atol, rtol)


@needs_interpreter
@pytest.mark.parametrize("h1,h2", [("hardswish", "swiglu"), ("swish", "swiglu_swish"), ("swish", "hardswish")])
def test_deep_net_hidden_activations_triton_equal_torch(h1, h2):
    """A deep net's float forward and backward with the new hidden activations: the Triton
    kernels (interpreter) against the torch reference, odd sizes (N1 = 7, N2 = 5, 33 rows)."""
    from nnue.trainer.kinds.deep import DeepArch, DeepNet

    nets = []
    for backend in ("torch", "triton"):
        torch.manual_seed(3)
        m = DeepNet(DeepArch(64, 12, "pairwise_crelu", 3, 7, 5, h1, l2_activation=h2), backend)
        with torch.no_grad():
            for layer in (m.l1, m.l2):
                layer.weight.mul_(8)  # pre-activations past ±3 and ±8
        nets.append(m)
    gen = torch.Generator().manual_seed(1)
    stm = torch.randint(-1, 64, (33, 9), generator=gen, dtype=torch.int32)
    nstm = torch.randint(-1, 64, (33, 9), generator=gen, dtype=torch.int32)
    bucket = torch.randint(0, 3, (33,), generator=gen)
    outs = [m(stm, nstm, bucket) for m in nets]
    torch.testing.assert_close(outs[1], outs[0], atol=1e-5, rtol=1e-5)
    grads = [torch.autograd.grad(o.square().sum(), [m.l1.weight, m.l2.weight, m.ft.weight]) for o, m in zip(outs, nets)]
    for g1, g0 in zip(grads[1], grads[0]):
        torch.testing.assert_close(g1, g0, atol=1e-5, rtol=1e-4)


@needs_interpreter
@pytest.mark.parametrize("name", ["crelu", "screlu", "relu", "hardswish"])
def test_kinks_follow_torch(name):
    """Inputs exactly on a kink get torch's gradient (inclusive clamp bounds, strict relu)."""
    x = torch.tensor([0.0, 1.0, -3.0, 3.0, 0.5, -0.5, 2.0, -4.0], requires_grad=True)
    xr = fp32_leaf(x)
    y, yr = activations.activate(name, x), reference.activate(name, xr)
    g = torch.arange(1.0, 9.0)
    torch.testing.assert_close(y, yr, atol=0, rtol=0)
    (gx,), (gxr,) = torch.autograd.grad(y, x, g), torch.autograd.grad(yr, xr, g)
    torch.testing.assert_close(gx, gxr, atol=0, rtol=1e-6)


@needs_interpreter
def test_expanded_grad_and_empty_input():
    x = torch.randn(4, 5, requires_grad=True)
    (gx,) = torch.autograd.grad(activations.activate("swish", x).sum(), x)  # stride-0 grad_out
    xr = fp32_leaf(x)
    (gr,) = torch.autograd.grad(reference.activate("swish", xr).sum(), xr)
    torch.testing.assert_close(gx, gr)
    assert activations.activate("crelu", torch.empty(0, 3)).shape == (0, 3)


@pytest.mark.parametrize("name", list(activations.ELEMENTWISE) + ["swiglu", "swiglu_hardswish"])
def test_reference_gradcheck_float64(name):
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 7, dtype=torch.float64, generator=gen) * 3 + 0.013).requires_grad_(True)
    if name.startswith("swiglu"):
        b = torch.randn(3, 7, dtype=torch.float64, generator=gen, requires_grad=True)
        gate = "hardswish" if name.endswith("hardswish") else "swish"
        assert torch.autograd.gradcheck(lambda p, q: reference.swiglu(p, q, gate), (x, b))
    else:
        assert torch.autograd.gradcheck(lambda t: reference.activate(name, t), (x,))


@pytest.mark.parametrize("case,error,match", [
    ("unknown", ValueError, "no elementwise Triton kernel"),
    ("pairwise", ValueError, "fused in sparse_ft_pair"),
    ("dtype", TypeError, "dtype"),
    ("noncontiguous", ValueError, "contiguous"),
    ("swiglu_shapes", ValueError, "share dtype, shape and device"),
])
def test_host_checks_raise_clear_errors(case, error, match):
    x = torch.randn(4, 6)
    with pytest.raises(error, match=match):
        if case == "unknown":
            activations.activate("gelu", x)
        elif case == "pairwise":
            activations.activate("pairwise_crelu", x)
        elif case == "dtype":
            activations.activate("crelu", x.double())
        elif case == "noncontiguous":
            activations.activate("crelu", x.t())
        else:
            activations.swiglu(x, x[:2])


def test_dispatch(monkeypatch):
    x, b = torch.randn(3, 4), torch.randn(3, 4)
    for backend in ("auto", "torch"):  # CPU: both are the reference
        torch.testing.assert_close(K.activate("hardswish", x, backend), reference.activate("hardswish", x))
        torch.testing.assert_close(K.swiglu(x, b, backend), reference.swiglu(x, b))
    assert K.activate("pairwise_crelu", x).shape == (3, 2)
    monkeypatch.setattr(activations, "INTERPRETED", False)
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        K.activate("crelu", x, "triton")
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        K.swiglu(x, b, "triton")
    with pytest.raises(ValueError, match="backend"):
        K.swiglu(x, b, "cuda-magic")


@pytest.mark.gpu
@needs_cuda
@pytest.mark.parametrize("dtype,atol,rtol", DTYPE_TOLS)
@pytest.mark.parametrize("name", list(activations.ELEMENTWISE) + ["swiglu"])
def test_gpu_large_matches_reference(name, dtype, atol, rtol):
    """The FT output's size at the target case: (16384, 2048)."""
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(16384, 2048, generator=gen) * 3).to(dtype).cuda().requires_grad_(True)
    if name == "swiglu":
        b = torch.randn(16384, 2048, generator=gen).to(dtype).cuda().requires_grad_(True)
        _check(activations.swiglu, reference.swiglu, [x, b], atol, rtol)
    else:
        _check(lambda t: activations.activate(name, t), lambda t: reference.activate(name, t), [x], atol, rtol)
