"""The numba feature transformer on Stockfish 19's net (:mod:`nnue.kernels.sparse_ft_numba` with
``clamp_max``, per-column QAT grids and a factoriser on some rows only) against the torch
reference, and :class:`nnue.trainer.kinds.sfnnv16.SFNNv16Net` on the numba backend against its own
torch backend, with the row-sparse optimiser and its clamp of the int8 rows.

Forward: bit for bit (the same fp32 additions in the same order, the same fake quantisation).
Backward: the weight and factor gradients sum the same terms in another order, so they are
compared at fp32 tolerance (atol 2e-5, rtol 1e-5, as the kernel's other tests); gradients through
a kink of the clamp are compared exactly."""
from __future__ import annotations

import pytest
import torch
from tests.kernels.kernel_testing import make_indices, make_weights
from tests.kernels.test_sparse_ft_numba import strategy  # noqa: F401  (the weight-gradient strategies)

from nnue.kernels import reference, sparse_ft_numba as nb
from nnue.pipeline.features import factor_map
from nnue.trainer.kinds import sfnnv16 as sf
from nnue.trainer.model import fake_quant
from nnue.trainer.sparse_optim import RowSparseAdamW

HI = 255 / 256
ATOL, RTOL = 2e-5, 1e-5


def _act(a: torch.Tensor, activation: str, hi: float) -> torch.Tensor:
    c = a.clamp(0.0, hi)
    if activation == "pairwise_crelu":
        h2 = a.shape[1] // 2
        return c[:, :h2] * c[:, h2:]
    return c * c if activation == "screlu" else c


def _partial_map(F: int, first: int, V: int) -> torch.Tensor:
    """(F,) int64: −1 (no virtual row) for rows < first, then (i − first) % V."""
    m = torch.full((F,), -1, dtype=torch.int64)
    m[first:] = torch.arange(F - first) % V
    return m


def _folded(w, fac, fmap, L, qat):
    """The reference's weight: the factor added to the rows that have one (torch's ops, as the
    model's folded_ft_weight), under QAT the first L columns on 1/256 and the rest on 1/9600."""
    if fac is not None:
        first = int((fmap < 0).sum())
        w = torch.cat([w[:first], w[first:] + fac[fmap[first:]]])
    if qat:
        w = torch.cat([fake_quant(w[:, :L], 256.0), fake_quant(w[:, L:], 9600.0)], 1)
    return w


def _grids(L: int, P: int) -> torch.Tensor:
    return torch.tensor([256.0] * L + [9600.0] * P)


# Stockfish 19's pairwise product on odd and even sizes; the other activations on one size
CASES = [("pairwise_crelu", 2, 1, 1), ("pairwise_crelu", 14, 8, 9), ("pairwise_crelu", 64, 8, 5),
         ("pairwise_crelu", 130, 3, 4), ("crelu", 13, 8, 7), ("screlu", 13, 8, 7)]


@pytest.mark.parametrize("activation,L,P,B", CASES)
@pytest.mark.parametrize("qat", [False, True])
@pytest.mark.parametrize("factoriser", [False, True])
def test_passthrough_clamp_grids_partial_factoriser(activation, L, P, B, qat, factoriser, strategy):  # noqa: F811
    """sparse_ft_pair_passthrough with clamp_max 255/256, the two QAT grids and a factoriser on
    the rows ≥ 40 only == the reference's raw accumulators of the folded (fake-quantised) weight,
    activated in torch (under QAT the pairwise products floored to 1/128 by ``out_grid``, as
    fake_quant(·, 128, "floor")): forward bit for bit, backward (weight, factor, bias) at fp32
    tolerance."""
    gen = torch.Generator().manual_seed(100 * L + 10 * P + 2 * qat + factoriser)
    F, H = 97, L + P
    w, b = make_weights(F, H, torch.float32, gen)
    stm, nstm = make_indices(B, 37, F, gen)
    fac = fmap = None
    leaves = (w, b)
    if factoriser:
        fmap = _partial_map(F, 40, 7)
        fac = (torch.randn(7, H, generator=gen) * 0.1).requires_grad_(True)
        leaves = (w, fac, b)
    qa = _grids(L, P) if qat else None
    grid = 128.0 if qat and activation == "pairwise_crelu" else None
    out, raw = nb.sparse_ft_pair_passthrough(w, b, stm, nstm, activation, P, fac, fmap, qa=qa, clamp_max=HI,
                                             out_grid=grid)
    acc = reference.sparse_ft_pair(_folded(w, fac, fmap, L, qat), b, stm, nstm, "none")
    a_s, a_n = acc[:, :H], acc[:, H:]
    want_out = torch.cat([_act(a_s[:, :L], activation, HI), _act(a_n[:, :L], activation, HI)], 1)
    if grid:
        assert not torch.equal(out, want_out)   # the floor is applied...
        want_out = fake_quant(want_out, grid, "floor")   # ...as torch's fake_quant
    want_raw = torch.cat([a_s[:, L:], a_n[:, L:]], 1)
    assert torch.equal(out, want_out) and torch.equal(raw, want_raw)
    g_out, g_raw = torch.randn(out.shape, generator=gen), torch.randn(raw.shape, generator=gen)
    got = torch.autograd.grad((out, raw), leaves, (g_out, g_raw))
    exp = torch.autograd.grad((want_out, want_raw), leaves, (g_out, g_raw))
    for x, y in zip(got, exp):
        torch.testing.assert_close(x, y, atol=ATOL, rtol=RTOL)
    if factoriser:  # the rows without a virtual row give the factor nothing
        only = torch.zeros(B, 37, dtype=torch.int32) - 1
        only[:, 0] = 3   # row 3 < 40: no virtual row
        o2, r2 = nb.sparse_ft_pair_passthrough(w, b, only, only, activation, P, fac, fmap, qa=qa, clamp_max=HI)
        gfac = torch.autograd.grad((o2, r2), fac, (torch.ones_like(o2), torch.ones_like(r2)))[0]
        assert not gfac.any()


def test_clamp_max_changes_the_result():
    """clamp_max is used: accumulators between 255/256 and 1 give another product at 1.0."""
    w = torch.zeros(1, 4)
    b = torch.tensor([0.999, 0.999, 0.5, 0.999])
    idx = torch.tensor([[0]], dtype=torch.int32)
    at_hi = nb.sparse_ft_pair(w, b, idx, idx, "pairwise_crelu", clamp_max=HI)
    at_one = nb.sparse_ft_pair(w, b, idx, idx, "pairwise_crelu")
    assert torch.equal(at_hi, torch.tensor([[HI * 0.5, HI * HI] * 2]))
    assert not torch.equal(at_hi, at_one)


@pytest.mark.parametrize("activation", ["crelu", "screlu", "pairwise_crelu"])
def test_kinks_at_clamp_max_follow_torch(activation):
    """Accumulators on 0 and exactly on 255/256 get torch's gradient (inclusive bounds); those
    between 255/256 and 1 get none."""
    kinks = torch.tensor([0.0, HI, -3.0, 0.999, 0.5, HI, 1.0, 0.25])
    w = torch.zeros(2, 8, requires_grad=True)
    b = kinks.clone().requires_grad_(True)
    idx = torch.tensor([[0, -1], [-1, -1]], dtype=torch.int32)
    out = nb.sparse_ft_pair(w, b, idx, idx, activation, clamp_max=HI)
    w2, b2 = w.detach().clone().requires_grad_(True), b.detach().clone().requires_grad_(True)
    acc = reference.sparse_ft_pair(w2, b2, idx, idx, "none")
    want = torch.cat([_act(acc[:, :8], activation, HI), _act(acc[:, 8:], activation, HI)], 1)
    g = torch.arange(1.0, out.numel() + 1).reshape(out.shape)
    assert torch.equal(out, want)
    for got, exp in zip(torch.autograd.grad(out, (w, b), g), torch.autograd.grad(want, (w2, b2), g)):
        assert torch.equal(got, exp)


@pytest.mark.parametrize("factoriser", [False, True])
@pytest.mark.parametrize("group_by", ["lowest", "highest"])
def test_raw_accumulators_with_column_grids(factoriser, group_by, strategy):  # noqa: F811
    """``none`` (the raw accumulators, :meth:`SFNNv16Net._accumulators`) with per-column QAT
    grids and the partial factoriser == the reference, bit for bit, whichever grouping of the
    pairs; gradients at tolerance."""
    gen = torch.Generator().manual_seed(7 + factoriser)
    F, L, P, B = 61, 18, 8, 6
    w, b = make_weights(F, L + P, torch.float32, gen)
    stm, nstm = make_indices(B, 29, F, gen)
    fac = fmap = None
    leaves = (w, b)
    if factoriser:
        fmap = _partial_map(F, 23, 5)
        fac = (torch.randn(5, L + P, generator=gen) * 0.1).requires_grad_(True)
        leaves = (w, fac, b)
    out = nb.sparse_ft_pair(w, b, stm, nstm, "none", fac, fmap, qa=_grids(L, P), group_by=group_by)
    want = reference.sparse_ft_pair(_folded(w, fac, fmap, L, True), b, stm, nstm, "none")
    assert torch.equal(out, want)
    g = torch.randn(want.shape, generator=gen)
    for x, y in zip(torch.autograd.grad(out, leaves, g), torch.autograd.grad(want, leaves, g)):
        torch.testing.assert_close(x, y, atol=ATOL, rtol=RTOL)


def test_one_grid_as_a_tensor_is_the_number():
    """qa as an (H,) tensor of one value computes what qa as that number does, bit for bit."""
    gen = torch.Generator().manual_seed(3)
    w, b = make_weights(40, 12, torch.float32, gen)
    stm, nstm = make_indices(5, 9, 40, gen)
    a = nb.sparse_ft_pair(w, b, stm, nstm, "screlu", qa=255.0)
    t = nb.sparse_ft_pair(w, b, stm, nstm, "screlu", qa=torch.full((12,), 255.0))
    assert torch.equal(a, t)
    g = torch.randn(a.shape, generator=gen)
    for x, y in zip(torch.autograd.grad(a, (w, b), g), torch.autograd.grad(t, (w, b), g)):
        assert torch.equal(x, y)


@pytest.mark.parametrize("kw,match", [
    ({"qa": torch.ones(3)}, "qa"),
    ({"qa": torch.zeros(6)}, "grids must be > 0"),
    ({"qa": 0.0}, "qa=0.0"),
    ({"clamp_max": 0.0}, "clamp_max"),
    ({"group_by": "first"}, "group_by"),
    ({"out_grid": 0.0}, "out_grid"),
    ({"factor": torch.zeros(2, 6), "factor_map": torch.full((10,), -2)}, "factor_map"),
])
def test_new_arguments_refused(kw, match):
    w, b = torch.zeros(10, 6), torch.zeros(6)
    idx = torch.zeros(2, 3, dtype=torch.int32)
    with pytest.raises(ValueError, match=match):
        nb.sparse_ft_pair_passthrough(w, b, idx, idx, "pairwise_crelu", 2, **kw)
    with pytest.raises(ValueError, match="out_grid"):   # the floor grid is the pairwise product's only
        nb.sparse_ft_pair_passthrough(w, b, idx, idx, "crelu", 2, out_grid=128.0)


# ------------------------------------------------------------------------ the model's two backends
def sfnnv16_indices(B: int, gen: torch.Generator, counts=(40, 12, 20), width: int = 90) -> tuple[torch.Tensor, ...]:
    """(stm, nstm) (B, width) int32 sfnnv16 indices, −1 padded anywhere: up to counts[0] threat
    features, counts[1] pawn pairs and counts[2] HalfKAv2_hm features per perspective (random
    counts, a feature repeated across positions and perspectives), shuffled within the row."""
    out = []
    ranges = ((0, sf.THREAT_INPUTS), (sf.THREAT_INPUTS, sf.INT8_INPUTS), (sf.INT8_INPUTS, sf.NUM_INPUTS))
    for _ in range(2):
        rows = torch.full((B, width), -1, dtype=torch.int32)
        for i in range(B):
            parts = [torch.randint(lo, hi, (int(torch.randint(0, c + 1, (1,), generator=gen)),), generator=gen)
                     for (lo, hi), c in zip(ranges, counts)]
            row = torch.cat(parts)[:width]
            slots = torch.randperm(width, generator=gen)[:row.numel()]
            rows[i, slots] = row.int()
        out.append(rows)
    stm, nstm = out
    stm[0, 0], nstm[-1, -1] = sf.NUM_INPUTS - 1, sf.NUM_INPUTS - 1   # the last row, in both
    stm[-1, 1], nstm[0, 2] = 5, 5                                    # one threat row shared
    return stm, nstm


def _nets(hidden: int, factoriser: bool, qat: bool, seed: int = 0):
    torch.manual_seed(seed)
    arch = sf.SFNNv16Arch(sf.NUM_INPUTS, hidden)
    nets = [sf.SFNNv16Net(arch, backend, factor_map("sfnnv16", sf.NUM_INPUTS, partial=True) if factoriser else None) for backend in ("torch", "numba")]
    with torch.no_grad():   # nonzero factor, l1_fact and out rows: every path carries signal
        if factoriser:
            nets[0].ft.factor.normal_(0, 0.05)
        nets[0].l1_fact.weight.normal_(0, 0.05)
        nets[0].out.weight.normal_(0, 0.2)
    nets[1].load_state_dict(nets[0].state_dict())
    for n in nets:
        if qat:
            n.enable_qat(object())
    return nets


@pytest.mark.parametrize("hidden,qat,factoriser,sparse_grad", [
    (64, False, False, False), (64, True, True, True), (64, True, True, False), (128, True, False, True),
    (128, False, True, False), (128, True, True, True)])
def test_sfnnv16_numba_equals_torch(hidden, qat, factoriser, sparse_grad):
    """SFNNv16Net on the numba backend (its defaults: the clamp at 255/256, QAT on both grids,
    the HalfKA factoriser) computes its torch backend's forward bit for bit, its raw
    accumulators too, and its gradients to fp32 order noise (the weight's sparse gradient equal
    to the dense one)."""
    nets = _nets(hidden, factoriser, qat, seed=hidden + qat)
    nets[1].sparse_grad = sparse_grad
    gen = torch.Generator().manual_seed(11)
    B = 13
    stm, nstm = sfnnv16_indices(B, gen)
    bucket = torch.randint(0, 8, (B,), generator=gen)
    ys = [n(stm, nstm, bucket) for n in nets]
    assert torch.equal(ys[0], ys[1])
    with torch.no_grad():
        assert torch.equal(nets[0]._accumulators(stm, nstm), nets[1]._accumulators(stm, nstm))
    wts = torch.randn(B, generator=gen)
    for y in ys:
        (y * wts).sum().backward()
    for (name, p0), (_, p1) in zip(nets[0].named_parameters(), nets[1].named_parameters()):
        g1 = p1.grad
        if name == "ft.weight":
            assert g1.is_sparse == sparse_grad
            g1 = g1.to_dense() if sparse_grad else g1
        torch.testing.assert_close(g1, p0.grad, atol=ATOL, rtol=RTOL, msg=name)
    assert nets[0].ft.weight.grad[:sf.INT8_INPUTS].abs().sum() > 0   # the int8 rows learn too


def test_sfnnv16_row_sparse_training_equals_dense():
    """Four training steps on the numba backend with RowSparseAdamW (β1 = 0: no momentum drift,
    and no weight decay, which the optimiser applies to a row only when it is next touched, after
    the forward has read it: so the rule is dense AdamW's step for step) and
    ``clip_weights(ft_weight=False)`` == the torch backend
    with torch.optim.AdamW and the dense ``clip_weights``, to fp32 tolerance: the int8 rows the
    step touches are clamped to ±127/256 by the optimiser as the dense clip does, the
    HalfKAv2_hm rows are not clamped by either; a learning rate large enough that the clamp
    bites (0.3 for the feature transformer's weight, 1e-3 for the rest)."""
    nets = _nets(64, True, True, seed=5)
    nets[1].sparse_grad = True
    lr, betas = 1e-3, (0.0, 0.999)
    rest = [p for p in nets[0].parameters() if p is not nets[0].ft.weight]
    dense = torch.optim.AdamW([{"params": [nets[0].ft.weight], "lr": 0.3}, {"params": rest}], lr=lr, betas=betas,
                              weight_decay=0.0)
    sparse = RowSparseAdamW.for_model(nets[1], ft_clip=128.0, lr=lr, betas=betas, weight_decay=0.0)
    sparse.param_groups[0]["lr"] = 0.3
    gen = torch.Generator().manual_seed(2)
    for step in range(4):
        stm, nstm = sfnnv16_indices(16, gen)
        bucket = torch.randint(0, 8, (16,), generator=gen)
        target = torch.randn(16, generator=gen)
        for net, opt, ft in ((nets[0], dense, True), (nets[1], sparse, False)):
            opt.zero_grad()
            ((net(stm, nstm, bucket) - target) ** 2).mean().backward()
            opt.step()
            net.clip_weights(128.0, 0.992, ft_weight=ft)
    sparse.flush()
    nets[1].clip_weights(128.0, 0.992)
    w0, w1 = nets[0].ft.weight.detach(), nets[1].ft.weight.detach()
    int8 = w1[:sf.INT8_INPUTS]
    assert bool((int8.abs() <= sf.INT8_ROW_LIMIT).all())
    assert bool((int8.abs() == sf.INT8_ROW_LIMIT).any()), "the clamp never bit: raise the learning rate"
    assert bool((w1[sf.INT8_INPUTS:].abs() > sf.INT8_ROW_LIMIT).any())   # HalfKA rows: not clamped
    for (name, p0), (_, p1) in zip(nets[0].named_parameters(), nets[1].named_parameters()):
        if name == "ft.bias":
            # the PSQT columns of the bias cancel in (stm − nstm) / 2: their gradient is 0 in
            # torch and fp32 noise (~1e-9) in the kernel's other summation order, which Adam's
            # normalisation turns into steps of up to lr; they are not exported
            p0, p1 = p0[:64], p1[:64]
        torch.testing.assert_close(p1.detach(), p0.detach(), atol=1e-5, rtol=1e-5, msg=name)
    torch.testing.assert_close(w1, w0, atol=1e-5, rtol=1e-5)


def test_row_sparse_clamp_touches_only_int8_rows():
    """The optimiser's clamp of sfnnv16 (:meth:`SFNNv16Net.row_sparse_clamp`): one step with a
    huge learning rate moves every touched row far; the touched int8 rows end at ±127/256
    exactly, the touched HalfKA rows beyond it, the untouched rows unmoved (no flush yet). The
    numba kernel and the torch index-op path agree."""
    results = []
    for numba_rows in (True, False):
        nets = _nets(64, False, False, seed=9)
        net = nets[1]
        net.sparse_grad = True
        opt = RowSparseAdamW.for_model(net, ft_clip=128.0, lr=1.0, betas=(0.0, 0.999), weight_decay=0.0)
        opt._step_rows_cpu = numba_rows
        before = net.ft.weight.detach().clone()
        stm = torch.tensor([[3, sf.THREAT_INPUTS + 4, sf.INT8_INPUTS + 5, -1]], dtype=torch.int32)
        nstm = torch.tensor([[-1, 7, sf.INT8_INPUTS + 9, -1]], dtype=torch.int32)
        bucket = torch.tensor([2])
        net(stm, nstm, bucket).sum().backward()
        opt.step()
        w = net.ft.weight.detach()
        for r in (3, sf.THREAT_INPUTS + 4, 7):
            assert bool((w[r].abs() <= sf.INT8_ROW_LIMIT).all()) and bool((w[r].abs() == sf.INT8_ROW_LIMIT).any())
        for r in (sf.INT8_INPUTS + 5, sf.INT8_INPUTS + 9):
            assert float(w[r].abs().max()) > 0.9
        untouched = torch.ones(sf.NUM_INPUTS, dtype=torch.bool)
        untouched[[3, 7, sf.THREAT_INPUTS + 4, sf.INT8_INPUTS + 5, sf.INT8_INPUTS + 9]] = False
        assert torch.equal(w[untouched], before[untouched])
        results.append(w.clone())
    torch.testing.assert_close(results[0], results[1], atol=1e-6, rtol=1e-6)


def test_optimizer_refuses_a_map_of_another_length():
    """A clamp map or row mask shorter than the weight would be read past its end by the
    kernel: refused when the optimiser is made."""
    w = torch.nn.Parameter(torch.zeros(10, 4))
    with pytest.raises(ValueError, match="clamp_offset"):
        RowSparseAdamW([{"params": [w], "row_sparse": True, "clamp": 1.0,
                         "clamp_offset": (torch.zeros(2, 4), torch.zeros(4, dtype=torch.int64))}])
    with pytest.raises(ValueError, match="clamp_rows"):
        RowSparseAdamW([{"params": [w], "row_sparse": True, "clamp": 1.0, "clamp_rows": torch.ones(3, dtype=torch.bool)}])
