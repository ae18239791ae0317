"""nnue.kernels.layer_stacks against the all-buckets-then-gather rule: forward and backward at
fp32 tolerance (one matrix product per bucket instead of one for all), odd sizes, empty buckets,
unsorted and sorted batches, and the deep / tiny / sfnnv5 models on the CPU against the same
models computing every bucket (the path they take off the CPU)."""
from __future__ import annotations

import pytest
import torch

from nnue.kernels import layer_stacks as ls


@pytest.mark.parametrize("B,K,S,n", [(1, 7, 8, 16), (37, 33, 8, 1), (200, 256, 8, 16), (64, 30, 3, 32),
                                     (50, 5, 1, 4)])
@pytest.mark.parametrize("sorted_batch", [False, True])
def test_stack_linear_matches_reference(B, K, S, n, sorted_batch):
    gen = torch.Generator().manual_seed(B * 1000 + K)
    x = torch.randn(B, K, generator=gen, requires_grad=True)
    w = torch.randn(S * n, K, generator=gen, requires_grad=True)
    b = torch.randn(S * n, generator=gen, requires_grad=True)
    bucket = torch.randint(0, max(1, S - 1), (B,), generator=gen)   # the last bucket stays empty
    if sorted_batch:
        bucket = bucket.sort().values
    want = ls.stack_reference(x, w, b, bucket, n)
    perm, offsets = ls.bucket_order(bucket, S)
    assert (perm is None) == bool((bucket[1:] >= bucket[:-1]).all())
    assert offsets[0] == 0 and offsets[-1] == B and len(offsets) == S + 1
    xs = x if perm is None else x.index_select(0, perm)
    got = ls.unpermute(ls.stack_linear(xs, w, b, offsets, n), perm)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    g = torch.randn(want.shape, generator=gen)
    for a, e in zip(torch.autograd.grad(got, (x, w, b), g), torch.autograd.grad(want, (x, w, b), g)):
        torch.testing.assert_close(a, e, atol=1e-4, rtol=1e-5)


def test_bucket_order_is_stable_and_checks_range():
    bucket = torch.tensor([2, 0, 2, 1, 0])
    perm, offsets = ls.bucket_order(bucket, 3)
    assert perm.tolist() == [1, 4, 3, 0, 2] and offsets == [0, 2, 3, 5]
    y = torch.arange(5.0)[perm]
    assert torch.equal(ls.unpermute(y, perm), torch.arange(5.0))
    with pytest.raises(ValueError, match="0..2"):
        ls.bucket_order(torch.tensor([0, 3]), 3)
    with pytest.raises(ValueError, match="weight"):
        ls.stack_linear(torch.zeros(2, 4), torch.zeros(5, 4), torch.zeros(5), [0, 1, 2], 2)


@pytest.mark.parametrize("kind,features,hidden,extra", [
    ("deep", "halfkav2_hm", 32, {}), ("tiny", "chess768", 16, {}), ("sfnnv5", "halfkav2_hm", 64, {})])
@pytest.mark.parametrize("qat", [False, True])
def test_models_on_cpu_equal_every_bucket_path(kind, features, hidden, extra, qat, monkeypatch):
    """The model's CPU path (bucket order) against itself with the bucket-order path switched
    off: outputs and every parameter's gradient, in float64: equal to 1e-9. Under QAT the
    fake-quantised activations sit on exact ties (products of the 1/QA and 1/QB grids, rounded to
    1/QA), where a last-bit difference of the two summation orders flips a rounding step: there a
    few positions may differ by a grid step or two, and the gradients by a little."""
    from tests.kernels.kernel_testing import make_indices
    from nnue.pipeline.features import get_feature_set
    from nnue.inference.net import QuantScheme
    from nnue.trainer.kinds import build_model, layers_config

    fs = get_feature_set(features)
    torch.manual_seed(3)
    S = 8
    act = "pairwise_crelu" if kind != "tiny" else "screlu"
    model = build_model(kind, features, fs.num_inputs, hidden, act, S, "torch", False,
                        layers_config(kind, {"deep": None, "tiny": None, "sfnnv5": None}))
    model = model.double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    if qat:
        model.enable_qat(QuantScheme())
    gen = torch.Generator().manual_seed(5)
    stm, nstm = make_indices(97, 32, fs.num_inputs, gen)
    bucket = torch.randint(0, S, (97,), generator=gen)

    def run():
        model.zero_grad(set_to_none=True)
        y = model(stm, nstm, bucket)
        (y * torch.linspace(-1, 1, 97, dtype=torch.float64)).sum().backward()
        return y.detach(), {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}

    y, grads = run()
    monkeypatch.setattr(ls, "use_for", lambda x: False)
    y_ref, grads_ref = run()
    assert y.dtype == torch.float64 and y.std() > 0
    assert grads.keys() == grads_ref.keys() and grads
    if not qat:
        torch.testing.assert_close(y, y_ref, atol=1e-9, rtol=1e-9)
        for k in grads:
            torch.testing.assert_close(grads[k], grads_ref[k], atol=1e-9, rtol=1e-9, msg=k)
        return
    off = (y - y_ref).abs() > 1e-9
    assert off.float().mean() <= 0.05 and (y - y_ref).abs().max() < 5e-3, (y - y_ref)[off]
    for k in grads:
        assert (grads[k] - grads_ref[k]).norm() <= 0.05 * grads_ref[k].norm() + 1e-9, k


@pytest.mark.parametrize("B,K,n", [(203, 1024, 16), (61, 30, 32), (45, 32, 1), (9, 13, 6)])
def test_compiled_fp32_path_against_float64_and_any_thread_count(B, K, n):
    """fp32 on the CPU runs the numba kernels (four rows by four outputs, reassociated sums):
    within fp32 rounding of the float64 product, forward and backward, with bucket runs of odd
    lengths (1, 2, 3 rows: the one-row tails) and an empty bucket; and the same bits for 1 and 2
    threads (rows are split in fixed slices, not per thread)."""
    import numba

    gen = torch.Generator().manual_seed(B + K + n)
    S = 5
    counts = torch.tensor([1, 0, 2, 3, B - 6])
    bucket = torch.repeat_interleave(torch.arange(S), counts)
    x = torch.rand(B, K, generator=gen)
    w = torch.randn(S * n, K, generator=gen) * 0.1
    b = torch.randn(S * n, generator=gen)
    g = torch.randn(B, n, generator=gen)
    perm, offsets = ls.bucket_order(bucket, S)
    assert perm is None
    want = ls.stack_reference(x.double(), w.double(), b.double(), bucket, n)
    leaves = [t.double().requires_grad_(True) for t in (x, w, b)]
    exp = torch.autograd.grad(ls.stack_reference(*leaves, bucket, n), leaves, g.double())
    runs = []
    old = numba.get_num_threads()
    try:
        for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(threads)
            xs, ws, bs = (t.clone().requires_grad_(True) for t in (x, w, b))
            y = ls.stack_linear(xs, ws, bs, offsets, n)
            runs.append((y,) + torch.autograd.grad(y, (xs, ws, bs), g))
    finally:
        numba.set_num_threads(old)
    for got, ref in zip(runs[0], (want,) + exp):
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), ref, atol=2e-5 * (1 + K / 64), rtol=1e-5)
    for a, c in zip(runs[0], runs[1]):
        assert torch.equal(a, c)
