"""RowSparseAdamW against torch.optim.AdamW on small cases: dense groups, rows touched every step,
β1 = 0, rows never touched, the general case against a slow loop of the documented rule, the
clamp with the factoriser's offset, the torch fallback, state-dict round trip."""
from __future__ import annotations

import io
import math

import pytest
import torch

from nnue.trainer.sparse_optim import RowSparseAdamW

F, H = 12, 5


def _sparse(rows: list[int], values: torch.Tensor) -> torch.Tensor:
    return torch.sparse_coo_tensor(torch.tensor([rows]), values, (F, H), check_invariants=False).coalesce()


def _run(steps, betas=(0.9, 0.999), wd=0.05, lrs=None, device_fallback=False, seed=0):
    """Train one (F, H) parameter with both optimisers on the same gradients; ``steps`` is a list
    of the rows touched at each step. Returns (sparse param, dense param, sparse optimiser)."""
    gen = torch.Generator().manual_seed(seed)
    p0 = torch.randn(F, H, generator=gen)
    ps, pd = p0.clone().requires_grad_(True), p0.clone().requires_grad_(True)
    opt_s = RowSparseAdamW([{"params": [ps], "row_sparse": True}], lr=0.01, betas=betas, weight_decay=wd)
    opt_d = torch.optim.AdamW([pd], lr=0.01, betas=betas, weight_decay=wd)
    if device_fallback:   # the torch index-op path (other devices): force it on CPU
        opt_s._step_rows_cpu = False
    for t, rows in enumerate(steps):
        lr = lrs[t] if lrs else 0.01
        for o in (opt_s, opt_d):
            o.param_groups[0]["lr"] = lr
        vals = torch.randn(len(rows), H, generator=gen)
        ps.grad = _sparse(rows, vals)
        pd.grad = ps.grad.to_dense()
        opt_s.step()
        opt_d.step()
    return ps, pd, opt_s


def _rows_every_step(steps):
    return sorted(set.intersection(*[set(r) for r in steps]))


STEPS = [[0, 1, 2, 5], [0, 1, 3], [0, 1, 2, 7, 9], [0, 1], [0, 1, 5, 9, 11], [0, 1, 2, 3]]


@pytest.mark.parametrize("fallback", [False, True])
def test_rows_touched_every_step_are_dense_adamw(fallback):
    ps, pd, _ = _run(STEPS, device_fallback=fallback)
    every = _rows_every_step(STEPS)
    assert every == [0, 1]
    torch.testing.assert_close(ps.detach()[every], pd.detach()[every], atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("fallback", [False, True])
def test_beta1_zero_is_dense_adamw_everywhere(fallback):
    """No momentum, no drift: after a flush every row agrees with dense AdamW, lr schedule included."""
    lrs = [0.01, 0.02, 0.005, 0.01, 0.03, 0.001]
    ps, pd, opt = _run(STEPS, betas=(0.0, 0.99), lrs=lrs, device_fallback=fallback)
    opt.flush()
    torch.testing.assert_close(ps.detach(), pd.detach(), atol=1e-6, rtol=1e-5)


def test_never_touched_rows_decay_as_dense_adamw():
    ps, pd, opt = _run(STEPS, lrs=[0.01, 0.02, 0.005, 0.01, 0.03, 0.001])
    never = [4, 6, 8, 10]
    assert not set(never) & set(sum(STEPS, []))
    before = ps.detach()[never].clone()
    opt.flush()
    assert not torch.equal(before, ps.detach()[never])   # the decay was pending
    torch.testing.assert_close(ps.detach()[never], pd.detach()[never], atol=1e-7, rtol=1e-6)
    opt.flush()   # idempotent
    torch.testing.assert_close(ps.detach()[never], pd.detach()[never], atol=1e-7, rtol=1e-6)


def _slow_rule(p0, steps_grads, lrs, b1, b2, eps, wd):
    """The module docstring's rule, one row and step at a time in float64."""
    p = p0.double().clone()
    m, v = torch.zeros_like(p), torch.zeros_like(p)
    last = [0] * F
    logd = [0.0]
    for t, (rows, vals) in enumerate(steps_grads, start=1):
        lr = lrs[t - 1]
        logd.append(logd[-1] + math.log1p(-lr * wd))
        for i, r in enumerate(rows):
            k = t - last[r] - 1
            p[r] *= math.exp(logd[t - 1] - logd[last[r]])
            m[r] *= b1 ** k
            v[r] *= b2 ** k
            g = vals[i].double()
            p[r] *= 1 - lr * wd
            m[r] = b1 * m[r] + (1 - b1) * g
            v[r] = b2 * v[r] + (1 - b2) * g * g
            p[r] -= lr / (1 - b1 ** t) * m[r] / ((v[r] / (1 - b2 ** t)).sqrt() + eps)
            last[r] = t
    for r in range(F):
        p[r] *= math.exp(logd[-1] - logd[last[r]])
    return p.float()


@pytest.mark.parametrize("fallback", [False, True])
def test_general_case_follows_the_documented_rule(fallback):
    gen = torch.Generator().manual_seed(1)
    p0 = torch.randn(F, H, generator=gen)
    ps = p0.clone().requires_grad_(True)
    lrs = [0.01, 0.02, 0.005, 0.01, 0.03, 0.001]
    opt = RowSparseAdamW([{"params": [ps], "row_sparse": True}], lr=0.01, betas=(0.9, 0.999), weight_decay=0.05)
    if fallback:
        opt._step_rows_cpu = False
    record = []
    for t, rows in enumerate(STEPS):
        opt.param_groups[0]["lr"] = lrs[t]
        vals = torch.randn(len(rows), H, generator=gen)
        record.append((rows, vals))
        ps.grad = _sparse(rows, vals)
        opt.step()
    opt.flush()
    want = _slow_rule(p0, record, lrs, 0.9, 0.999, 1e-8, 0.05)
    torch.testing.assert_close(ps.detach(), want, atol=1e-6, rtol=1e-5)
    # and it is not dense AdamW: rows skipped at some step lack the momentum drift
    _, pd, _ = _run(STEPS, lrs=lrs, seed=1)
    assert not torch.allclose(ps.detach()[5], pd.detach()[5], atol=1e-6)


def test_dense_groups_and_dense_gradients_are_adamw():
    """A dense group is torch's AdamW; a row-sparse parameter with a dense gradient updates every row."""
    gen = torch.Generator().manual_seed(2)
    a0, w0 = torch.randn(7, 3, generator=gen), torch.randn(F, H, generator=gen)
    a, w = a0.clone().requires_grad_(True), w0.clone().requires_grad_(True)
    ad, wd_ = a0.clone().requires_grad_(True), w0.clone().requires_grad_(True)
    opt = RowSparseAdamW([{"params": [w], "row_sparse": True}, {"params": [a]}], lr=0.02, weight_decay=0.1)
    ref = torch.optim.AdamW([wd_, ad], lr=0.02, weight_decay=0.1)
    for _ in range(4):
        ga, gw = torch.randn(7, 3, generator=gen), torch.randn(F, H, generator=gen)
        a.grad, w.grad, ad.grad, wd_.grad = ga, gw, ga.clone(), gw.clone()
        opt.step()
        ref.step()
    assert torch.equal(a.detach(), ad.detach())
    torch.testing.assert_close(w.detach(), wd_.detach(), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("fallback", [False, True])
def test_clamp_keeps_the_folded_weight_in_range(fallback):
    gen = torch.Generator().manual_seed(3)
    p = (torch.randn(F, H, generator=gen) * 3).requires_grad_(True)
    factor = torch.randn(4, H, generator=gen) * 3   # partly beyond ±c: clamped before use
    fmap = torch.arange(F) % 4
    c = 1.5
    opt = RowSparseAdamW([{"params": [p], "row_sparse": True, "clamp": c, "clamp_offset": (factor, fmap)}],
                         lr=0.1, weight_decay=0.0)
    if fallback:
        opt._step_rows_cpu = False
    rows = [1, 2, 7]
    before = p.detach().clone()
    p.grad = _sparse(rows, torch.randn(3, H, generator=gen))
    opt.step()
    folded = p.detach() + factor.clamp(-c, c)[fmap]
    assert folded[rows].abs().max() <= c + 1e-6
    untouched = [r for r in range(F) if r not in rows]
    assert torch.equal(p.detach()[untouched], before[untouched])


def test_state_dict_round_trip_weights_only(tmp_path):
    ps, _, opt = _run(STEPS[:3])
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf, weights_only=True)
    q = ps.detach().clone().requires_grad_(True)
    opt2 = RowSparseAdamW([{"params": [q], "row_sparse": True}], lr=0.01, weight_decay=0.05)
    opt2.load_state_dict(sd)
    gen = torch.Generator().manual_seed(5)
    vals = torch.randn(2, H, generator=gen)
    for o, t in ((opt, ps), (opt2, q)):
        t.grad = _sparse([3, 4], vals)
        o.step()
        o.flush()
    assert torch.equal(ps.detach(), q.detach())


@pytest.mark.parametrize("fallback", [False, True])
def test_loaded_state_keeps_its_dtypes_and_values(fallback):
    """torch's load_state_dict casts a float parameter's state tensors to its dtype: row_step
    came back float32 and row_log_decay rounded to float32, so a resumed run's catch-up decays
    differed from the uninterrupted run's (found by the mid-epoch resume test of the fast path)."""
    ps, _, opt = _run(STEPS[:4], lrs=[0.013, 0.011, 0.007, 0.003], device_fallback=fallback)
    buf = io.BytesIO()
    torch.save(opt.state_dict(), buf)
    buf.seek(0)
    q = ps.detach().clone().requires_grad_(True)
    opt2 = RowSparseAdamW([{"params": [q], "row_sparse": True}], lr=0.01, weight_decay=0.05)
    opt2._step_rows_cpu = not fallback
    opt2.load_state_dict(torch.load(buf, weights_only=True))
    a, b = opt.state[ps], opt2.state[q]
    assert b["row_step"].dtype == torch.int64 and b["row_log_decay"].dtype == torch.float64
    assert all(torch.equal(a[k], b[k]) if isinstance(a[k], torch.Tensor) else a[k] == b[k] for k in a)
    # and the runs go on alike, rows pending for several steps included
    gen = torch.Generator().manual_seed(7)
    for rows in ([3], [4, 6], [8, 10], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]):
        vals = torch.randn(len(rows), H, generator=gen)
        for o, t in ((opt, ps), (opt2, q)):
            o.param_groups[0]["lr"] = 0.009
            t.grad = _sparse(rows, vals)
            o.step()
    assert torch.equal(ps.detach(), q.detach())
    assert all(torch.equal(opt.state[ps][k], opt2.state[q][k]) for k in ("exp_avg", "exp_avg_sq", "row_log_decay"))


def test_bad_values_raise():
    p = torch.zeros(3, requires_grad=True)
    with pytest.raises(ValueError, match="row_sparse"):
        RowSparseAdamW([{"params": [p], "row_sparse": True}])
    with pytest.raises(ValueError, match="betas"):
        RowSparseAdamW([torch.zeros(2, 2, requires_grad=True)], betas=(1.0, 0.9))
    q = torch.zeros(4, 2, requires_grad=True)
    opt = RowSparseAdamW([q])
    q.grad = torch.sparse_coo_tensor(torch.tensor([[0]]), torch.ones(1, 2), (4, 2))
    with pytest.raises(ValueError, match="sparse gradient in a dense group"):
        opt.step()


@pytest.mark.parametrize("fallback", [False, True])
def test_per_column_clamp_limits(fallback):
    """An (H,) tensor of limits: inf leaves a column (a PSQT column, say) unclamped."""
    gen = torch.Generator().manual_seed(4)
    p = (torch.randn(F, H, generator=gen) * 5).requires_grad_(True)
    lim = torch.tensor([1.0, 2.0, float("inf"), 0.5, float("inf")])
    opt = RowSparseAdamW([{"params": [p], "row_sparse": True, "clamp": lim}], lr=1e-3, weight_decay=0.0)
    if fallback:
        opt._step_rows_cpu = False
    before = p.detach().clone()
    p.grad = _sparse([0, 3], torch.randn(2, H, generator=gen))
    opt.step()
    got = p.detach()[[0, 3]]
    assert (got.abs() <= lim + 1e-6).all()
    assert (got[:, [2, 4]] - before[[0, 3]][:, [2, 4]]).abs().max() < 0.01   # moved by the step only


def test_ascending_rows_are_taken_as_coalesced_without_a_copy():
    """A row-sparse gradient whose flag autograd dropped (the numba feature transformer's) but
    whose row indices ascend is marked coalesced in place, not sorted and copied; duplicated or
    unsorted rows are still coalesced (summed), so the step is the same either way."""
    from nnue.trainer.sparse_optim import _coalesced

    vals = torch.arange(12.0).view(4, 3)
    g = torch.sparse_coo_tensor(torch.tensor([[1, 4, 5, 9]]), vals, (10, 3))
    assert not g.is_coalesced()
    c = _coalesced(g)
    assert c.is_coalesced() and c._values().data_ptr() == vals.data_ptr()
    assert torch.equal(c.to_dense(), g.to_dense())
    for idx in ([[4, 1, 5, 9]], [[1, 4, 4, 9]]):
        g = torch.sparse_coo_tensor(torch.tensor(idx), vals, (10, 3))
        c = _coalesced(g)
        assert c.is_coalesced() and torch.equal(c.to_dense(), g.to_dense())
        assert torch.equal(c._indices(), torch.unique(torch.tensor(idx[0])).view(1, -1))
