"""Net kind ``tiny``: the integer net (:class:`TinyIntegerNet`: L0 → L1 → out with output buckets,
the 5 MiB MLP of seed 003) and its exact evaluation; the float side is :mod:`nnue.trainer.kinds.tiny`.

Integer formula (the deep nets' first and last layers, :mod:`nnue.inference.kinds.deep`; all
integers, ``>>`` an arithmetic shift, QA = 255, QB = 64, l0_shift = 8 by default):

1. feature transformer, per perspective: ``acc = l0b + Σ l0w[f]`` (int16, audited at export),
   ``v = clamp(acc, 0, QA)``;
2. L0 activation, u8, stm half first (crelu ``v``; screlu ``(v·v) >> l0_shift``; pairwise
   ``(v[j]·v[j + H/2]) >> l0_shift``);
3. L1 of the position's output bucket b, int8 weights, int32 bias (at QA·QB, plus QB/2 so that
   the floor shift rounds to nearest): ``s1 = l1b[b] + l1w[b]·x0`` (int32),
   ``x1 = act(s1 >> log2(QB))`` (crelu: ``clamp(y, 0, QA)``; the other hidden activations as in
   :mod:`nnue.spec.activations`);
4. ``out = outb[b] + outw[b]·x1`` (int32); ``eval = out·SCALE / (QA·QB)``, 64-bit, truncating
   toward zero: centipawns, side-to-move POV (before a residual net's base,
   :mod:`nnue.inference.residual`).

Raw layout (:meth:`TinyIntegerNet.raw_bytes`, little-endian, no header)::

    l0w int16[F][H] | l0b int16[H] | l1w int8[B][N1][L1] | l1b int32[B][N1]
    | outw int8[B][N1] | outb int32[B] | zeros to 64 B

Evaluation is exact as the deep nets' (:func:`nnue.inference.dense.dense_int`: int8
``torch._int_mm`` on weight digits where proven exact, else float64, every sum checked
against int32). One module: the kind has no compiled kernels of its own (its batch path is the
torch steps), so nothing here needs numba.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from nnue.pipeline.features import get_feature_set, parse_output_buckets
from nnue.spec import activations as acts
from nnue.spec.quant import QuantScheme

from .. import dense, sparse_sums
from ..dense import accumulator_eval, dense_int, l0_activations, layer_plan
from ..exact import l0_rows, to_centipawns
from ..net import NetFile
from .spec import InferenceKind


def make_tiny_arch(feature_set: str, hidden: int, activation: str, output_buckets: str, l1_outputs: int,
                   hidden_activation: str = "crelu") -> dict:
    """The ``arch`` dict of a :class:`TinyIntegerNet`. hidden: H per perspective; activation:
    L0 ("l0" of :mod:`nnue.spec.activations`); l1_outputs: N1; hidden_activation: after L1
    ("l1"). Raises ValueError/KeyError for unknown names or impossible sizes."""
    acts.check(activation, "l0", "L0 activation")
    acts.check(hidden_activation, "l1", "hidden activation (after L1)")
    acts.check_l0_width(activation, hidden)
    if min(hidden, l1_outputs) < 1:
        raise ValueError("layer sizes must be positive")
    fs = get_feature_set(feature_set)
    buckets = parse_output_buckets(output_buckets)
    return {"kind": "tiny", "feature_set": fs.name, "feature_hash": fs.hash, "num_inputs": fs.num_inputs,
            "hidden": hidden, "activation": activation, "output_buckets": buckets.name,
            "num_buckets": buckets.count, "l1_inputs": acts.l1_inputs(activation, hidden),
            "l1_outputs": l1_outputs, "hidden_activation": hidden_activation}


@dataclass
class TinyIntegerNet(NetFile):
    """An exported tiny integer net (module docstring: formula and layout).

    l0w: (F, H) int16; l0b: (H,) int16; l1w: (B, N1, L1) int8; l1b: (B, N1) int32; outw:
    (B, N1) int8; outb: (B,) int32."""

    arch: dict
    scheme: QuantScheme
    l0w: torch.Tensor
    l0b: torch.Tensor
    l1w: torch.Tensor
    l1b: torch.Tensor
    outw: torch.Tensor
    outb: torch.Tensor
    provenance: dict = field(default_factory=dict)

    kind = "tiny"
    ARCH_FIELDS = dict(NetFile.ARCH_FIELDS, l1_outputs=int, hidden_activation=str)
    ARCH_ACTIVATIONS = {"activation": "l0", "hidden_activation": "l1"}

    def tensors(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k) for k in ("l0w", "l0b", "l1w", "l1b", "outw", "outb")}

    @staticmethod
    def raw_layout() -> str:
        return ("l0w int16[F][H] | l0b int16[H] | l1w int8[B][N1][L1] | l1b int32[B][N1] | "
                "outw int8[B][N1] | outb int32[B] | zeros to a multiple of 64 B")

    @staticmethod
    def tensor_specs(arch: dict) -> dict[str, tuple[torch.dtype, tuple]]:
        """name -> (dtype, shape) of every tensor a tiny net of ``arch`` holds, in file order."""
        F, H, B, L1, N1 = arch["num_inputs"], arch["hidden"], arch["num_buckets"], arch["l1_inputs"], arch["l1_outputs"]
        return {"l0w": (torch.int16, (F, H)), "l0b": (torch.int16, (H,)),
                "l1w": (torch.int8, (B, N1, L1)), "l1b": (torch.int32, (B, N1)),
                "outw": (torch.int8, (B, N1)), "outb": (torch.int32, (B,))}

    def layers(self) -> list[dict]:
        """Per-layer dtypes, scales and shifts (written into export.json)."""
        s, a = self.scheme, self.arch
        a0, a1 = acts.get(a["activation"]), acts.get(a["hidden_activation"])
        lo, hi = a1.out_range["hidden"]
        return [
            {"layer": "l0", "weight": "int16", "bias": "int16", "scale": s.qa, "sum": "int16",
             "activation": a0.name, "rule": a0.integer["deep_l0"], "output": "u8"},
            {"layer": "l1", "weight": "int8", "bias": "int32", "weight_scale": s.qb, "bias_scale": s.qa * s.qb,
             "sum": "int32", "shift": s.dense_shift, "activation": a1.name, "rule": a1.integer["hidden"],
             "output": "u8" if a1.u8 else f"int16 ({lo}..{hi})"},
            {"layer": "out", "weight": "int8", "bias": "int32", "weight_scale": s.qb, "bias_scale": s.qa * s.qb,
             "sum": "int32", "eval": f"out * {s.scale} / ({s.qa} * {s.qb}), truncating"},
        ]


def forward_from_accumulators(net: TinyIntegerNet, acc_stm: torch.Tensor, acc_nstm: torch.Tensor,
                              bucket: torch.Tensor, return_parts: bool = False,
                              bucket_range: tuple[int, int] | None = None):
    """Steps 2–4 of the module docstring: (N, H) int32 accumulators of each perspective, (N,)
    int64 buckets -> (N,) int64 centipawns, stm POV (with return_parts, also ``s1`` (N, N1) and
    ``out`` (N,), the integer sums). Raises OverflowError when a sum leaves int32."""
    x0 = l0_activations(net, acc_stm, acc_nstm)
    s1 = dense_int(x0, net.l1w, net.l1b, bucket, "L1 sum", layer_plan(net, "l1w"), bucket_range)
    return forward_after_l1(net, s1, bucket, return_parts, bucket_range)


def forward_after_l1(net: TinyIntegerNet, s1: torch.Tensor, bucket: torch.Tensor, return_parts: bool = False,
                     bucket_range: tuple[int, int] | None = None):
    """Steps 3 (after the sum) and 4 from the L1 sums ``s1`` (N, N1) int64, bias included and
    checked against int32 (the block-sparse L1 path, :func:`sparse_forward`, computes them its
    own way): -> (N,) int64 centipawns (and the parts, as
    :func:`forward_from_accumulators`)."""
    s = net.scheme
    a1 = acts.get(net.arch["hidden_activation"])
    x1 = acts.int_hidden(a1.name, s1 >> s.dense_shift, s.qa, s.l0_shift).to(torch.int32)
    out = dense_int(x1, net.outw.unsqueeze(1), net.outb.unsqueeze(1), bucket, "output sum",
                         layer_plan(net, "outw", a1.u8), bucket_range).squeeze(1)
    ev = to_centipawns(out, s)
    if return_parts:
        return ev, {"s1": s1, "out": out}
    return ev


def forward_int(net: TinyIntegerNet, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor,
                return_parts: bool = False):
    """Exact integer eval from feature indices: stm, nstm (N, A) int32 −1-padded, bucket (N,)
    int64 -> (N,) int64 centipawns, stm POV (with return_parts, also the sums and ``acc``
    (N, 2, H) int32; :func:`nnue.inference.dense.forward_int`). Raises OverflowError when an
    accumulator leaves int16 or a sum int32."""
    return dense.forward_int(net, stm, nstm, bucket, return_parts, forward_from_accumulators)


def evaluate(net: TinyIntegerNet, boards: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """Integer evals of packed boards: (N, 32) uint8 -> (N,) int64 centipawns, stm POV (the
    net's own eval; a residual net's base is added by :func:`nnue.inference.api.evaluate`;
    :func:`nnue.inference.dense.evaluate_sorted`)."""
    return dense.evaluate_sorted(net, boards, chunk, forward_from_accumulators)


def summary(arch: dict) -> str:
    """The architecture in one line: ``chess768 -> 16x2 crelu -> 32 crelu -> 1 -> MaterialCount<1>``."""
    return (f"{arch['feature_set']} -> {arch['hidden']}x2 {arch['activation']} -> {arch['l1_outputs']} "
            f"{arch['hidden_activation']} -> 1 -> {arch['output_buckets']}")


def evaluate_accumulator(net: TinyIntegerNet, acc, stm: int, bucket: int, layers=None) -> int:
    """One position's eval from its (2, H) int32 accumulators, white's first (the incremental
    accumulator's; :func:`nnue.inference.dense.accumulator_eval` through
    :func:`forward_from_accumulators`)."""
    return accumulator_eval(net, acc, stm, bucket, forward_from_accumulators)


def sparse_forward(net: TinyIntegerNet, accs: list[torch.Tensor], bucket: torch.Tensor, block: int, method: str):
    """The block-sparse path (:mod:`nnue.inference.sparse_l1`): L1 over the nonzero blocks of x0
    (:func:`nnue.inference.sparse_sums.stack_l1_sum`, the deep nets' L1 layout), then
    :func:`forward_after_l1`. Returns (evals (N,) int64, x0 (N, 2, L1/2))."""
    x = l0_activations(net, accs[0].to(torch.int32), accs[1].to(torch.int32))
    x = x.view(x.shape[0], 2, -1)
    return forward_after_l1(net, sparse_sums.stack_l1_sum(net, x, bucket, block, method), bucket), x


def c_args(a: dict) -> list[str]:
    """The C reference's arguments for a tiny net's architecture."""
    return ["--features", a["feature_set"], "--buckets", a["output_buckets"], "--tiny", str(a["hidden"]),
            a["activation"], str(a["l1_outputs"]), a["hidden_activation"]]


KIND = InferenceKind("tiny", TinyIntegerNet, make_tiny_arch, forward_int, evaluate, summary,
                     forward_from_accumulators=forward_from_accumulators, accumulator_table=l0_rows,
                     evaluate_accumulator=evaluate_accumulator, sparse_forward=sparse_forward, c_args=c_args)
