"""The numba feature transformer (:mod:`nnue.kernels.sparse_ft_numba`) against the torch reference:
forward (bitwise: the same fp32 additions in the same order), backward (summation order differs:
fp32 tolerance), odd sizes, padding, both perspectives, the factoriser, QAT, sparse gradients,
errors, and the model and optimiser wiring."""
from __future__ import annotations

import pytest
import torch
from tests.kernels.kernel_testing import make_indices, make_weights

import nnue.kernels as K
from nnue.kernels import reference, sparse_ft_numba as nb
from nnue.trainer.kinds import build_model
from nnue.trainer.model import factor_map, fake_quant

ACTS = list(nb.ACTIVATIONS)


@pytest.fixture(params=["by-feature", "by-feature-sorted", "scatter"])
def strategy(request, monkeypatch):
    """The weight-gradient strategies (by feature, with or without the lowest-feature order; by
    position into per-thread copies), forced whatever the weight's size."""
    sort, scatter = {"by-feature": (False, False), "by-feature-sorted": (True, False),
                     "scatter": (False, True)}[request.param]
    monkeypatch.setattr(nb, "SORT_ABOVE_BYTES", -1 if sort else 1 << 62)
    monkeypatch.setattr(nb, "SCATTER_UP_TO_BYTES", 1 << 62 if scatter else -1)
    return request.param


def _width(activation: str, h: int) -> int:
    return 2 * h if activation == "pairwise_crelu" else h


def _grads(out, leaves, grad_out):
    return torch.autograd.grad(out, leaves, grad_out)


@pytest.mark.parametrize("B,h", [(1, 7), (1, 33), (5, 7), (5, 33), (3, 1023), (64, 16)])
@pytest.mark.parametrize("activation", ACTS)
def test_matches_reference(activation, B, h, strategy):
    gen = torch.Generator().manual_seed(1000 * B + h)
    F, A = 41, 32
    w, b = make_weights(F, _width(activation, h), torch.float32, gen)
    stm, nstm = make_indices(B, A, F, gen)
    out = nb.sparse_ft_pair(w, b, stm, nstm, activation)
    want = reference.sparse_ft_pair(w, b, stm, nstm, activation)
    # the same additions in the same order (slots in order, then the bias): bit for bit
    assert torch.equal(out, want)
    g = torch.randn(want.shape, generator=gen)
    for got, exp in zip(_grads(out, (w, b), g), _grads(want, (w, b), g)):
        torch.testing.assert_close(got, exp, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("A", [1, 3, 37])
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_slot_counts_and_index_dtypes(A, index_dtype):
    gen = torch.Generator().manual_seed(A)
    w, b = make_weights(23, 9, torch.float32, gen)
    stm, nstm = make_indices(4, A, 23, gen, dtype=index_dtype)
    out = nb.sparse_ft_pair(w, b, stm, nstm, "screlu")
    want = reference.sparse_ft_pair(w, b, stm, nstm, "screlu")
    assert torch.equal(out, want)
    g = torch.randn(want.shape, generator=gen)
    for got, exp in zip(_grads(out, (w, b), g), _grads(want, (w, b), g)):
        torch.testing.assert_close(got, exp, atol=1e-5, rtol=1e-5)


def test_padding_anywhere_and_duplicates_exact(strategy):
    """Padding between valid slots and −5 (any negative) are skipped; a feature 32× in every row of
    both perspectives gets every contribution (integer gradients: exact whatever the order)."""
    gen = torch.Generator().manual_seed(5)
    F, H, B, A = 11, 13, 6, 32
    w, b = make_weights(F, H, torch.float32, gen)
    idx = torch.randint(0, F, (B, A), generator=gen, dtype=torch.int32)
    idx[:, ::3] = -1
    idx[:, 1::5] = -5
    out = nb.sparse_ft_pair(w, b, idx, idx.flip(1).contiguous(), "none")
    assert torch.equal(out, reference.sparse_ft_pair(w, b, idx.clamp(min=-1), idx.flip(1).clamp(min=-1), "none"))
    same = torch.full((B, A), F - 1, dtype=torch.int32)
    out = nb.sparse_ft_pair(w, b, same, same.clone(), "none")
    g = torch.randint(-3, 4, out.shape, generator=gen).float()
    gw, gb = torch.autograd.grad(out, (w, b), g)
    want = torch.zeros(F, H)
    want[F - 1] = A * (g[:, :H] + g[:, H:]).sum(0)
    assert torch.equal(gw, want)
    assert torch.equal(gb, (g[:, :H] + g[:, H:]).sum(0))
    pad = torch.full((B, A), -1, dtype=torch.int32)
    out = nb.sparse_ft_pair(w, b, pad, pad, "crelu")
    assert torch.equal(out, b.detach().clamp(0, 1).repeat(B, 2))
    gw, gb = torch.autograd.grad(out.sum(), (w, b))
    assert not gw.any()


@pytest.mark.parametrize("activation", ["crelu", "screlu", "pairwise_crelu"])
def test_kinks_follow_torch(activation):
    """Accumulators exactly on a kink (0, 1) get torch's gradient there (inclusive clamp bounds)."""
    kinks = torch.tensor([0.0, 1.0, -3.0, 3.0, 0.5, -0.5, 2.0, 1.0])
    w = torch.zeros(2, 8, requires_grad=True)
    b = kinks.clone().requires_grad_(True)
    idx = torch.tensor([[0, -1], [-1, -1]], dtype=torch.int32)
    out = nb.sparse_ft_pair(w, b, idx, idx, activation)
    w2, b2 = w.detach().clone().requires_grad_(True), b.detach().clone().requires_grad_(True)
    want = reference.sparse_ft_pair(w2, b2, idx, idx, activation)
    g = torch.arange(1.0, out.numel() + 1).reshape(out.shape)
    assert torch.equal(out, want)
    for got, exp in zip(torch.autograd.grad(out, (w, b), g), torch.autograd.grad(want, (w2, b2), g)):
        assert torch.equal(got, exp)


@pytest.mark.parametrize("activation", ACTS)
@pytest.mark.parametrize("qat", [False, True])
def test_factoriser_and_qat_without_the_folded_matrix(activation, qat, strategy):
    """factor rows added per gathered row == the reference on weight + factor[map]; under QAT the
    folded elements are fake-quantised first (straight-through gradient)."""
    gen = torch.Generator().manual_seed(17 + qat)
    F, H, B = 90, _width(activation, 11), 7
    w, b = make_weights(F, H, torch.float32, gen, scale=0.2)
    fmap = factor_map("halfkav2_hm", F) % 13   # 13 virtual rows, several real rows each
    fac = (torch.randn(13, H, generator=gen) * 0.1).requires_grad_(True)
    stm, nstm = make_indices(B, 32, F, gen)
    qa = 255.0 if qat else None
    out = nb.sparse_ft_pair(w, b, stm, nstm, activation, fac, fmap, qa=qa)
    folded = w + fac[fmap]
    if qat:
        folded = fake_quant(folded, qa)
    want = reference.sparse_ft_pair(folded, b, stm, nstm, activation)
    assert torch.equal(out, want)
    g = torch.randn(want.shape, generator=gen)
    for got, exp in zip(_grads(out, (w, fac, b), g), _grads(want, (w, fac, b), g)):
        torch.testing.assert_close(got, exp, atol=2e-5, rtol=1e-5)


def _act_torch(a: torch.Tensor, activation: str) -> torch.Tensor:
    c = a.clamp(0.0, 1.0)
    if activation == "pairwise_crelu":
        h2 = a.shape[1] // 2
        return c[:, :h2] * c[:, h2:]
    return c * c if activation == "screlu" else c


@pytest.mark.parametrize("activation", ["crelu", "screlu", "pairwise_crelu"])
@pytest.mark.parametrize("L,P", [(2, 1), (14, 8), (64, 8), (1024, 8)])
@pytest.mark.parametrize("factoriser", [False, True])
def test_passthrough_columns_equal_raw_accumulators_then_torch(activation, L, P, factoriser, strategy):
    """sparse_ft_pair_passthrough (a Stockfish-style FT: L activated columns, then P PSQT columns)
    == the reference's raw accumulators (both perspectives) with the activation applied in torch
    to the first L columns and the last P passed through: forward bit for bit, backward (weight,
    factor, bias; one random gradient for both outputs) at fp32 tolerance."""
    gen = torch.Generator().manual_seed(L * 10 + P + factoriser)
    F, B, H = 97, 9, L + P
    w, b = make_weights(F, H, torch.float32, gen)
    stm, nstm = make_indices(B, 32, F, gen)
    fac = fmap = None
    leaves = (w, b)
    if factoriser:
        fmap = factor_map("halfkav2_hm", F) % 5
        fac = (torch.randn(5, H, generator=gen) * 0.1).requires_grad_(True)
        leaves = (w, fac, b)
    out, raw = nb.sparse_ft_pair_passthrough(w, b, stm, nstm, activation, P, fac, fmap)
    acc = reference.sparse_ft_pair(w if fac is None else w + fac[fmap], b, stm, nstm, "none")
    a_stm, a_nstm = acc[:, :H], acc[:, H:]
    want_out = torch.cat([_act_torch(a_stm[:, :L], activation), _act_torch(a_nstm[:, :L], activation)], 1)
    want_raw = torch.cat([a_stm[:, L:], a_nstm[:, L:]], 1)
    assert torch.equal(out, want_out) and torch.equal(raw, want_raw)
    g_out, g_raw = torch.randn(out.shape, generator=gen), torch.randn(raw.shape, generator=gen)
    got = torch.autograd.grad((out, raw), leaves, (g_out, g_raw))
    exp = torch.autograd.grad((want_out, want_raw), leaves, (g_out, g_raw))
    for x, y in zip(got, exp):
        torch.testing.assert_close(x, y, atol=2e-5, rtol=1e-5)
    # one output unused: its gradient counts as zero
    got = torch.autograd.grad(nb.sparse_ft_pair_passthrough(w, b, stm, nstm, activation, P, fac, fmap)[1],
                              leaves, g_raw)
    acc = reference.sparse_ft_pair(w if fac is None else w + fac[fmap], b, stm, nstm, "none")
    exp = torch.autograd.grad(torch.cat([acc[:, L:H], acc[:, H + L:]], 1), leaves, g_raw)
    for x, y in zip(got, exp):
        torch.testing.assert_close(x, y, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("activation,grid", [("crelu", None), ("screlu", None), ("pairwise_crelu", None),
                                             ("pairwise_crelu", 128.0)])
@pytest.mark.parametrize("scale", [127 / 128, 0.37])
def test_out_scale_is_torch_mul_after_the_kernel(activation, grid, scale, strategy):
    """out_scale fused into the pass == the unscaled kernel output times the scale in torch (then
    out_grid's floor, as fake_quant), forward and every gradient bit for bit: the backward takes
    grad·scale first, as torch's mul backward does."""
    gen = torch.Generator().manual_seed(int(scale * 100) + (grid is not None))
    F, B, L, P = 91, 13, 30, 8
    w, b = make_weights(F, L + P, torch.float32, gen)
    stm, nstm = make_indices(B, 32, F, gen)
    fmap = factor_map("halfkav2_hm", F) % 7
    fac = (torch.randn(7, L + P, generator=gen) * 0.1).requires_grad_(True)
    out, raw = nb.sparse_ft_pair_passthrough(w, b, stm, nstm, activation, P, fac, fmap, out_grid=grid,
                                             out_scale=scale)
    plain, raw1 = nb.sparse_ft_pair_passthrough(w, b, stm, nstm, activation, P, fac, fmap)
    want = plain * scale
    if grid is not None:
        want = fake_quant(want, grid, "floor")
    assert torch.equal(out, want) and torch.equal(raw, raw1)
    assert not torch.equal(out, plain)   # the scale was applied
    g_out, g_raw = torch.randn(out.shape, generator=gen), torch.randn(raw.shape, generator=gen)
    got = torch.autograd.grad((out, raw), (w, fac, b), (g_out, g_raw))
    exp = torch.autograd.grad((want, raw1), (w, fac, b), (g_out, g_raw))
    for x, y in zip(got, exp):
        assert torch.equal(x, y)


def test_passthrough_refusals():
    w, b = torch.zeros(5, 10), torch.zeros(10)
    idx = torch.zeros(2, 3, dtype=torch.int32)
    for act, p in (("none", 2), ("crelu", 0), ("crelu", 10), ("pairwise_crelu", 3)):
        with pytest.raises(ValueError, match="passthrough"):
            nb.sparse_ft_pair_passthrough(w, b, idx, idx, act, p)
    for scale in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="out_scale"):
            nb.sparse_ft_pair_passthrough(w, b, idx, idx, "crelu", 2, out_scale=scale)


def test_sparse_grad_holds_the_touched_rows(strategy):
    gen = torch.Generator().manual_seed(3)
    F, H = 50, 6
    w, b = make_weights(F, H, torch.float32, gen)
    stm, nstm = make_indices(5, 4, 20, gen)   # only rows < 20 (and none of 20..49)
    g = torch.randn(5, 2 * H, generator=gen)
    dense, _ = _grads(nb.sparse_ft_pair(w, b, stm, nstm, "screlu"), (w, b), g)
    sparse, _ = _grads(nb.sparse_ft_pair(w, b, stm, nstm, "screlu", sparse_grad=True), (w, b), g)
    assert sparse.is_sparse and sparse.is_coalesced() and sparse.shape == (F, H)
    rows = sparse._indices()[0]
    touched = torch.unique(torch.cat([stm[stm >= 0], nstm[nstm >= 0]])).long()
    assert torch.equal(rows, touched)
    assert torch.equal(sparse.to_dense(), dense)
    # autograd leaves it on the leaf as it is (what the optimiser reads)
    w.grad = None
    nb.sparse_ft_pair(w, b, stm, nstm, "screlu", sparse_grad=True).backward(g)
    assert w.grad.is_sparse and torch.equal(w.grad._indices()[0], touched)


def test_no_grad_and_empty_batch():
    gen = torch.Generator().manual_seed(9)
    w, b = make_weights(20, 6, torch.float32, gen)
    stm, nstm = make_indices(3, 4, 20, gen)
    with torch.no_grad():
        out = nb.sparse_ft_pair(w, b, stm, nstm, "screlu")
    assert not out.requires_grad
    empty = torch.empty(0, 4, dtype=torch.int32)
    out = nb.sparse_ft_pair(w, b, empty, empty, "pairwise_crelu")
    assert out.shape == (0, 6)
    gw, gb = torch.autograd.grad(out.sum(), (w, b), allow_unused=True)
    assert not gw.any() and not gb.any()


@pytest.mark.parametrize("case,error,match", [
    ("activation", ValueError, "unknown activation"),
    ("weight_dtype", TypeError, "float32"),
    ("index_dtype", TypeError, "int32 or int64"),
    ("index_range", ValueError, "beyond the 10 rows"),
    ("shape", ValueError, "differ"),
    ("odd_pairwise", ValueError, "even width"),
    ("factor_alone", ValueError, "go together"),
    ("factor_map_range", ValueError, "factor_map"),
])
def test_errors_name_the_argument(case, error, match):
    w, b = torch.zeros(10, 5), torch.zeros(5)
    idx = torch.zeros(2, 3, dtype=torch.int32)
    kw, act, s, n = {}, "crelu", idx, idx
    if case == "activation":
        act = "gelu"
    elif case == "weight_dtype":
        w = w.double()
    elif case == "index_dtype":
        s = idx.short()
    elif case == "index_range":
        s = idx + 10
    elif case == "shape":
        n = torch.zeros(3, 3, dtype=torch.int32)
    elif case == "odd_pairwise":
        act = "pairwise_crelu"
    elif case == "factor_alone":
        kw = {"factor": torch.zeros(2, 5)}
    elif case == "factor_map_range":
        kw = {"factor": torch.zeros(2, 5), "factor_map": torch.full((10,), 2)}
    with pytest.raises(error, match=match):
        nb.sparse_ft_pair(w, b, s, n, act, **kw)


def test_dispatch_backend_numba():
    gen = torch.Generator().manual_seed(4)
    w, b = make_weights(30, 8, torch.float32, gen)
    stm, nstm = make_indices(4, 5, 30, gen)
    assert torch.equal(K.sparse_ft_pair(w, b, stm, nstm, "screlu", "numba"),
                       reference.sparse_ft_pair(w, b, stm, nstm, "screlu"))
    assert K.resolve_backend("numba", torch.device("cpu")) == "numba"
    with pytest.raises(ValueError, match="CPU tensors"):
        K.resolve_backend("numba", torch.device("cuda"))
    x = torch.randn(3, 5)
    assert torch.equal(K.activate("hardswish", x, "numba"), reference.activate("hardswish", x))


@pytest.mark.parametrize("kind,activation", [("perspective", "screlu"), ("deep", "pairwise_crelu"),
                                             ("tiny", "crelu")])
@pytest.mark.parametrize("factoriser", [False, True])
@pytest.mark.parametrize("qat", [False, True])
def test_models_numba_equal_torch(kind, activation, factoriser, qat):
    """The perspective, deep and tiny nets: the numba backend (model.backend=auto on the CPU,
    nnue.trainer.fast_path) computes the torch backend's forward bit for bit and its gradients to
    fp32 order noise, with and without a factoriser, with and without QAT."""
    from nnue.spec.quant import QuantScheme

    torch.manual_seed(0)
    deep = {"l1_outputs": 4, "l2_outputs": 6, "hidden_activation": "crelu"} if kind == "deep" else \
        ({"l1_outputs": 5, "hidden_activation": "crelu"} if kind == "tiny" else None)
    nets = [build_model(kind, "halfkav2_hm", 22528, 18, activation, 8, backend, factoriser, deep)
            for backend in ("torch", "numba")]
    nets[1].load_state_dict(nets[0].state_dict())
    if qat:
        for n in nets:
            n.enable_qat(QuantScheme())
    gen = torch.Generator().manual_seed(1)
    stm, nstm = make_indices(9, 32, 22528, gen)
    bucket = torch.randint(0, 8, (9,), generator=gen)
    ys = [n(stm, nstm, bucket) for n in nets]
    assert torch.equal(ys[0], ys[1])
    for y in ys:
        (y * torch.arange(1.0, 10.0)).sum().backward()
    for (name, p0), (_, p1) in zip(nets[0].named_parameters(), nets[1].named_parameters()):
        torch.testing.assert_close(p1.grad, p0.grad, atol=2e-5, rtol=1e-5, msg=name)


def test_by_feature_runs_have_equal_work_on_skewed_rows():
    """The by-feature weight gradient splits its rows into runs of equal work, not of equal row
    counts: with the hot rows together (HalfKA's king buckets on real games) the equal-count
    split left one of 2 threads 85 % of the work. A run holds at most its share plus one row."""
    import numpy as np

    gen = np.random.default_rng(3)
    F = 5000
    counts = np.where(np.arange(F) < 400, 900, 3)   # the first rows hot, the rest rare
    counts[gen.choice(F, 200, replace=False)] = 0   # rows not touched
    offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    rows = np.flatnonzero(counts).astype(np.int64)
    for runs in (1, 2, 7, 16):
        bounds = nb._work_bounds(offsets, rows, runs)
        assert bounds[0] == 0 and bounds[-1] == rows.shape[0] and bool(np.all(np.diff(bounds) >= 0))
        work = [int((counts[rows[a:b]] + 1).sum()) for a, b in zip(bounds[:-1], bounds[1:])]
        assert sum(work) == int((counts[rows] + 1).sum())
        assert max(work) <= sum(work) / runs + counts.max() + 1
        # an equal-count split of the same rows is far off for 2 runs: what the test guards
        if runs == 2:
            half = rows.shape[0] // 2
            assert (counts[rows[:half]] + 1).sum() > 0.8 * sum(work)


@pytest.mark.parametrize("threads", [1, 2])
def test_by_feature_gradient_is_the_same_for_any_thread_count(threads, monkeypatch):
    """Each row's gradient is summed by one thread in list order: the split changes nothing."""
    import numba

    if threads > numba.config.NUMBA_NUM_THREADS:
        pytest.skip(f"numba has {numba.config.NUMBA_NUM_THREADS} threads")
    monkeypatch.setattr(nb, "SORT_ABOVE_BYTES", -1)
    monkeypatch.setattr(nb, "SCATTER_UP_TO_BYTES", -1)
    gen = torch.Generator().manual_seed(11)
    F, H, B, A = 300, 40, 257, 24
    w, b = make_weights(F, H, torch.float32, gen)
    hot = torch.randint(0, 20, (B, A), generator=gen)   # most slots on 20 hot rows
    rare = torch.randint(0, F, (B, A), generator=gen)
    pick = torch.rand(B, A, generator=gen) < 0.7
    stm = torch.where(pick, hot, rare)
    nstm = torch.where(torch.rand(B, A, generator=gen) < 0.7, hot.flip(0), rare.flip(1))
    g = torch.randn(B, 2 * H, generator=gen)
    grads = []
    old = numba.get_num_threads()
    try:
        for t in (1, threads):
            numba.set_num_threads(t)
            out = nb.sparse_ft_pair(w, b, stm, nstm, "crelu")
            grads.append(torch.autograd.grad(out, (w,), g)[0])
    finally:
        numba.set_num_threads(old)
    assert torch.equal(grads[0], grads[1])
    want = torch.autograd.grad(reference.sparse_ft_pair(w, b, stm, nstm, "crelu"), (w,), g)[0]
    torch.testing.assert_close(grads[1], want, atol=1e-4, rtol=1e-5)


@pytest.mark.parametrize("U,V,H", [(0, 5, 7), (1, 1, 1), (97, 13, 33), (400, 704, 17)])
def test_factor_gradient_sums_each_virtual_row_in_rank_order(U, V, H):
    """The factor's gradient by virtual row (counting-sorted ranks, whole rows, one thread a row)
    equals adding every touched row's gradient into its virtual row one after the other in rank
    order (``np.add.at``, unbuffered), bit for bit; rows mapped to −1 add nothing."""
    import numpy as np

    gen = np.random.default_rng(U + V + H)
    F = max(U, 1) * 3
    rows = np.sort(gen.choice(F, U, replace=False)).astype(np.int64)
    fmap = gen.integers(-1, V, F).astype(np.int64)      # −1: a row without a virtual row
    fmap[: F // 2] = gen.integers(0, min(V, 3), F // 2)  # a few hot virtual rows
    values = gen.standard_normal((U, H)).astype(np.float32)
    want = np.zeros((V, H), np.float32)
    keep = fmap[rows] >= 0
    np.add.at(want, fmap[rows][keep], values[keep])
    got = nb._factor_grad(values, rows, fmap, V)
    assert got.dtype == np.float32 and got.shape == (V, H)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("C", [1, 2, 3, 7])
def test_feature_lists_are_ranks_ascending_for_any_slice_count(C):
    """Every feature's list holds the processing ranks of the pairs that have it, ascending (the
    order the weight gradient sums them in), whatever the number of slices built at once; a
    feature twice in one pair is listed twice."""
    import numpy as np

    gen = np.random.default_rng(C)
    B, A, F = 301, 13, 50
    stm = gen.integers(-1, F, (B, A)).astype(np.int32)
    nstm = gen.integers(-1, F, (B, A)).astype(np.int32)
    stm[:, 0] = stm[:, 1]   # a repeated feature
    order = gen.permutation(2 * B).astype(np.int64)
    offsets, rows = nb._touched_rows(stm, nstm, F)
    pairs = nb._feature_lists(stm, nstm, order, offsets, C)
    for f in range(F):
        want = [i for i, q in enumerate(order) for x in (stm if q % 2 == 0 else nstm)[q // 2] if x == f]
        assert pairs[offsets[f]:offsets[f + 1]].tolist() == want
