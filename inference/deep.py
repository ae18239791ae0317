"""Deep integer nets: L0 → L1 → L2 → out with output buckets (Stockfish-style layer stacks).

Integer formula (all integers; ``>>`` is an arithmetic shift, i.e. floor division by a power of
two, also for negative values; QA = 255, QB = 64 = 2^6, l0_shift = 8 by default,
:class:`~nnue.spec.quant.QuantScheme`):

1. feature transformer, per perspective p: ``acc_p = l0b + Σ l0w[f]`` over the active features
   (int16, audited at export), ``v = clamp(acc, 0, QA)``;
2. L0 activation, u8, stm half first then nstm half (L1 = 2H, or H for pairwise):

   * crelu: ``x0 = v``;
   * screlu: ``x0 = (v·v) >> l0_shift``;
   * pairwise_crelu: ``x0[j] = (v[j]·v[j + H/2]) >> l0_shift`` for j < H/2;

3. output bucket b (the net's output-bucket function); L1, int8 weights and int32 bias:
   ``s1[n] = l1b[b][n] + Σ_j l1w[b][n][j]·x0[j]`` (int32), ``y1 = s1 >> log2(QB)``;
4. hidden activation, u8: crelu ``x1 = clamp(y1, 0, QA)``; screlu
   ``x1 = clamp(y1, 0, QA)² >> l0_shift``;
5. L2, the same with ``l2w`` (B, N2, N1) int8, ``l2b`` (B, N2) int32: ``y2 = s2 >> log2(QB)``,
   ``x2 = act(y2)``;
6. output: ``out = outb[b] + Σ_j outw[b][j]·x2[j]`` (int32);
   ``eval = out·SCALE / (QA·QB)``, computed in 64 bits, truncating toward zero: centipawns,
   side-to-move POV.

Float model it quantises (:class:`nnue.trainer.model.DeepNet`): activations in [0, 1], the
products of step 2 and 4 multiplied by ``QA / 2^l0_shift`` (255/256) so that the float net
computes what the integer net computes at scale QA (as nnue-pytorch multiplies its pairwise
product by 127/128). Quantisation: ``l0w = round(W0·QA)``, ``l0b = round(b0·QA)``;
``l1w = round(W1·QB)``, ``l1b = round(b1·QA·QB) + QB/2`` (the half makes the floor shift
round to nearest), the same for L2; ``outw = round(Wo·QB)``, ``outb = round(bo·QA·QB)``.

Raw layout (:meth:`DeepIntegerNet.raw_bytes`, little-endian, no header)::

    l0w int16[F][H] | l0b int16[H] | l1w int8[B][N1][L1] | l1b int32[B][N1]
    | l2w int8[B][N2][N1] | l2b int32[B][N2] | outw int8[B][N2] | outb int32[B] | zeros to 64 B

Evaluation here is exact: the feature transformer runs as the exact float32 ``embedding_bag``
of :func:`~nnue.inference.exact.accumulators_f32`; the dense layers run as ``torch._int_mm``
(int8 × int8 → int32) on ``x − 128`` (u8 → int8) against the weights split into digits of
|d| ≤ 64 (``w = d0 + 128·d1``), corrected by ``128·Σ_j w[n][j]``: every partial sum of such a
product is below 2^13·K, so int32 holds it for K < 2^17 inputs, and a saturating u8×s8 kernel
(x86 without VNNI) never saturates (:func:`dense_int`; full-range int8 weights do saturate
there: measured under ``ONEDNN_MAX_CPU_ISA=AVX2``). The corrections and biases are added in
int64 and every sum is checked against int32 (:class:`OverflowError` otherwise, never a wrapped
value).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from nnue.pipeline.features import get_feature_set, parse_output_buckets
from nnue.spec import activations as acts
from nnue.spec.quant import QuantScheme

from . import exact
from .exact import accumulators_f32, cached, check_acc_int16, check_int32, sorted_steps, to_centipawns, weight_digits
from .net import NetFile

HIDDEN_ACTIVATIONS = acts.allowed("l1")


def l2_activation(arch: dict) -> str:
    """The activation after L2 (``l2_activation``; nets written before it existed use
    ``hidden_activation`` after both layers)."""
    return arch.get("l2_activation") or arch["hidden_activation"]


def make_deep_arch(feature_set: str, hidden: int, activation: str, output_buckets: str,
                   l1_outputs: int, l2_outputs: int, hidden_activation: str = "crelu",
                   l2_activation: str | None = None) -> dict:
    """The ``arch`` dict of a :class:`DeepIntegerNet` (written into the header).

    hidden: H per perspective; activation: L0 activation (:func:`nnue.spec.activations.allowed`
    "l0"); l1_outputs: N1; l2_outputs: N2; hidden_activation: the activation after L1
    ("l1"); l2_activation: after L2 ("l2": also the gated units; default hidden_activation).
    Raises ValueError/KeyError for unknown names or impossible sizes."""
    acts.check(activation, "l0", "L0 activation")
    acts.check(hidden_activation, "l1", "hidden activation (after L1)")
    l2_act = l2_activation or hidden_activation
    acts.check(l2_act, "l2", "activation after L2")
    acts.check_l0_width(activation, hidden)
    if min(hidden, l1_outputs, l2_outputs) < 1:
        raise ValueError("layer sizes must be positive")
    fs = get_feature_set(feature_set)
    buckets = parse_output_buckets(output_buckets)
    l1_inputs = acts.l1_inputs(activation, hidden)
    if l1_inputs >= 1 << 17:
        raise ValueError("L1 wider than 2^17 inputs would break the int32 exactness bound")
    return {"kind": "deep", "feature_set": fs.name, "feature_hash": fs.hash, "num_inputs": fs.num_inputs,
            "hidden": hidden, "activation": activation, "output_buckets": buckets.name,
            "num_buckets": buckets.count, "l1_inputs": l1_inputs, "l1_outputs": l1_outputs,
            "l2_outputs": l2_outputs, "hidden_activation": hidden_activation, "l2_activation": l2_act}


@dataclass
class DeepIntegerNet(NetFile):
    """An exported deep integer net (module docstring: formula and layout).

    l0w: (F, H) int16; l0b: (H,) int16; l1w: (B, N1, L1) int8 (the first L1/2 inputs are the
    stm half); l1b: (B, N1) int32; l2w: (B, N2, N1) int8; l2b: (B, N2) int32; outw: (B, N2)
    int8; outb: (B,) int32.
    """

    arch: dict
    scheme: QuantScheme
    l0w: torch.Tensor
    l0b: torch.Tensor
    l1w: torch.Tensor
    l1b: torch.Tensor
    l2w: torch.Tensor
    l2b: torch.Tensor
    outw: torch.Tensor
    outb: torch.Tensor
    provenance: dict = field(default_factory=dict)

    kind = "deep"
    ARCH_FIELDS = dict(NetFile.ARCH_FIELDS, l1_outputs=int, l2_outputs=int, hidden_activation=str,
                       l2_activation=str)
    #: optional field -> the field whose value it defaults to
    ARCH_OPTIONAL = {"l2_activation": "hidden_activation"}
    ARCH_ACTIVATIONS = {"activation": "l0", "hidden_activation": "l1", "l2_activation": "l2"}

    def tensors(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k) for k in ("l0w", "l0b", "l1w", "l1b", "l2w", "l2b", "outw", "outb")}

    @staticmethod
    def raw_layout() -> str:
        return ("l0w int16[F][H] | l0b int16[H] | l1w int8[B][N1][L1] | l1b int32[B][N1] | "
                "l2w int8[B][N2][N1] | l2b int32[B][N2] | outw int8[B][N2] | outb int32[B] | "
                "zeros to a multiple of 64 B (gated L2 units: 2·N2 rows in l2w and l2b, gate rows first)")

    @staticmethod
    def tensor_specs(arch: dict) -> dict[str, tuple[torch.dtype, tuple]]:
        """name -> (dtype, shape) of every tensor a deep net of ``arch`` holds, in file order."""
        F, H, B = arch["num_inputs"], arch["hidden"], arch["num_buckets"]
        L1, N1, N2 = arch["l1_inputs"], arch["l1_outputs"], arch["l2_outputs"]
        R2 = N2 * (2 if acts.get(l2_activation(arch)).gated else 1)  # gated: gate rows, then linear rows
        return {"l0w": (torch.int16, (F, H)), "l0b": (torch.int16, (H,)),
                "l1w": (torch.int8, (B, N1, L1)), "l1b": (torch.int32, (B, N1)),
                "l2w": (torch.int8, (B, R2, N1)), "l2b": (torch.int32, (B, R2)),
                "outw": (torch.int8, (B, N2)), "outb": (torch.int32, (B,))}

    def layers(self) -> list[dict]:
        """Per-layer dtypes, scales and shifts (written into export.json)."""
        s, a = self.scheme, self.arch
        shift = s.dense_shift
        a0, a1, a2 = (acts.get(n) for n in (a["activation"], a["hidden_activation"], l2_activation(a)))

        def out(act):
            lo, hi = act.out_range["hidden"]
            return "u8" if act.u8 else f"int16 ({lo}..{hi})"
        return [
            {"layer": "l0", "weight": "int16", "bias": "int16", "scale": s.qa, "sum": "int16",
             "activation": a0.name, "rule": a0.integer["deep_l0"], "output": "u8"},
            {"layer": "l1", "weight": "int8", "bias": "int32", "weight_scale": s.qb, "bias_scale": s.qa * s.qb,
             "sum": "int32", "shift": shift, "activation": a1.name, "rule": a1.integer["hidden"], "output": out(a1)},
            {"layer": "l2", "weight": "int8", "bias": "int32", "weight_scale": s.qb, "bias_scale": s.qa * s.qb,
             "sum": "int32", "shift": shift, "activation": a2.name, "rule": a2.integer["hidden"], "output": out(a2)},
            {"layer": "out", "weight": "int8", "bias": "int32", "weight_scale": s.qb, "bias_scale": s.qa * s.qb,
             "sum": "int32", "eval": f"out * {s.scale} / ({s.qa} * {s.qb}), truncating"},
        ]


def _fresh(t: torch.Tensor) -> torch.Tensor:
    """``t`` as int8 in newly allocated row-major memory. Not ``.contiguous()``: a transposed
    (M, 1) tensor counts as contiguous with strides (1, 1), and ``torch._int_mm`` reads its
    stride as the leading dimension and returns garbage (measured: N1 = 1 deep nets)."""
    return torch.empty(t.shape, dtype=torch.int8).copy_(t)


def dense_plan(w: torch.Tensor, u8: bool = True) -> dict:
    """How :func:`dense_int` multiplies by the int8 weights ``w`` (B, M, K): mode "int8" with
    ``mats``, the weight digits (:func:`nnue.inference.exact.weight_digits`: w = d0 + 128·d1,
    |d| ≤ 64) as (K, B·M) int8 matrices, when ``torch._int_mm`` is exact for these shapes here
    (:func:`nnue.inference.exact.int_mm_is_exact`); else mode "f64" with the (K, B·M) float64
    weights, also when ``u8`` is False (inputs outside 0..255: the non-u8 activations of
    :mod:`nnue.spec.activations`, |x| ≤ 2^14). ``w_sum``: (B, M) int64 row sums."""
    B, M, K = w.shape
    flat = w.reshape(B * M, K).to(torch.int64)
    plan = {"w_sum": flat.sum(1).view(B, M), "shape": (B, M, K)}
    if u8 and 0 < K < 1 << 17 and B * M > 0 and exact.int_mm_is_exact(K, B * M) and exact.int_mm_is_exact(K, M):
        digits = weight_digits(flat)
        plan |= {"mode": "int8", "mats": [_fresh(d.T) for d in digits],
                 "bucket_mats": [[_fresh(d.view(B, M, K)[b].T) for d in digits] for b in range(B)]}
    else:
        plan |= {"mode": "f64", "w64": flat.T.double().contiguous()}
    return plan


def _layer_plan(net: DeepIntegerNet, name: str, u8: bool = True) -> dict:
    """:func:`dense_plan` of the net's layer ``name`` ("l1w", "l2w", "outw"), cached on the net;
    ``u8``: whether the layer's inputs are u8."""
    def build(w):
        return dense_plan(w.unsqueeze(1) if w.dim() == 2 else w, u8)
    return cached(net, ("deep_plan", name, u8), (getattr(net, name),), build)


def dense_int(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, bucket: torch.Tensor, what: str,
              plan: dict | None = None, bucket_range: tuple[int, int] | None = None) -> torch.Tensor:
    """One bucketed dense layer on u8 activations, exact: ``b[bucket] + w[bucket] @ x``.

    x: (N, K) int32 with values in 0..255 (int8 mode; |x| < 2^15 in f64 mode); w: (B, M, K) int8; b: (B, M) int32; bucket: (N,)
    int64. Returns (N, M) int64, each value checked against int32 (OverflowError names
    ``what``). plan: :func:`dense_plan` of ``w`` (made here when not given). bucket_range:
    (lo, hi) when every bucket lies in lo..hi (positions sorted by piece count): only those
    buckets' rows are multiplied, one product per bucket, instead of all B.

    int8 mode: every bucket's rows in one ``torch._int_mm`` per weight digit d on ``x − 128``
    (int8): ``Σ_k x·w = Σ_j 128^j·Σ_k (x−128)·d_j + 128·Σ_k w``. Each int32 partial sum is below
    K·128·64 = K·2^13 < 2^31; the digits' |d| ≤ 64 also keep the adjacent-pair sums of a
    saturating u8×s8 kernel (x86 without VNNI) at 2·255·64 = 32640 < 2^15, where full-range
    int8 weights would saturate. f64 mode: |x·w| ≤ 255·128 and K < 2^17 terms: every sum is an
    exact integer below 2^53 (|x| < 2^15: |x·w| < 2^22, also exact).
    """
    B, M, K = w.shape
    plan = plan if plan is not None else dense_plan(w)
    n = x.shape[0]
    if n == 0:
        return torch.zeros((0, M), dtype=torch.int64)
    if plan["mode"] == "int8" and bucket_range is not None and bucket_range[1] - bucket_range[0] < 2:
        xs = (x - 128).to(torch.int8)
        sel = None
        for bk in range(bucket_range[0], bucket_range[1] + 1):
            part = None
            for j, mat in enumerate(plan["bucket_mats"][bk]):
                p = torch._int_mm(xs, mat).to(torch.int64)
                part = p if part is None else part.add_(p, alpha=128 ** j)
            part = part.add_(128 * plan["w_sum"][bk])
            sel = part if sel is None else torch.where((bucket == bk).view(n, 1), part, sel)
        s = sel + b.to(torch.int64)[bucket]
        check_int32(s, what)
        return s
    if plan["mode"] == "int8":
        xs = (x - 128).to(torch.int8)
        allb = None
        for j, mat in enumerate(plan["mats"]):
            part = torch._int_mm(xs, mat).to(torch.int64)
            allb = part if allb is None else allb.add_(part, alpha=128 ** j)
        allb = allb.add_((128 * plan["w_sum"]).view(1, B * M))
    else:
        allb = (x.double() @ plan["w64"]).to(torch.int64)
    sel = allb.view(n, B, M).gather(1, bucket.view(n, 1, 1).expand(n, 1, M)).squeeze(1)
    s = sel + b.to(torch.int64)[bucket]
    check_int32(s, what)
    return s


def l0_activations(net: DeepIntegerNet, acc_stm: torch.Tensor, acc_nstm: torch.Tensor) -> torch.Tensor:
    """x0, the u8 input of L1: (N, H) int32 accumulators of both perspectives -> (N, L1) int32
    in 0..255 (stm half first). Step 2 of the module docstring. Raises OverflowError when the
    scheme's qa and l0_shift let a value leave u8."""
    s, act = net.scheme, net.arch["activation"]
    x0 = torch.cat([acts.int_l0_deep(act, acc.clamp(0, s.qa), s.l0_shift) for acc in (acc_stm, acc_nstm)], 1)
    if x0.numel() and x0.max() > 255:
        raise OverflowError(f"L0 activation leaves u8 (up to {int(x0.max())}): qa {s.qa} with "
                            f"l0_shift {s.l0_shift} does not fit")
    return x0


def forward_from_accumulators(net: DeepIntegerNet, acc_stm: torch.Tensor, acc_nstm: torch.Tensor,
                              bucket: torch.Tensor, return_parts: bool = False,
                              bucket_range: tuple[int, int] | None = None):
    """Steps 2–6 of the module docstring: (N, H) int32 accumulators of each perspective and (N,)
    int64 buckets -> (N,) int64 centipawns, stm POV. With return_parts, also a dict of the
    integer sums ``s1`` (N, N1), ``s2`` (N, N2), ``out`` (N,) for the export's audit.
    Raises OverflowError when a sum leaves int32. bucket_range: see :func:`dense_int`."""
    x0 = l0_activations(net, acc_stm, acc_nstm)
    s1 = dense_int(x0, net.l1w, net.l1b, bucket, "L1 sum", _layer_plan(net, "l1w"), bucket_range)
    return forward_after_l1(net, s1, bucket, return_parts, bucket_range)


def forward_after_l1(net: DeepIntegerNet, s1: torch.Tensor, bucket: torch.Tensor, return_parts: bool = False,
                     bucket_range: tuple[int, int] | None = None):
    """Steps 4–6 of the module docstring from the L1 sums ``s1`` (N, N1) int64 (bias included,
    checked against int32): -> (N,) int64 centipawns (and the parts dict, as
    :func:`forward_from_accumulators`). The block-sparse L1 path
    (:mod:`nnue.inference.sparse_l1`) computes ``s1`` its own way and finishes here."""
    s = net.scheme
    shift = s.dense_shift
    a1, a2 = acts.get(net.arch["hidden_activation"]), acts.get(l2_activation(net.arch))
    x1 = acts.int_hidden(a1.name, s1 >> shift, s.qa, s.l0_shift).to(torch.int32)
    s2 = dense_int(x1, net.l2w, net.l2b, bucket, "L2 sum", _layer_plan(net, "l2w", a1.u8), bucket_range)
    x2 = acts.int_hidden(a2.name, s2 >> shift, s.qa, s.l0_shift).to(torch.int32)
    out = dense_int(x2, net.outw.unsqueeze(1), net.outb.unsqueeze(1), bucket, "output sum",
                    _layer_plan(net, "outw", a2.u8), bucket_range).squeeze(1)
    ev = to_centipawns(out, s)
    if return_parts:
        return ev, {"s1": s1, "s2": s2, "out": out}
    return ev


def forward_int(net: DeepIntegerNet, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor,
                return_parts: bool = False):
    """Exact integer eval from feature indices.

    stm, nstm: (N, A) int32 −1-padded; bucket: (N,) int64. Returns (N,) int64 centipawns, stm
    POV (with return_parts, also the dict of :func:`forward_from_accumulators` plus ``acc``
    (N, 2, H) int32). Raises OverflowError when an accumulator leaves int16 or a sum int32.
    """
    accs = []
    for idx in (stm, nstm):
        acc = accumulators_f32(net, idx)  # exact integers in float32
        check_acc_int16(acc)
        accs.append(acc.to(torch.int32))
    res = forward_from_accumulators(net, accs[0], accs[1], bucket, return_parts)
    if return_parts:
        ev, parts = res
        return ev, parts | {"acc": torch.stack(accs, 1)}
    return res


def evaluate_small(net: DeepIntegerNet, boards: torch.Tensor) -> list[int] | None:
    """A few positions without the batch machinery (:func:`nnue.inference.api.evaluate_net`
    sends calls of at most ``SMALL_BATCH`` CPU boards here first): (N, 32) uint8 -> N Python
    ints, centipawns, stm POV, the values of :func:`evaluate`, from
    :func:`nnue.inference.compiled.output_sums_deep`; None when the compiled kernel cannot run."""
    from .perspective import _compiled

    comp = _compiled(None, boards.device.type == "cpu")
    res = None if comp is None else comp.output_sums_deep(net, boards, l2_activation(net.arch))
    return None if res is None else [to_centipawns(o, net.scheme) for o in res[0].tolist()]


def evaluate(net: DeepIntegerNet, boards: torch.Tensor, chunk: int = 1024, backend: str | None = None) -> torch.Tensor:
    """Integer evals of packed boards: (N, 32) uint8 -> (N,) int64 centipawns, stm POV.

    On CPU by default (``backend`` as :func:`nnue.inference.perspective.evaluate`) every step of
    the module docstring runs in one compiled pass per board
    (:func:`nnue.inference.compiled.output_sums_deep`: int16 register sums of the feature
    transformer, the u8 activations, each layer of the position's own bucket in int64 with the
    int32 checks) where it applies (crelu/screlu after L1 and L2), then the centipawn scaling.
    Otherwise (``backend="torch"``) the feature transformer runs as in
    :func:`nnue.inference.perspective.evaluate` (positions sorted by piece count, steps of 512,
    bags from the lookup keys; :func:`nnue.inference.exact.sorted_steps`), then steps 2–6 on
    each step's accumulators; the evals go back to input order. Same integers either way."""
    from nnue.pipeline.features.board_tensor import check_boards

    from .perspective import _compiled, _not_applicable

    check_boards(boards)
    comp = _compiled(backend, boards.device.type == "cpu")
    if comp is not None and boards.shape[0]:
        res = comp.output_sums_deep(net, boards, l2_activation(net.arch))
        if res is not None:
            return to_centipawns(res[0], net.scheme)
        _not_applicable(backend)
    n = boards.shape[0]
    if n == 0:
        sorted_steps(net, boards, chunk)  # validates shape and dtype
        return torch.zeros(0, dtype=torch.int64)
    order, bucket, _, steps = sorted_steps(net, boards, chunk)
    ev = torch.empty(n, dtype=torch.int64)
    for s, e, acc, b_lo, b_hi in steps:
        acc = acc.view(e - s, 2, -1).to(torch.int32)
        ev[s:e] = forward_from_accumulators(net, acc[:, 0], acc[:, 1], bucket[s:e], bucket_range=(b_lo, b_hi))
    return torch.empty_like(ev).index_copy_(0, order, ev)
