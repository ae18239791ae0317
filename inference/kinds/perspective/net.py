"""The perspective kind's integer net (:class:`IntegerNet`, bullet-style: feature transformer →
activation → output buckets) and its exact integer evaluation.

Files: ``net.safetensors`` holds ``l0w`` (F, H), ``l0b`` (H,), ``l1w`` (B, L1), ``l1b`` (B,),
all int16 (:class:`IntegerNet`; the header of :mod:`nnue.inference.net`), and ``net.bin`` the
same tensors in the raw little-endian layout (:meth:`IntegerNet.raw_layout`).

Integer formula (all integers, C semantics, division truncates toward 0; the L0 rules are the
``perspective`` rules of :mod:`nnue.spec.activations`):

* ``acc_p = l0b + Σ l0w[f]`` over the features active for perspective p (int16 range, audited
  at export);
* ``v = clamp(acc, 0, QA)``;
* crelu: ``out = Σ v_stm·l1w[b][i] + Σ v_nstm·l1w[b][H+i] + l1b[b]``;
* screlu: ``out = (Σ v_stm²·l1w[b][i] + Σ v_nstm²·l1w[b][H+i]) / QA + l1b[b]``;
* pairwise_crelu: ``p = v[:H/2]·v[H/2:]`` per perspective, then
  ``out = (Σ p_stm·l1w[b][i] + Σ p_nstm·l1w[b][H/2+i]) / QA + l1b[b]``;
* ``eval = out·SCALE / (QA·QB)``, centipawns, side-to-move POV.

The sums before the division are held in int32 by an engine; :func:`evaluate` computes them in
int64 and raises :class:`OverflowError` if one leaves the int32 range, so it never returns a
value an int32 engine would not compute.

Exact integer evaluation. Every value is an integer; the heavy steps run on float or int8
kernels only where a bound proves them exact (each function states its bound):

1. feature transformer (:mod:`nnue.inference.exact`): one float32 embedding_bag per step of
   positions over the rows of ``ft_table`` (a zero row for the −1 padding, the bias row once per
   bag): a bag sums at most A + 1 ≤ 257 int16 values, every partial sum is below 257·2^15 <
   2^24, and float32 holds every integer below 2^24, so no addition rounds whatever order the
   kernel adds in;
2. L1 sums of every bucket needed (see :func:`l1_plan`): int8 torch._int_mm on byte digits of
   the activations and int8 digits of the weights (int32 partial sums below K·2^13 < 2^31,
   recombined in int64), or float64 (products < 2^31, sums < 2^53);
3. the position's own bucket, the int32 checks and the truncating divisions, in int64.

On CPU, :func:`forward_int` and :func:`evaluate` run steps 1–2 as one compiled pass per position
(:mod:`nnue.inference.kinds.perspective.compiled`, numba: int16 rows summed in SIMD registers,
the L1 sum of the position's own bucket in int64) whenever that module applies
(``backend="auto"``); the torch steps above are the fallback (``backend="torch"``, or numba
missing). Both give the same
integers (tests/inference/test_forward_int_paths.py, test_compiled.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from nnue.pipeline.features import get_feature_set, parse_output_buckets
from nnue.spec import activations as acts
from nnue.spec.quant import QuantScheme

from ... import backends, exact, sparse_sums
from ...net import NetFile
from ...exact import (STEP, acc_int16_proven, cached, check_acc_int16, check_indices, check_int32, embedding_sum,
                      ft_table, make_bags, sorted_steps, to_centipawns, trunc_div, weight_digits)

# XOR with this int16 (bytes 0x80, 0x80) subtracts 128 from both bytes of a uint16 modulo 256:
# each byte b becomes the int8 b − 128.
_XOR_8080 = 0x8080 - 0x10000
# A step computes its L1 columns one matrix-vector product each (torch._int_mm with one column)
# when it needs at most this many, else one product with every column: measured here (oneDNN,
# AVX-512 VNNI, K' = 1024, 512 rows) 14 µs for one column against 70 µs for 2 to 16.
_GEMV_MAX_COLS = 4


@dataclass
class IntegerNet(NetFile):
    """An exported integer perspective net.

    arch: {"kind": "perspective", "feature_set", "feature_hash", "num_inputs", "hidden",
    "activation", "output_buckets", "num_buckets", "l1_inputs"}. l0w: (F, H) int16; l0b: (H,)
    int16; l1w: (B, L1) int16 (first L1/2 weigh the stm half); l1b: (B,) int16.
    """

    arch: dict
    scheme: QuantScheme
    l0w: torch.Tensor
    l0b: torch.Tensor
    l1w: torch.Tensor
    l1b: torch.Tensor
    provenance: dict = field(default_factory=dict)

    kind = "perspective"

    def tensors(self) -> dict[str, torch.Tensor]:
        return {"l0w": self.l0w, "l0b": self.l0b, "l1w": self.l1w, "l1b": self.l1b}

    @staticmethod
    def raw_layout() -> str:
        return "l0w int16[F][H] | l0b int16[H] | l1w int16[B][L1] | l1b int16[B] | zeros to a multiple of 64 B"

    @staticmethod
    def tensor_specs(arch: dict) -> dict[str, tuple[torch.dtype, tuple]]:
        """name -> (dtype, shape) of every tensor a net of ``arch`` holds."""
        return {"l0w": (torch.int16, (arch["num_inputs"], arch["hidden"])),
                "l0b": (torch.int16, (arch["hidden"],)),
                "l1w": (torch.int16, (arch["num_buckets"], arch["l1_inputs"])),
                "l1b": (torch.int16, (arch["num_buckets"],))}


def make_arch(feature_set: str, hidden: int, activation: str, output_buckets: str) -> dict:
    """The ``arch`` dict of an :class:`IntegerNet` (written into the header) for a perspective
    net: feature set by name (its hash and input count looked up), H per perspective, the
    activation and the output-bucket spec (e.g. "MaterialCount<8>"). Raises KeyError/ValueError
    for unknown names."""
    fs = get_feature_set(feature_set)
    buckets = parse_output_buckets(output_buckets)
    return {"kind": "perspective", "feature_set": fs.name, "feature_hash": fs.hash, "num_inputs": fs.num_inputs,
            "hidden": hidden, "activation": activation, "output_buckets": buckets.name,
            "num_buckets": buckets.count, "l1_inputs": acts.l1_inputs(activation, hidden)}


def summary(arch: dict) -> str:
    """The architecture in one line: ``chess768 -> 256x2 screlu -> MaterialCount<8>``."""
    return f"{arch['feature_set']} -> {arch['hidden']}x2 {arch['activation']} -> {arch['output_buckets']}"

def l1_plan(net) -> dict:
    """How this net's L1 sums are computed: ``mode`` "int8" (preferred) or "f64".

    The L1 input x (N, K) is crelu v ≤ QA, screlu v² ≤ QA², pairwise v·v' ≤ QA² (v = the
    clamped accumulator), stm half first; the sum of bucket b is Σ_k x_k·l1w[b][k].

    "int8" (when QA ≤ 255, 0 < K < 2^17, a little-endian machine, and :func:`int_mm_is_exact`
    for the shapes used): x is held as uint16 (≤ 255² < 2^16; the int16 product v·v wraps to
    exactly those bits) and split into bytes x = 256·hi + lo, each made int8 by − 128 (one XOR
    with 0x8080: the int16 tensor viewed as int8 is then lo − 128, hi − 128 for each k, i.e. K'
    = 2K interleaved inputs). The weights are split into digits d_j (:func:`weight_digits`,
    |d_j| ≤ 64). ``w8`` (K', C) int8 holds, for byte i (lo, hi; only lo when x ≤ 255), digit j
    and bucket b, column c = (i·n_w + j)·B + b with d_j[b][k] on row 2k + i, zeros elsewhere;
    with Out = x8 @ w8 (int32),

        Σ_k x_k·l1w[b][k] = Σ_{i,j} 256^i·128^j·(Out[:, c] + 128·Σ_k d_j[b][k])

    (the second term undoes the − 128; ``scales`` holds 256^i·128^j per column group, ``const``
    the whole second term per bucket). ``gemv``: whether one-column products are exact too
    (steps that need few columns use them). Exactness: an Out entry sums K products with
    |x_byte − 128| ≤ 128 and |d| ≤ 64, so every partial sum is below K·2^13 < 2^31 (int32 is
    exact for K < 2^18; we require K < 2^17); the recombination is int64. A u8×s8 kernel
    without VNNI (x86 oneDNN adds 128 to the int8 source and sums adjacent pairs in int16 with
    saturation) sees pair sums of at most 2·255·64 = 32640 < 2^15: no saturation; the first use
    checks the products on extreme inputs anyway and falls back to "f64" if one differs.

    "f64": x as float64 against every bucket's float64 weights: each product |x·w| ≤ QA²·32767
    < 2^31, each sum of K < 2^22 of them below 2^53, so every value is an exact integer.
    """
    def build(l1w):
        import sys

        act, qa = net.arch["activation"], net.scheme.qa
        nb, k = l1w.shape
        plan = {"mode": "f64", "buckets": nb}
        if qa <= 255 and 0 < k < 1 << 17 and nb > 0 and sys.byteorder == "little":
            n_act = 1 if (qa * qa if acts.divides_by_qa(act) else qa) <= 255 else 2
            digits = weight_digits(l1w.to(torch.int64))
            groups = n_act * len(digits)
            w8 = torch.zeros((k, 2, n_act, len(digits), nb), dtype=torch.int8)
            scales, const = [], torch.zeros(nb, dtype=torch.int64)
            for i in range(n_act):
                for j, d in enumerate(digits):
                    w8[:, i, i, j, :] = d.T.to(torch.int8)
                    scales.append(256 ** i * 128 ** j)
                    const += scales[-1] * 128 * d.sum(1)
            w8 = w8.view(2 * k, groups * nb)
            if exact.int_mm_is_exact(2 * k, w8.shape[1]):
                plan.update(mode="int8", w8=w8, groups=groups, gemv=exact.int_mm_is_exact(2 * k, 1),
                            w8_cols=[w8[:, c:c + 1].contiguous() for c in range(w8.shape[1])],
                            scales=torch.tensor(scales, dtype=torch.int64).view(groups, 1), const=const)
        if plan["mode"] == "f64":
            if k > 1 << 22:
                raise ValueError("L1 wider than 2^22 inputs would break the float64 exactness bound")
            plan["w64"] = l1w.to(torch.float64)
        return plan
    return cached(net, ("l1_plan", net.arch["activation"], net.scheme.qa), (net.l1w,), build)


def l1_input(act: str, qa: int, acc, out=None):
    """The perspective net's L1 input from accumulators, the one copy of the rule (module
    docstring): ``v = clamp(acc, 0, QA)``, then the activation's integer product
    (:func:`nnue.spec.activations.int_l0_product`: crelu v, screlu v², pairwise v[:H/2]·v[H/2:]).
    ``acc``: (..., H) integers (or exact floats), a tensor or a NumPy array, one row per
    perspective with the stm row first; ``out``: where the clamp is written (may be ``acc``
    itself), same kind as ``acc``. Returns (..., K) in the dtype of the clamp."""
    if isinstance(acc, np.ndarray):  # maximum + minimum: 2.5 µs on (2, 256) int64 here, np.clip 5.2 µs
        v = np.maximum(acc, 0, out=out)
        np.minimum(v, qa, out=v)
    else:
        v = torch.clamp(acc, 0, qa, out=out) if out is not None else acc.clamp(0, qa)
    return acts.int_l0_product(act, v)


def _l1_input_i16(act: str, qa: int, acc: torch.Tensor) -> torch.Tensor:
    """(2m, H) accumulators, float32 or int16 (exact integers within int16; rows stm, nstm of
    each position) -> (m, K) int16 L1 inputs as uint16 bits (:func:`l1_input`; the int16 products
    wrap to the uint16 bits of values ≤ 255²). An int16 ``acc`` is overwritten."""
    a16 = acc if acc.dtype == torch.int16 else acc.to(torch.int16)
    return l1_input(act, qa, a16, out=a16).view(acc.shape[0] // 2, -1)


def _l1_input_f64(act: str, qa: int, acc: torch.Tensor) -> torch.Tensor:
    """(2m, H) accumulators (float32 or int16) -> (m, K) float64 L1 inputs (:func:`l1_input`;
    exact: values ≤ QA² < 2^53)."""
    return l1_input(act, qa, acc.double()).view(acc.shape[0] // 2, -1)


class _L1:
    """The L1 sums of a batch, filled step by step (:meth:`step`), read once (:meth:`sums`)."""

    def __init__(self, net, n: int):
        self.plan = plan = l1_plan(net)
        self.act, self.qa = net.arch["activation"], net.scheme.qa
        nb = plan["buckets"]
        if plan["mode"] == "int8":
            # column-major, (C, N, 1): one column of a step is a contiguous (m, 1) target
            self.out = torch.empty((plan["w8"].shape[1], n, 1), dtype=torch.int32)
        else:
            self.out = torch.empty((n, nb), dtype=torch.float64)

    def step(self, acc: torch.Tensor, s: int, b_lo: int, b_hi: int, first: list[int] | None = None) -> None:
        """Positions s.. s + m: (2m, H) accumulators (float32, or int16 that may be overwritten),
        bias included; their buckets lie in [b_lo, b_hi]
        (only those columns are computed when that is cheaper; the others stay unset). first:
        when the batch is sorted by bucket, first[b] = index of its first position of bucket
        >= b (B + 1 entries); then each bucket's columns are computed on its rows only."""
        plan, m = self.plan, acc.shape[0] // 2
        if plan["mode"] != "int8":
            torch.mm(_l1_input_f64(self.act, self.qa, acc), plan["w64"].T, out=self.out[s:s + m])
            return
        x8 = _l1_input_i16(self.act, self.qa, acc).bitwise_xor_(_XOR_8080).view(torch.int8)
        nb, groups, out = plan["buckets"], plan["groups"], self.out
        if plan["gemv"] and groups * (b_hi - b_lo + 1) <= (2 * _GEMV_MAX_COLS if first else _GEMV_MAX_COLS):
            w8_cols = plan["w8_cols"]
            for b in range(b_lo, b_hi + 1):
                r0, r1 = (max(first[b], s), min(first[b + 1], s + m)) if first else (s, s + m)
                if r1 > r0:
                    rows = x8[r0 - s:r1 - s]
                    for c in range(b, groups * nb, nb):
                        torch._int_mm(rows, w8_cols[c], out=out[c, r0:r1])
        else:
            out[:, s:s + m, 0] = torch._int_mm(x8, plan["w8"]).T

    def sums(self, bucket: torch.Tensor) -> torch.Tensor:
        """(N,) int64: each position's L1 sum in its own bucket ``bucket`` (N,) int64."""
        plan, n = self.plan, bucket.shape[0]
        if plan["mode"] != "int8":
            return self.out.gather(1, bucket.view(n, 1)).view(n).to(torch.int64)
        g = plan["groups"]
        sel = self.out.view(g, plan["buckets"], n).gather(1, bucket.view(1, 1, n).expand(g, 1, n))
        return (sel.view(g, n).to(torch.int64) * plan["scales"]).sum(0) + plan["const"][bucket]


def output(activation: str, scheme, total, l1b):
    """The perspective net's integer rule after the L1 sum (module docstring), the one copy that
    the batch path (:func:`forward_int`), the block-sparse path (:mod:`nnue.inference.sparse_l1`)
    and the incremental accumulator (:mod:`nnue.inference.incremental`) share.

    total: the L1 sum Σ x·l1w[b] of each position (an int64 tensor (N,), or one Python int);
    l1b: its bucket's bias (same shape). Checks the sum and ``out`` against int32 (OverflowError
    naming which), divides by QA when the activation's products carry QA² (screlu, pairwise),
    truncating, adds the bias, and returns centipawns :func:`~nnue.inference.exact.to_centipawns`
    (same type as ``total``)."""
    check_int32(total, "L1 sum")
    out = (trunc_div(total, scheme.qa) if acts.divides_by_qa(activation) else total) + l1b
    check_int32(out, "L1 output")
    return to_centipawns(out, scheme)


def l1b_int64(net) -> torch.Tensor:
    """(B,) int64 copy of the L1 biases, made once per net."""
    return cached(net, "l1b:i64", (net.l1b,), lambda t: t.to(torch.int64))


def _finish(net, total: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
    """L1 sums (N,) int64 -> evals (:func:`output` with each position's bucket bias)."""
    return output(net.arch["activation"], net.scheme, total, l1b_int64(net)[bucket])


def _load_kernels():
    from . import compiled  # numba: imported on first use only

    return compiled


def _kernels(backend: str | None, cpu: bool):
    """The compiled kernels (:mod:`nnue.inference.kinds.perspective.compiled`) when ``backend``
    (:data:`nnue.inference.backends.BACKENDS`) asks for them and they can run here, else None."""
    return backends.kernels(backend, cpu, _load_kernels)


def forward_int(net, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor,
                return_parts: bool = False, backend: str | None = None):
    """Exact integer eval from feature indices.

    stm, nstm: (N, A) int32 −1-padded; bucket: (N,) int64. Returns (N,) int64 centipawns, stm
    POV; with return_parts, also a dict with ``acc`` (N, 2, H) int32 and ``sum`` (N,) int64,
    the L1 sum before the division (for the overflow audit).
    Raises OverflowError when an accumulator leaves int16 or a sum leaves int32.

    Exactness, step by step (each bound is what keeps its step exact):

    * accumulators: one float32 ``embedding_bag`` per step of ``STEP`` positions over
      :func:`ft_table` (bags of :func:`make_bags`): each partial sum adds at most A + 1 ≤ 257 int16
      values, below 2^24, which float32 holds exactly. They are range-checked against int16
      unless :func:`acc_int16_proven` shows that no A features can leave it;
    * L1 (:func:`l1_plan`): int8 ``torch._int_mm`` on byte digits of the activations and digits
      |d| ≤ 64 of the weights (int32 partial sums below K·2^13, recombined in int64), or float64
      (products < 2^31, sums < 2^53);
    * each position's own bucket, then the int32 checks and truncating divisions in int64.

    ``backend`` (:data:`nnue.inference.backends.BACKENDS`; None: its ``DEFAULT_BACKEND``): on CPU by default the
    accumulators and L1 sums come from :func:`nnue.inference.kinds.perspective.compiled.l1_sums_lists` (int16 or
    int32 register sums of the int16 rows, the own bucket's L1 sum in int64; same integers),
    the steps above otherwise.

    Tested bit-exact against an int64 reference (tests/inference/test_forward_int_paths.py) and
    the C reference evaluator.
    """
    width = max(stm.shape[1], nstm.shape[1])
    if width > 256:
        raise ValueError("more than 256 active features would break the float32 exactness bound")
    check_indices(net, stm, nstm)
    n = stm.shape[0]
    stm, nstm = (torch.nn.functional.pad(t.clamp(min=-1), (0, width - t.shape[1]), value=-1)
                 for t in (stm, nstm))
    comp = _kernels(backend, stm.device.type == "cpu")
    if comp is not None and n:
        res = comp.l1_sums_lists(net, stm, nstm, bucket, return_parts)
        if res is not None:
            total, accs = res if return_parts else (res, None)
            ev = _finish(net, total, bucket)
            return (ev, {"acc": accs, "sum": total}) if return_parts else ev
        backends.not_applicable(backend)
    table = ft_table(net)
    proven = acc_int16_proven(net, width)
    l1 = _L1(net, n)
    accs = torch.empty((n, 2, net.l0w.shape[1]), dtype=torch.int32) if return_parts else None
    for s in range(0, n, STEP):
        e = min(n, s + STEP)
        acc = embedding_sum(table, make_bags(stm[s:e], nstm[s:e], table.shape[0] - 1))
        if not proven:
            check_acc_int16(acc)
        if return_parts:
            accs[s:e] = acc.view(e - s, 2, -1)
        lo, hi = torch.aminmax(bucket[s:e])
        l1.step(acc, s, int(lo), int(hi))
    total = l1.sums(bucket)
    ev = _finish(net, total, bucket)
    if return_parts:
        return ev, {"acc": accs, "sum": total}
    return ev



def evaluate_small(net, boards: torch.Tensor) -> list[int] | None:
    """A few positions without the batch machinery (:func:`nnue.inference.api.evaluate_net` sends
    calls of at most ``SMALL_BATCH`` CPU boards here first): (N, 32) uint8 -> N Python ints,
    centipawns, stm POV, the values of :func:`evaluate`, from
    :func:`nnue.inference.kinds.perspective.compiled.evaluate_small`; None when the compiled kernels cannot run
    (the caller then takes another path)."""
    comp = _kernels(None, boards.device.type == "cpu")
    return None if comp is None else comp.evaluate_small(net, boards, output)


def evaluate(net, boards: torch.Tensor, chunk: int = 1024, backend: str | None = None) -> torch.Tensor:
    """Integer evals of packed boards: (N, 32) uint8 -> (N,) int64 centipawns, stm POV.

    On CPU by default (``backend``, :data:`nnue.inference.backends.BACKENDS`; None: its
    ``DEFAULT_BACKEND``) one compiled pass per board
    (:func:`nnue.inference.kinds.perspective.compiled.l1_sums_boards`: decode, the feature set's table, the int16
    rows summed in registers, the own bucket's L1 sum), then :func:`output`; in input order, no
    sort. The torch path (``backend="torch"``, or where the kernels do not apply) gives the
    values of :func:`forward_int` on the encoded boards (the same steps, the same exactness
    argument), computed faster than encoding and calling it:

    * positions are taken in order of piece count (a stable sort; the evals are put back in the
      input order at the end). A step's bags are then only as wide as its largest piece count
      (a feature set has at most one feature per piece and perspective, and pads at the end:
      true of every table-encoded set by construction, checked per step for any other, which
      falls back to the full width), and its positions fall in one or two output buckets
      (bucket functions grow with the piece count), whose L1 columns alone are computed;
    * for a table-encoded feature set (all of them) a step's bags come straight from the
      lookup keys (``TableEncoder.lookup_keys``) through a copy of the table that points at the
      rows of :func:`ft_table`: one ``index_select`` per step (per step, not per batch:
      whole-batch buffers of a few MB fall out of L2 and cost more);
    * the bias is not a bag row: when :func:`acc_int16_proven` holds for the step's width, the
      bias-free sums (|Σ rows| ≤ w·max|l0w| ≤ 32767 − |l0b|) are converted to int16 and the
      int16 bias added (no wrap: the biased sum is within int16 too); otherwise it is added in
      float32 (exact, below 2^24) and the sums are range-checked.

    ``chunk``: positions per feature-encoding call of the torch path (rounded to steps, at least
    4096)."""
    from nnue.pipeline.features.board_tensor import check_boards

    check_boards(boards)
    comp = _kernels(backend, boards.device.type == "cpu")
    if comp is not None and boards.shape[0]:
        res = comp.l1_sums_boards(net, boards)
        if res is not None:
            return _finish(net, *res)
        backends.not_applicable(backend)
    if boards.shape[0] == 0:
        sorted_steps(net, boards, chunk)  # validates shape and dtype
        return torch.zeros(0, dtype=torch.int64)
    order, bucket, first, steps = sorted_steps(net, boards, chunk)
    l1 = _L1(net, boards.shape[0])
    for s, e, acc, b_lo, b_hi in steps:
        l1.step(acc, s, b_lo, b_hi, first)
    ev = _finish(net, l1.sums(bucket), bucket)
    return torch.empty_like(ev).index_copy_(0, order, ev)


# ------------------------------------------------------------- from incremental accumulators
def accumulator_layers(net) -> tuple[list, list[int]]:
    """What :func:`evaluate_accumulator` takes as ``layers``, made once per net (again when
    ``l1w`` or ``l1b`` is replaced or changed in place): per bucket, its L1 weights as int64
    NumPy arrays in (white, black) order for white to move and swapped for black, so that the
    activations of the white-first accumulators dot them without a reorder; the biases as
    Python ints."""
    def build(l1w, l1b):
        l1 = l1w.numpy().astype(np.int64)
        half = l1.shape[1] // 2
        swapped = np.concatenate((l1[:, half:], l1[:, :half]), axis=1)
        return ([[np.ascontiguousarray(l1[i]), np.ascontiguousarray(swapped[i])] for i in range(l1.shape[0])],
                l1b.numpy().astype(np.int64).tolist())
    return cached(net, "incremental_l1", (net.l1w, net.l1b), build)


def evaluate_accumulator(net, acc: np.ndarray, stm: int, bucket: int, layers=None) -> int:
    """One position's integer eval (centipawns, stm POV) from its (2, H) int32 accumulators,
    white's perspective in row 0 (:func:`nnue.inference.exact.l0_rows` summed): the formula of
    :func:`forward_int` on NumPy arrays and Python ints (:func:`l1_input`, one dot product in
    int64, :func:`output`). ``layers``: :func:`accumulator_layers`, when the caller keeps them.
    Raises OverflowError where :func:`forward_int` does."""
    l1, l1b = layers or accumulator_layers(net)
    s, act = net.scheme, net.arch["activation"]
    check_acc_int16(acc)
    # int64, as the batch path: a screlu square or pairwise product times L1 weights
    v = l1_input(act, s.qa, acc, out=np.empty(acc.shape, dtype=np.int64))
    total = int(v.reshape(-1).dot(l1[bucket][stm]))
    return output(act, s, total, l1b[bucket])


# ------------------------------------------------------------------------ block-sparse L1
def activations(net, acc: torch.Tensor) -> torch.Tensor:
    """(N, 2, H) accumulators (stm, nstm; integers in any dtype) -> (N, 2, L) int32 L1 inputs
    per perspective (L = H, or H/2 for pairwise_crelu), after the activation."""
    return l1_input(net.arch["activation"], net.scheme.qa, acc.to(torch.int32))


def sparse_forward(net, accs: list[torch.Tensor], bucket: torch.Tensor, block: int, method: str):
    """The block-sparse path (:mod:`nnue.inference.sparse_l1`) after the accumulators: accs, the
    (N, H) float32 accumulators of stm and nstm (exact integers, range-checked), -> (evals (N,)
    int64, the L1 inputs (N, 2, L) int32), the L1 sum over nonzero blocks only
    (:func:`nnue.inference.sparse_sums.l1_sum`), then :func:`output`."""
    x = activations(net, torch.stack(accs, 1))
    total = sparse_sums.l1_sum(net, x, bucket, block, method)
    return output(net.arch["activation"], net.scheme, total, l1b_int64(net)[bucket]), x
