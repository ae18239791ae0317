"""The deep kind's integer net (:class:`DeepIntegerNet`: L0 → L1 → L2 → out with output buckets,
Stockfish-style layer stacks) and its exact integer evaluation.

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

Float model it quantises (:class:`nnue.trainer.kinds.deep.DeepNet`): activations in [0, 1], the
products of step 2 and 4 multiplied by ``QA / 2^l0_shift`` (255/256) so that the float net
computes what the integer net computes at scale QA (as nnue-pytorch multiplies its pairwise
product by 127/128). Quantisation: ``l0w = round(W0·QA)``, ``l0b = round(b0·QA)``;
``l1w = round(W1·QB)``, ``l1b = round(b1·QA·QB) + QB/2`` (the half makes the floor shift
round to nearest), the same for L2; ``outw = round(Wo·QB)``, ``outb = round(bo·QA·QB)``.

Raw layout (:meth:`DeepIntegerNet.raw_bytes`, little-endian, no header)::

    l0w int16[F][H] | l0b int16[H] | l1w int8[B][N1][L1] | l1b int32[B][N1]
    | l2w int8[B][N2][N1] | l2b int32[B][N2] | outw int8[B][N2] | outb int32[B] | zeros to 64 B

Evaluation here is exact: the feature transformer runs as the exact float32 ``embedding_bag``
of :func:`~nnue.inference.exact.accumulators_f32`; the dense layers are
:func:`nnue.inference.dense.dense_int` (int8 ``torch._int_mm`` on weight digits where proven
exact, else float64; every sum checked against int32: :class:`OverflowError` otherwise, never a
wrapped value). On CPU, :func:`evaluate` runs every step in one compiled pass per board where it
applies (:mod:`nnue.inference.kinds.deep.compiled`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from nnue.pipeline.features import get_feature_set, parse_output_buckets
from nnue.spec import activations as acts
from nnue.spec.quant import QuantScheme

from ... import backends, dense, sparse_sums
from ...dense import accumulator_eval, dense_int, l0_activations, layer_plan
from ...exact import to_centipawns
from ...net import NetFile

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


def forward_from_accumulators(net: DeepIntegerNet, acc_stm: torch.Tensor, acc_nstm: torch.Tensor,
                              bucket: torch.Tensor, return_parts: bool = False,
                              bucket_range: tuple[int, int] | None = None):
    """Steps 2–6 of the module docstring: (N, H) int32 accumulators of each perspective and (N,)
    int64 buckets -> (N,) int64 centipawns, stm POV. With return_parts, also a dict of the
    integer sums ``s1`` (N, N1), ``s2`` (N, N2), ``out`` (N,) for the export's audit.
    Raises OverflowError when a sum leaves int32. bucket_range: see :func:`nnue.inference.dense.dense_int`."""
    x0 = l0_activations(net, acc_stm, acc_nstm)
    s1 = dense_int(x0, net.l1w, net.l1b, bucket, "L1 sum", layer_plan(net, "l1w"), bucket_range)
    return forward_after_l1(net, s1, bucket, return_parts, bucket_range)


def forward_after_l1(net: DeepIntegerNet, s1: torch.Tensor, bucket: torch.Tensor, return_parts: bool = False,
                     bucket_range: tuple[int, int] | None = None):
    """Steps 4–6 of the module docstring from the L1 sums ``s1`` (N, N1) int64 (bias included,
    checked against int32): -> (N,) int64 centipawns (and the parts dict, as
    :func:`forward_from_accumulators`). The block-sparse L1 path
    (:func:`sparse_forward`) computes ``s1`` its own way and finishes here."""
    s = net.scheme
    shift = s.dense_shift
    a1, a2 = acts.get(net.arch["hidden_activation"]), acts.get(l2_activation(net.arch))
    x1 = acts.int_hidden(a1.name, s1 >> shift, s.qa, s.l0_shift).to(torch.int32)
    s2 = dense_int(x1, net.l2w, net.l2b, bucket, "L2 sum", layer_plan(net, "l2w", a1.u8), bucket_range)
    x2 = acts.int_hidden(a2.name, s2 >> shift, s.qa, s.l0_shift).to(torch.int32)
    out = dense_int(x2, net.outw.unsqueeze(1), net.outb.unsqueeze(1), bucket, "output sum",
                    layer_plan(net, "outw", a2.u8), bucket_range).squeeze(1)
    ev = to_centipawns(out, s)
    if return_parts:
        return ev, {"s1": s1, "s2": s2, "out": out}
    return ev


def forward_int(net: DeepIntegerNet, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor,
                return_parts: bool = False):
    """Exact integer eval from feature indices.

    stm, nstm: (N, A) int32 −1-padded; bucket: (N,) int64. Returns (N,) int64 centipawns, stm
    POV (with return_parts, also the dict of :func:`forward_from_accumulators` plus ``acc``
    (N, 2, H) int32; :func:`nnue.inference.dense.forward_int`). Raises OverflowError when an
    accumulator leaves int16 or a sum int32.
    """
    return dense.forward_int(net, stm, nstm, bucket, return_parts, forward_from_accumulators)


def _load_kernels():
    from . import compiled  # numba: imported on first use only

    return compiled


def _kernels(backend: str | None, cpu: bool):
    """The compiled kernel (:mod:`nnue.inference.kinds.deep.compiled`) when ``backend`` asks for
    it and it can run here, else None (:func:`nnue.inference.backends.kernels`)."""
    return backends.kernels(backend, cpu, _load_kernels)


def evaluate_small(net: DeepIntegerNet, boards: torch.Tensor) -> list[int] | None:
    """A few positions without the batch machinery (:func:`nnue.inference.api.evaluate_net`
    sends calls of at most ``SMALL_BATCH`` CPU boards here first): (N, 32) uint8 -> N Python
    ints, centipawns, stm POV, the values of :func:`evaluate`, from
    :func:`nnue.inference.kinds.deep.compiled.output_sums`; None when the compiled kernel cannot run."""
    comp = _kernels(None, boards.device.type == "cpu")
    res = None if comp is None else comp.output_sums(net, boards, l2_activation(net.arch))
    return None if res is None else [to_centipawns(o, net.scheme) for o in res[0].tolist()]


def evaluate(net: DeepIntegerNet, boards: torch.Tensor, chunk: int = 1024, backend: str | None = None) -> torch.Tensor:
    """Integer evals of packed boards: (N, 32) uint8 -> (N,) int64 centipawns, stm POV.

    On CPU by default (``backend``: :data:`nnue.inference.backends.BACKENDS`) every step of
    the module docstring runs in one compiled pass per board
    (:func:`nnue.inference.kinds.deep.compiled.output_sums`: int16 register sums of the feature
    transformer, the u8 activations, each layer of the position's own bucket in int64 with the
    int32 checks) where it applies (crelu/screlu after L1 and L2), then the centipawn scaling.
    Otherwise (``backend="torch"``) the feature transformer runs as in
    :func:`nnue.inference.kinds.perspective.evaluate` (positions sorted by piece count, steps of 512,
    bags from the lookup keys: :func:`nnue.inference.dense.evaluate_sorted`), then steps 2–6 on
    each step's accumulators; the evals go back to input order. Same integers either way."""
    from nnue.pipeline.features.board_tensor import check_boards

    check_boards(boards)
    comp = _kernels(backend, boards.device.type == "cpu")
    if comp is not None and boards.shape[0]:
        res = comp.output_sums(net, boards, l2_activation(net.arch))
        if res is not None:
            return to_centipawns(res[0], net.scheme)
        backends.not_applicable(backend)
    return dense.evaluate_sorted(net, boards, chunk, forward_from_accumulators)


def summary(arch: dict) -> str:
    """The architecture in one line: ``chess768 -> 256x2 pairwise_crelu -> 16 crelu -> 32 crelu
    -> 1 -> SFPieceCount<8>``."""
    return (f"{arch['feature_set']} -> {arch['hidden']}x2 {arch['activation']} -> {arch['l1_outputs']} "
            f"{arch['hidden_activation']} -> {arch['l2_outputs']} {l2_activation(arch)} -> 1 -> "
            f"{arch['output_buckets']}")


def evaluate_accumulator(net: DeepIntegerNet, acc, stm: int, bucket: int, layers=None) -> int:
    """One position's eval from its (2, H) int32 accumulators, white's first (the incremental
    accumulator's; :func:`nnue.inference.dense.accumulator_eval` through
    :func:`forward_from_accumulators`)."""
    return accumulator_eval(net, acc, stm, bucket, forward_from_accumulators)


def sparse_forward(net: DeepIntegerNet, accs: list[torch.Tensor], bucket: torch.Tensor, block: int, method: str):
    """The block-sparse path (:mod:`nnue.inference.sparse_l1`) after the accumulators: L1 over
    the nonzero blocks of the u8 inputs x0 only (:func:`nnue.inference.sparse_sums.stack_l1_sum`),
    then :func:`forward_after_l1`. Returns (evals (N,) int64, x0 (N, 2, L1/2))."""
    x = l0_activations(net, accs[0].to(torch.int32), accs[1].to(torch.int32))
    x = x.view(x.shape[0], 2, -1)
    return forward_after_l1(net, sparse_sums.stack_l1_sum(net, x, bucket, block, method), bucket), x
