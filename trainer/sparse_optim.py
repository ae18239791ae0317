"""Row-sparse AdamW: the feature transformer's step touches only the rows the batch used.

:class:`RowSparseAdamW` is AdamW (Loshchilov & Hutter 2019, "Decoupled Weight Decay
Regularization"; the update of ``torch.optim.AdamW``) for every parameter. A parameter in a group
with ``row_sparse=True`` (the feature transformer's (F, H) weight) is updated only in the rows that
have a gradient this step: the rows of a sparse COO gradient
(:func:`nnue.kernels.sparse_ft_numba.sparse_ft_pair` with ``sparse_grad=True``), or every row of a
dense one.

**Untouched rows, exactly.** Under dense AdamW a row whose gradient is zero at step t still moves:

1. decoupled weight decay: ``p ← p·(1 − lr_t·wd)``;
2. moment decay: ``m ← β1·m``, ``v ← β2·v``;
3. momentum drift: ``p ← p − lr_t/(1 − β1^t) · m / (√(v/(1 − β2^t)) + ε)``.

Here 1 and 2 are applied lazily and exactly, when the row is next touched or at :meth:`flush`:
``p`` is multiplied by Π(1 − lr_i·wd) over the skipped steps (kept as a running sum of
log1p(−lr_i·wd) per step, so a learning-rate schedule is honoured), ``m`` by β1^k and ``v`` by β2^k
(k = the steps skipped). 3 is left out: an untouched row does not move on its momentum. That is
the only difference from dense AdamW (torch's ``SparseAdam`` also leaves out 1 and 2). So: with
β1 = 0 there is no drift and this is dense AdamW; a row touched at every step gets exactly dense
AdamW's update whatever β1; a row never touched ends (after :meth:`flush`) as under dense AdamW
(decay only: its moments are zero). ``tests/trainer/test_sparse_optim.py`` checks all three
against ``torch.optim.AdamW``, and the general case against a slow loop of the rule above.

:meth:`flush` brings every row up to the current step (the pending decays); the trainer calls it
before validation, before saving weights and at the end, so that what is evaluated and saved is
what the rule says. A flush changes nothing mathematically (the decays are multiplicative), only
the rounding.

**Clamp.** A row-sparse group may carry ``clamp`` (c: a number, or an (H,) tensor of per-column
limits, ``inf`` for a column not clamped, e.g. a Stockfish-style net's PSQT columns) and
``clamp_offset`` ((offset (V, H), map (F,))): after its update, each touched row r is clamped so that ``p[r] + clamp(offset[map[r]],
±c)`` lies within ±c: the folded feature-transformer weight (``ft.weight + ft.factor[factor_map]``)
stays quantisable (:meth:`nnue.trainer.model.FTNet.clip_ft`, which clamps the factor
to ±c after the step) without a dense pass. ``clamp_rows`` ((F,) bool, or None: every row) limits
the clamp to some rows: a Stockfish 19 net keeps only its int8 rows (threats, pawn pairs) within
±127/256 (:meth:`nnue.trainer.kinds.sfnnv16.SFNNv16Net.row_sparse_clamp`). Rows not touched are clamped at :meth:`flush` by the
trainer's dense clip.

CPU tensors use a numba kernel, parallel over the touched rows; other devices the same rule in
torch index ops. State per row-sparse parameter: ``exp_avg``, ``exp_avg_sq`` (F, H) as AdamW's,
``row_step`` (F,) int64 (the step at which the row was last brought up to date), ``row_log_decay``
(F,) float64 (the running log-decay then), ``log_decay`` and ``step``. Plain tensors and numbers:
checkpoints load with ``weights_only=True``.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from numba import njit, prange


@njit(parallel=True, cache=True, nogil=True)
def _adamw_rows(p, m, v, row_step, row_logd, rows, g, step, lr, b1, b2, eps, wd, logd_prev, logd_now,
                has_clamp, clamp, off, omap, rmask):
    """AdamW on rows ``rows`` of p/m/v (F, H) f32 with gradients g (U, H), after the catch-up of
    the skipped steps' decays (module docstring). clamp (H,) f32: per-column limits (inf: none),
    used when has_clamp, on the rows r with rmask[r] (rmask (F,) bool; empty: every row); off
    (V, H) with omap (F,): clamp offsets (V = 0: offset 0)."""
    H = p.shape[1]
    # every constant rounded to fp32 once, as torch's CPU kernels do with a Python scalar
    bc1 = 1.0 - b1 ** step
    neg_step = np.float32(-lr / bc1)
    bc2_sqrt = np.float32(math.sqrt(1.0 - b2 ** step))
    w1 = np.float32(1.0 - b1)
    w1c = np.float32(1.0) - w1
    b2f, w2 = np.float32(b2), np.float32(1.0 - b2)
    decay_now = np.float32(1.0 - lr * wd)
    epsf = np.float32(eps)
    has_off = off.shape[0] > 0
    has_mask = rmask.shape[0] > 0
    for u in prange(rows.shape[0]):
        r = rows[u]
        k = step - row_step[r] - 1
        pr, mr, vr, gr = p[r], m[r], v[r], g[u]
        if k > 0:
            dec = np.float32(math.exp(logd_prev - row_logd[r]))
            mk = np.float32(b1 ** k)
            vk = np.float32(b2 ** k)
            for j in range(H):
                pr[j] *= dec
                mr[j] *= mk
                vr[j] *= vk
        for j in range(H):
            gj = gr[j]
            pj = pr[j] * decay_now
            # torch's lerp(m, g, w): m + w·(g − m) for w < 0.5, else g − (g − m)·(1 − w)
            mj = mr[j] + w1 * (gj - mr[j]) if w1 < 0.5 else gj - (gj - mr[j]) * w1c
            vj = vr[j] * b2f + w2 * gj * gj
            pj = pj + neg_step * mj / (np.sqrt(vj) / bc2_sqrt + epsf)
            mr[j] = mj
            vr[j] = vj
            pr[j] = pj
        if has_clamp and (not has_mask or rmask[r]):
            for j in range(H):
                c = clamp[j]
                o = np.float32(0.0)
                if has_off:
                    o = min(max(off[omap[r], j], -c), c)
                pr[j] = min(max(pr[j], -c - o), c - o)
        row_step[r] = step
        row_logd[r] = logd_now


@njit(parallel=True, cache=True, nogil=True)
def _flush_rows(p, m, v, row_step, row_logd, step, b1, b2, logd_now, weights_only):
    """Bring every row to ``step``: the pending decays of p, m, v (module docstring). weights_only:
    p alone, the optimiser's state (m, v, row_step, row_logd) left as it is (p may then be a copy
    of the parameter)."""
    H = p.shape[1]
    for r in prange(p.shape[0]):
        k = step - row_step[r]
        if k <= 0:
            continue
        dec = np.float32(math.exp(logd_now - row_logd[r]))
        pr = p[r]
        if weights_only:
            for j in range(H):
                pr[j] *= dec
            continue
        mk = np.float32(b1 ** k)
        vk = np.float32(b2 ** k)
        mr, vr = m[r], v[r]
        for j in range(H):
            pr[j] *= dec
            mr[j] *= mk
            vr[j] *= vk
        row_step[r] = step
        row_logd[r] = logd_now


def _float_row(x: torch.Tensor) -> torch.Tensor:
    return x.view(-1, 1)



def _coalesced(grad: torch.Tensor) -> torch.Tensor:
    """A sparse COO gradient of whole rows, coalesced. torch's autograd drops the coalesced flag
    a kernel set (the weight's ``.grad`` of :mod:`nnue.kernels.sparse_ft_numba` arrives with
    ``is_coalesced()`` False) and ``coalesce()`` then sorts and copies every value row (~5 ms a
    step on sfnnv5's (13,000, 1,032) rows, torch.profiler at load 2). Row indices strictly ascending are already what
    coalescing makes (sorted, no duplicates): that check reads only the (U,) indices, and
    the tensor is marked so; anything else is coalesced."""
    if grad.is_coalesced():
        return grad
    idx = grad._indices()
    if idx.shape[0] == 1 and (idx.shape[1] < 2 or bool((idx[0, 1:] > idx[0, :-1]).all())):
        return grad._coalesced_(True)
    return grad.coalesce()

class RowSparseAdamW(torch.optim.Optimizer):
    """AdamW whose ``row_sparse`` groups update only the rows with a gradient (module docstring).

    params: tensors or param groups (dicts) as for any torch optimiser; group keys besides
    AdamW's ``lr``, ``betas``, ``eps``, ``weight_decay``: ``row_sparse`` (bool, 2-D parameters
    only), ``clamp`` (a number, an (H,) tensor of per-column limits, or None), ``clamp_offset``
    ((offset (V, H), map (F,) int64) or None) and ``clamp_rows`` ((F,) bool: the rows clamped; None:
    every row) for row-sparse groups. Raises ValueError on a bad value (negative lr, β outside
    [0, 1), a row-sparse parameter that is not 2-D, a clamp map or row mask of another length).
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, row_sparse: bool = False, clamp: float | None = None,
                 clamp_offset=None, clamp_rows=None):
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"RowSparseAdamW: lr {lr}, eps {eps} and weight_decay {weight_decay} must be >= 0")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"RowSparseAdamW: betas {tuple(betas)} must lie in [0, 1)")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, row_sparse=row_sparse,
                        clamp=clamp, clamp_offset=clamp_offset, clamp_rows=clamp_rows)
        super().__init__(params, defaults)
        for g in self.param_groups:
            if g["row_sparse"] and any(p.dim() != 2 for p in g["params"]):
                raise ValueError("RowSparseAdamW: a row_sparse group holds (rows, columns) parameters only")
            for p in g["params"] if g["row_sparse"] else ():
                # the numba kernel does not bounds-check: a map or mask of another length would
                # read past its end
                off, rows = g.get("clamp_offset"), g.get("clamp_rows")
                if off is not None and tuple(off[1].shape) != (p.shape[0],):
                    raise ValueError(f"RowSparseAdamW: clamp_offset's map {tuple(off[1].shape)} must be "
                                     f"({p.shape[0]},), one virtual row per row of the parameter")
                if rows is not None and tuple(rows.shape) != (p.shape[0],):
                    raise ValueError(f"RowSparseAdamW: clamp_rows {tuple(rows.shape)} must be ({p.shape[0]},)")

    #: CPU float32 rows go through the numba kernels (False: the torch index-op path, as on CUDA;
    #: the tests compare the two)
    _step_rows_cpu = True

    # clamp_offset and clamp_rows hold tensors of the model: not optimiser state, never saved
    def state_dict(self):
        sd = super().state_dict()
        for g in sd["param_groups"]:
            g["clamp_offset"] = None
            g["clamp_rows"] = None
        return sd

    #: per-row state whose dtype is not the parameter's: torch's load_state_dict casts every
    #: floating parameter's state tensor but ``step`` to the parameter's dtype, which made
    #: row_step float32 and rounded row_log_decay to float32 (a resumed run's catch-up decays
    #: then differed from an uninterrupted run's)
    _EXACT_STATE = ("row_step", "row_log_decay")

    def load_state_dict(self, state_dict):
        kept = [(g.get("clamp_offset"), g.get("clamp_rows")) for g in self.param_groups]
        super().load_state_dict(state_dict)
        for g, (o, r) in zip(self.param_groups, kept):
            g["clamp_offset"], g["clamp_rows"] = o, r
        # the saved ids map to this optimiser's parameters in group order, as in torch's own load
        params = {i: p for saved, g in zip(state_dict["param_groups"], self.param_groups)
                  for i, p in zip(saved["params"], g["params"])}
        for i, st in state_dict["state"].items():
            for key in self._EXACT_STATE:
                if key in st and i in params:
                    want = torch.int64 if key == "row_step" else torch.float64
                    self.state[params[i]][key] = st[key].to(device=params[i].device, dtype=want, copy=True)

    @classmethod
    def for_model(cls, model, ft_clip: float | None = None, **adamw) -> "RowSparseAdamW":
        """The optimiser of a :class:`~nnue.trainer.model.FTNet` (any kind built on it): its
        ``ft.weight`` row-sparse, clamped so that the folded weight stays within ±ft_clip (a
        number, an (H,) tensor of per-column limits with inf for unclamped columns, or None: no
        clamp; a model may instead define ``ft_clip_limits(ft_clip)`` returning that, or
        ``row_sparse_clamp(ft_clip)`` returning the group's ``clamp``, ``clamp_offset`` and
        ``clamp_rows`` as a dict: its own clamp of the rows the step updates, the one its
        ``clip_weights`` applies densely), every other parameter dense; ``adamw``: lr, betas,
        eps, weight_decay."""
        ft_w = model.ft.weight
        rest = [p for p in model.parameters() if p is not ft_w]
        if hasattr(model, "row_sparse_clamp"):
            clamp = {"clamp": None, "clamp_offset": None, "clamp_rows": None} | model.row_sparse_clamp(ft_clip)
        else:
            if ft_clip is not None and hasattr(model, "ft_clip_limits"):
                ft_clip = model.ft_clip_limits(ft_clip)
            offset = None
            if getattr(model, "factor_map", None) is not None:
                offset = (model.ft.factor, model.factor_map)
            clamp = {"clamp": ft_clip, "clamp_offset": offset, "clamp_rows": None}
        groups = [{"params": [ft_w], "row_sparse": True, **clamp}, {"params": rest}]
        return cls(groups, **adamw)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for g in self.param_groups:
            for p in g["params"]:
                if p.grad is None:
                    continue
                if g["row_sparse"]:
                    self._step_rows(p, g)
                else:
                    self._step_dense(p, g)
        return loss

    def _state(self, p, row_sparse: bool) -> dict:
        st = self.state[p]
        if not st:
            st["step"] = 0
            st["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            st["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            if row_sparse:
                st["row_step"] = torch.zeros(p.shape[0], dtype=torch.int64, device=p.device)
                st["row_log_decay"] = torch.zeros(p.shape[0], dtype=torch.float64, device=p.device)
                st["log_decay"] = 0.0
        return st

    def _step_dense(self, p, g) -> None:
        """torch.optim.AdamW's single-tensor update (torch/optim/adam.py, decoupled weight decay)."""
        if p.grad.is_sparse:
            raise ValueError("RowSparseAdamW: a sparse gradient in a dense group; put the parameter in a "
                             "row_sparse group")
        st = self._state(p, False)
        st["step"] += 1
        t = st["step"]
        lr, (b1, b2), eps, wd = g["lr"], g["betas"], g["eps"], g["weight_decay"]
        grad, m, v = p.grad, st["exp_avg"], st["exp_avg_sq"]
        p.mul_(1 - lr * wd)
        m.lerp_(grad, 1 - b1)
        v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        denom = (v.sqrt() / math.sqrt(bc2)).add_(eps)
        p.addcdiv_(m, denom, value=-lr / bc1)

    def _numba_ok(self, p) -> bool:
        return self._step_rows_cpu and p.device.type == "cpu" and p.dtype == torch.float32 and p.is_contiguous()

    def _step_rows(self, p, g) -> None:
        st = self._state(p, True)
        grad = p.grad
        if grad.is_sparse:
            grad = _coalesced(grad)
            rows, values = grad._indices()[0], grad._values()
        else:
            rows, values = torch.arange(p.shape[0], device=p.device), grad
        st["step"] += 1
        t = st["step"]
        lr, (b1, b2), eps, wd = g["lr"], g["betas"], g["eps"], g["weight_decay"]
        logd_prev = st["log_decay"]
        logd_now = logd_prev + (math.log1p(-lr * wd) if lr * wd < 1 else -math.inf)
        st["log_decay"] = logd_now
        clamp = g.get("clamp")
        offset = g.get("clamp_offset")
        rmask = g.get("clamp_rows")
        if self._numba_ok(p):
            H = p.shape[1]
            off, omap = (offset[0].detach().numpy(), offset[1].numpy()) if offset is not None else \
                (np.empty((0, H), np.float32), np.empty(0, np.int64))
            lim = _column_limits(clamp, H, p.device).numpy()
            mask = rmask.to(torch.bool).contiguous().numpy() if rmask is not None else np.empty(0, np.bool_)
            if rows.numel():
                _adamw_rows(p.numpy(), st["exp_avg"].numpy(), st["exp_avg_sq"].numpy(), st["row_step"].numpy(),
                            st["row_log_decay"].numpy(), rows.numpy(), values.float().contiguous().numpy(),
                            t, float(lr), float(b1), float(b2), float(eps), float(wd), logd_prev, logd_now,
                            clamp is not None, lim, off, omap.astype(np.int64, copy=False), mask)
            return
        _adamw_rows_torch(p, st, rows, values, t, lr, b1, b2, eps, wd, logd_prev, logd_now, clamp, offset, rmask)

    @torch.no_grad()
    def flush(self, weights_only: bool = False) -> None:
        """Apply every row's pending decays (module docstring), so that the weights are those of
        the current step. Cheap to call twice: rows already up to date are skipped.

        weights_only: only the parameters take the decays; the moments and each row's step stay
        as they were, so the optimiser's state no longer matches the parameters. That is for a
        caller that reads the weights of the current step and then puts the parameters back
        (:meth:`nnue.trainer.lit.LitNNUE.weights_of_step`): a flush rounds differently from the
        catch-up it replaces, so a run that flushed where another did not would drift from it
        by rounding, and a resumed run would not be bit-identical to one never interrupted."""
        for g in self.param_groups:
            if not g["row_sparse"]:
                continue
            b1, b2 = g["betas"]
            for p in g["params"]:
                st = self.state.get(p)
                if not st:
                    continue
                t, logd = st["step"], st["log_decay"]
                if self._numba_ok(p):
                    _flush_rows(p.numpy(), st["exp_avg"].numpy(), st["exp_avg_sq"].numpy(), st["row_step"].numpy(),
                                st["row_log_decay"].numpy(), t, float(b1), float(b2), logd, weights_only)
                else:
                    rows = torch.nonzero(st["row_step"] < t).view(-1)
                    _catch_up_torch(p, st, rows, t, b1, b2, logd, weights_only)

    def pending(self) -> bool:
        """Whether some row of a row-sparse parameter has decays not yet applied (a flush would
        change it)."""
        return any(st and bool((st["row_step"] < st["step"]).any())
                   for g in self.param_groups if g["row_sparse"] for st in map(self.state.get, g["params"]))


def _column_limits(clamp, H: int, device) -> torch.Tensor:
    """(H,) float32 per-column clamp limits from a number or an (H,) tensor (inf: not clamped)."""
    if clamp is None:
        return torch.full((H,), math.inf, device=device)
    if isinstance(clamp, torch.Tensor):
        if clamp.shape != (H,):
            raise ValueError(f"RowSparseAdamW: clamp limits {tuple(clamp.shape)} must be ({H},)")
        return clamp.detach().to(device=device, dtype=torch.float32).contiguous()
    return torch.full((H,), float(clamp), device=device)


def _catch_up_torch(p, st, rows, t, b1, b2, logd_target, weights_only: bool = False) -> None:
    """Rows ``rows`` brought to step t (decays of steps row_step+1 .. t), torch ops; weights_only:
    p alone (:meth:`RowSparseAdamW.flush`)."""
    k = (t - st["row_step"][rows]).to(torch.float64)
    dec = torch.exp(logd_target - st["row_log_decay"][rows]).to(p.dtype)
    p.index_copy_(0, rows, p.index_select(0, rows) * _float_row(dec))
    if weights_only:
        return
    for key, beta in (("exp_avg", b1), ("exp_avg_sq", b2)):
        s = st[key]
        s.index_copy_(0, rows, s.index_select(0, rows) * _float_row(torch.pow(beta, k).to(s.dtype)))
    st["row_step"][rows] = t
    st["row_log_decay"][rows] = logd_target


def _adamw_rows_torch(p, st, rows, values, t, lr, b1, b2, eps, wd, logd_prev, logd_now, clamp, offset,
                      rmask=None) -> None:
    """The same rule as :func:`_adamw_rows` in torch index ops (CUDA and other devices)."""
    _catch_up_torch(p, st, rows, t - 1, b1, b2, logd_prev)
    m, v = st["exp_avg"], st["exp_avg_sq"]
    pr, mr, vr = p.index_select(0, rows), m.index_select(0, rows), v.index_select(0, rows)
    grad = values.to(p.dtype)
    pr.mul_(1 - lr * wd)
    mr.lerp_(grad, 1 - b1)
    vr.mul_(b2).addcmul_(grad, grad, value=1 - b2)
    bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
    pr.addcdiv_(mr, (vr.sqrt() / math.sqrt(bc2)).add_(eps), value=-lr / bc1)
    if clamp is not None:
        c = _column_limits(clamp, p.shape[1], p.device)
        o = torch.maximum(torch.minimum(offset[0][offset[1][rows]], c), -c) if offset is not None else 0.0
        clamped = torch.clamp(pr, -c - o, c - o)
        pr = clamped if rmask is None else torch.where(rmask.to(p.device)[rows].view(-1, 1), clamped, pr)
    p.index_copy_(0, rows, pr)
    m.index_copy_(0, rows, mr)
    v.index_copy_(0, rows, vr)
    st["row_step"][rows] = t
    st["row_log_decay"][rows] = logd_now


def adamw_settings(func, kwargs: dict) -> dict:
    """RowSparseAdamW's settings from an optimiser config meant for ``func`` (the Hydra
    ``_target_``): torch.optim.AdamW (or this class, or torch.optim.Adam without weight decay,
    which is then the same update). Keeps lr, betas, eps, weight_decay; ignores torch's
    implementation switches (foreach, fused, capturable, differentiable). Raises ValueError for
    another optimiser or a setting it cannot honour (amsgrad, maximize)."""
    kw = dict(kwargs)
    name = f"{getattr(func, '__module__', '')}.{getattr(func, '__qualname__', func)}"
    if func not in (torch.optim.AdamW, RowSparseAdamW) and not (func is torch.optim.Adam
                                                                 and not kw.get("weight_decay")):
        raise ValueError(f"optimizer.sparse_ft=true needs optimizer=adamw (torch.optim.AdamW), not {name}")
    for k in ("foreach", "fused", "capturable", "differentiable"):
        kw.pop(k, None)
    for k in ("amsgrad", "maximize", "decoupled_weight_decay"):
        if kw.pop(k, False) and k != "decoupled_weight_decay":
            raise ValueError(f"optimizer.sparse_ft=true: optimizer.{k}=true is not supported")
    unknown = set(kw) - {"lr", "betas", "eps", "weight_decay"}
    if unknown:
        raise ValueError(f"optimizer.sparse_ft=true: unsupported optimizer settings {sorted(unknown)}")
    if "betas" in kw:
        kw["betas"] = tuple(kw["betas"])
    return kw
