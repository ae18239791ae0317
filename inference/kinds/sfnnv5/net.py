"""The sfnnv5 kind's integer net: Stockfish 15.1's network (SFNNv5), evaluated exactly as the engine
does.

Architecture and arithmetic (Stockfish source at tag ``sf_15.1``: ``nnue_architecture.h``,
``nnue_feature_transformer.h``, ``evaluate_nnue.cpp``, ``layers/affine_transform.h``,
``layers/clipped_relu.h``, ``layers/sqr_clipped_relu.h``; ``shared/SF15.md``). All integers, C
semantics: ``>>`` is an arithmetic shift, ``/`` truncates toward zero, and int16/int32 sums wrap
as the engine's SIMD additions do:

1. feature transformer, per perspective p (HalfKAv2_hm, :mod:`nnue.pipeline.features.halfka_v2_hm`):
   ``acc_p = ft_bias + Σ ft_weight[f]`` (int16, wrapping) and ``psqt_p = Σ psqt[f]`` (int32,
   8 values, one per PSQT bucket);
2. transformed features, stm perspective first: for j < L1/2,
   ``x0[j] = clamp(acc[j], 0, 127) · clamp(acc[j + L1/2], 0, 127) / 128`` (u8, ≤ 126);
3. bucket ``b = (pieces − 1) / 4`` picks the layer stack and the PSQT column;
4. ``s0 = fc0_bias[b] + fc0_weight[b] · x0`` (16 int32 sums);
   ``x1 = [min(127, s0[i]² >> 19) for i < 15] ++ [clamp(s0[i] >> 6, 0, 127) for i < 15] ++ [0, 0]``
   (SqrClippedReLU, ClippedReLU, the 30 inputs of fc_1 padded to 32);
5. ``s1 = fc1_bias[b] + fc1_weight[b] · x1``; ``x2 = clamp(s1 >> 6, 0, 127)``;
6. ``s2 = fc2_bias[b] + fc2_weight[b] · x2``; ``positional = s2 + s0[15]·9600 / 8128`` (the skip:
   600·OutputScale / (127·2^6), the product in int32);
7. ``psqt = (psqt_stm[b] − psqt_nstm[b]) / 2``; the engine's internal value
   ``v = (psqt + positional) / 16`` (``NNUE::evaluate(pos, false)``), side to move's point of view;
8. UCI centipawns ``cp = v·100 / 361`` (``UCI::NormalizeToPawnValue``); the trace prints pawns
   ``v / 361`` with two decimals.

Every step but 1 runs on exact int64 tensors (the products are below 2^31 and the sums are
wrapped to the engine's widths after); step 1 is a float32 ``embedding_bag`` for the int16
accumulator (≤ 33 terms of |w| ≤ 2^15: below 2^24, exact) and a float64 one for the int32 PSQT
sums (≤ 32 terms below 2^31: below 2^53, exact).

Tensors (``net.safetensors``, names as in the engine's file, layer stacks bucket-major):
``ft_bias`` int16 (L1,), ``ft_weight`` int16 (F, L1), ``psqt`` int32 (F, 8), ``fc0_bias`` int32
(8, 16), ``fc0_weight`` int8 (8, 16, L1), ``fc1_bias`` int32 (8, 32), ``fc1_weight`` int8
(8, 32, 32) (input columns 30 and 31 are the engine's padding: kept, never used), ``fc2_bias``
int32 (8, 1), ``fc2_weight`` int8 (8, 1, 32). The engine file (``.nnue``) is
:mod:`nnue.inference.kinds.sfnnv5.codec`; the engine's eval trace
:mod:`nnue.inference.kinds.sfnnv5.trace`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from nnue.pipeline.features import get_feature_set, parse_output_buckets
from nnue.spec.quant import QuantScheme

from ... import backends
from ...exact import cached
from ...net import NetFile
# Stockfish 15.1's fixed sizes are facts of its file format: one copy, in the codec
from .codec import (FC0_OUTPUTS, FC1_OUTPUTS, FC1_PADDED, LAYER_STACKS, PSQT_BUCKETS, STOCKFISH_L1, nnue_bytes,
                     parse_nnue)

FC1_INPUTS = 30         # 15 SqrClippedReLU + 15 ClippedReLU
OUTPUT_SCALE = 16       # OutputScale
WEIGHT_SCALE_BITS = 6   # WeightScaleBits
NORMALIZE_TO_PAWN = 361  # UCI::NormalizeToPawnValue (uci.h, 15.1)
SKIP_NUM, SKIP_DEN = 600 * OUTPUT_SCALE, 127 * (1 << WEIGHT_SCALE_BITS)
#: the defaults of the sfnnv5 kind's header quantisation (nominal: the arithmetic is fixed)
SCHEME = QuantScheme(qa=127, qb=64, scale=400)


def _wrap(t: torch.Tensor, bits: int) -> torch.Tensor:
    """Two's-complement wrap of an int64 tensor to ``bits`` bits (what the engine's SIMD adds do);
    ``t`` itself when every value is already in range (the usual case: one min/max pass)."""
    half = 1 << (bits - 1)
    if t.numel() == 0 or (int(t.min()) >= -half and int(t.max()) < half):
        return t
    return torch.remainder(t + half, 1 << bits) - half


def _tdiv(t: torch.Tensor, d: int) -> torch.Tensor:
    return torch.div(t, d, rounding_mode="trunc")


def make_sfnnv5_arch(feature_set: str = "halfkav2_hm", output_buckets: str = "SFPieceCount<8>",
                     hidden: int = STOCKFISH_L1, description: str = "") -> dict:
    """The ``architecture`` dict of an sfnnv5 net: L1 = ``hidden`` (a multiple of 32; 1,024 is
    what Stockfish 15.1 loads), the engine's description string. Raises ValueError for another
    feature set, other output buckets or an L1 the layout cannot hold."""
    fs = get_feature_set(feature_set)
    buckets = parse_output_buckets(output_buckets)
    if fs.name != "halfkav2_hm":
        raise ValueError(f"sfnnv5 nets read HalfKAv2_hm features (features=halfkav2_hm), not {fs.name}")
    if buckets.name != "SFPieceCount<8>":
        raise ValueError(f"sfnnv5 nets have 8 layer stacks chosen by (pieces - 1) / 4 "
                         f"(output_buckets SFPieceCount<8>), not {buckets.name}")
    if not isinstance(hidden, int) or hidden < 32 or hidden % 32:
        raise ValueError(f"sfnnv5 L1 (model.hidden) is {hidden}: a positive multiple of 32 (Stockfish 15.1: 1024)")
    return {"kind": "sfnnv5", "feature_set": fs.name, "feature_hash": fs.hash, "num_inputs": fs.num_inputs,
            "hidden": hidden, "output_buckets": buckets.name, "num_buckets": buckets.count,
            "l1_outputs": FC0_OUTPUTS, "l2_outputs": FC1_OUTPUTS, "psqt_buckets": PSQT_BUCKETS,
            "description": description}


@dataclass
class SFNNv5IntegerNet(NetFile):
    """A Stockfish 15.1 network (see the module docstring for the tensors and the formula)."""

    arch: dict
    scheme: QuantScheme
    ft_bias: torch.Tensor
    ft_weight: torch.Tensor
    psqt: torch.Tensor
    fc0_bias: torch.Tensor
    fc0_weight: torch.Tensor
    fc1_bias: torch.Tensor
    fc1_weight: torch.Tensor
    fc2_bias: torch.Tensor
    fc2_weight: torch.Tensor
    provenance: dict = field(default_factory=dict)

    kind = "sfnnv5"
    ARCH_FIELDS = {"kind": str, "feature_set": str, "feature_hash": str, "num_inputs": int, "hidden": int,
                   "output_buckets": str, "num_buckets": int, "l1_outputs": int, "l2_outputs": int,
                   "psqt_buckets": int, "description": str}
    ARCH_ACTIVATIONS = {}  # no activation field: the arithmetic is fixed

    def tensors(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k) for k in self.tensor_specs(self.arch)}

    @staticmethod
    def tensor_specs(arch: dict) -> dict[str, tuple[torch.dtype, tuple]]:
        """name -> (dtype, shape) of every tensor a net of ``arch`` holds."""
        F, L1 = arch["num_inputs"], arch["hidden"]
        S = LAYER_STACKS
        return {"ft_bias": (torch.int16, (L1,)), "ft_weight": (torch.int16, (F, L1)),
                "psqt": (torch.int32, (F, PSQT_BUCKETS)),
                "fc0_bias": (torch.int32, (S, FC0_OUTPUTS)), "fc0_weight": (torch.int8, (S, FC0_OUTPUTS, L1)),
                "fc1_bias": (torch.int32, (S, FC1_OUTPUTS)), "fc1_weight": (torch.int8, (S, FC1_OUTPUTS, FC1_PADDED)),
                "fc2_bias": (torch.int32, (S, 1)), "fc2_weight": (torch.int8, (S, 1, FC1_OUTPUTS))}

    @staticmethod
    def raw_layout() -> str:
        return "Stockfish 15.1 .nnue (SFNNv5): see nnue.inference.kinds.sfnnv5.codec"

    def raw_bytes(self) -> bytes:
        """The engine file: Stockfish 15.1's ``.nnue`` layout (:func:`nnue.inference.kinds.sfnnv5.codec.nnue_bytes`)."""
        return nnue_bytes(self)

    def layers(self) -> list[dict]:
        """Per-layer dtypes and shifts (written into export.json)."""
        return [
            {"layer": "ft", "weight": "int16", "bias": "int16", "scale": 127, "sum": "int16 (wrapping)",
             "psqt": "int32, scale 9600", "output": "u8: clamp(a,0,127)*clamp(b,0,127)/128 (pairwise)"},
            {"layer": "fc_0", "weight": "int8", "bias": "int32", "weight_scale": 64, "bias_scale": 8128,
             "outputs": "15 -> SqrClippedReLU (x*x >> 19) and ClippedReLU (x >> 6), 1 skip"},
            {"layer": "fc_1", "weight": "int8", "bias": "int32", "inputs": "30 (padded 32)", "activation": "x >> 6, 0..127"},
            {"layer": "fc_2", "weight": "int8", "bias": "int32", "weight_scale": "9600/127", "bias_scale": 9600},
            {"layer": "eval", "value": "(psqt + positional) / 16", "cp": "value * 100 / 361"},
        ]


def read_nnue(path, data: bytes | None = None) -> SFNNv5IntegerNet:
    """Read a Stockfish 15.1 ``.nnue`` file into an integer net (kind sfnnv5; the description
    kept in ``arch["description"]``; L1 taken from the feature transformer's hash). The file's
    checks are :func:`nnue.inference.kinds.sfnnv5.codec.parse_nnue`'s: version, every hash, the sizes and the
    end of the file, each a :class:`~nnue.inference.net.NetFormatError` naming the file, the field
    and its byte offset."""
    p = parse_nnue(path, data)
    arch = make_sfnnv5_arch(hidden=p["l1"], description=p["description"])
    return SFNNv5IntegerNet(arch, SCHEME, p["ft_bias"], p["ft_weight"], p["psqt"],
                            *(p[k] for k in ("fc0_bias", "fc0_weight", "fc1_bias", "fc1_weight", "fc2_bias",
                                             "fc2_weight")),
                            provenance={"imported_from": str(p["path"]),
                                        "stockfish_hash": f"0x{p['header_hash']:08X}"})


# ------------------------------------------------------------------------- the evaluation
def _ft_f32(net: SFNNv5IntegerNet) -> torch.Tensor:
    """(F + 1, L1) float32: row 0 zeros (for the −1 padding), row f + 1 = ft_weight[f]."""
    def build(w):
        return torch.cat((torch.zeros(1, w.shape[1]), w.float())).contiguous()
    return cached(net, "sf_ft", (net.ft_weight,), build)


def _psqt_f64(net: SFNNv5IntegerNet) -> torch.Tensor:
    def build(p):
        return torch.cat((torch.zeros(1, p.shape[1], dtype=torch.float64), p.double())).contiguous()
    return cached(net, "sf_psqt", (net.psqt,), build)


def accumulate(net: SFNNv5IntegerNet, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 1: (N, A) int32 feature indices, −1 padded -> (accumulator (N, L1) float32 holding
    exact integers in the int16 range, wrapped as the engine's int16 adds; PSQT sums (N, 8) int64
    in the int32 range)."""
    idx = (indices.long().clamp(min=-1) + 1)
    n = idx.shape[0]
    if n == 0:
        return torch.zeros((0, net.arch["hidden"])), torch.zeros((0, PSQT_BUCKETS), dtype=torch.int64)
    if int(indices.max()) >= net.arch["num_inputs"]:
        raise ValueError(f"feature index {int(indices.max())} out of range {net.arch['num_inputs']}")
    acc = torch.nn.functional.embedding_bag(idx, _ft_f32(net), mode="sum")
    acc.add_(_as_f32(net, "ft_bias"))  # ≤ 33 int16 terms: every partial sum below 2^21, exact in float32
    if float(acc.min()) < -32768 or float(acc.max()) > 32767:
        acc = _wrap(acc.to(torch.int64), 16).to(torch.float32)
    ps = torch.nn.functional.embedding_bag(idx, _psqt_f64(net), mode="sum").to(torch.int64)
    return acc, _wrap(ps, 32)


def _as_f32(net: SFNNv5IntegerNet, name: str) -> torch.Tensor:
    return cached(net, ("sf_f32", name), (getattr(net, name),), lambda t: t.to(torch.float32))


def transform(acc_stm: torch.Tensor, acc_nstm: torch.Tensor) -> torch.Tensor:
    """Step 2: accumulators (N, L1) (float32 or integer, exact) -> transformed features (N, L1)
    float32 holding the integers 0..126, stm first: ``a·b`` ≤ 16,129 and the division by 128 is
    exact in binary, so the floor is the engine's ``/ 128``."""
    half = acc_stm.shape[1] // 2
    parts = []
    for acc in (acc_stm, acc_nstm):
        c = acc.to(torch.float32).clamp(0, 127)
        parts.append(torch.floor(c[:, :half] * c[:, half:] * (1 / 128)))
    return torch.cat(parts, 1)


def _weights_t(net: SFNNv5IntegerNet, name: str) -> list[torch.Tensor]:
    """The layer's per-stack weights as (K, M) float32 matrices, made once per net."""
    def build(w):
        return [w[s].to(torch.float32).T.contiguous() for s in range(w.shape[0])]
    return cached(net, ("sf_wt", name), (getattr(net, name),), build)


def _affine(net: SFNNv5IntegerNet, name: str, x: torch.Tensor, counts: list[int]) -> torch.Tensor:
    """A bucketed affine layer, exact, on positions sorted by bucket (``counts[s]`` positions of
    stack s, in order): x (N, K) float32 holding integers 0..127 -> (N, M) int64, bias added,
    wrapped to int32. Each product runs in float32: K·127·128 < 2^24 for K ≤ 1,031 (fc_0 at L1
    1,024; fc_1, fc_2: K = 32), so every partial sum is an exact integer; larger L1 in float64."""
    wt = _weights_t(net, name + "_weight")
    b = getattr(net, name + "_bias").to(torch.int64)
    k = wt[0].shape[0]
    exact32 = k * 127 * 128 < (1 << 24)
    out = torch.empty((x.shape[0], wt[0].shape[1]), dtype=torch.int64)
    start = 0
    for s, c in enumerate(counts):
        if c:
            xs = x[start:start + c]
            y = xs @ wt[s] if exact32 else xs.double() @ wt[s].double()
            out[start:start + c] = y.to(torch.int64) + b[s]
            start += c
    return _wrap(out, 32)


def layer_stack(net: SFNNv5IntegerNet, x0: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
    """Steps 4–6: transformed features (N, L1) (exact integers, any dtype) and layer-stack
    indices (N,) int64 -> ``positional`` (N,) int64 (int32 range). Positions are grouped by
    stack once (one product per stack and layer) and put back in order at the end."""
    n = x0.shape[0]
    if n == 0:
        return torch.zeros(0, dtype=torch.int64)
    order = torch.argsort(bucket, stable=True)
    counts = torch.bincount(bucket, minlength=LAYER_STACKS).tolist()
    s0 = _affine(net, "fc0", x0.to(torch.float32).index_select(0, order), counts)
    h = s0[:, :FC0_OUTPUTS - 1]
    sqr = torch.clamp((h * h) >> (2 * WEIGHT_SCALE_BITS + 7), max=127)
    crelu = (h >> WEIGHT_SCALE_BITS).clamp(0, 127)
    x1 = torch.cat([sqr, crelu, torch.zeros((n, FC1_PADDED - FC1_INPUTS), dtype=torch.int64)], 1)
    s1 = _affine(net, "fc1", x1.to(torch.float32), counts)
    x2 = (s1 >> WEIGHT_SCALE_BITS).clamp(0, 127)
    s2 = _affine(net, "fc2", x2.to(torch.float32), counts)[:, 0]
    fwd = _tdiv(_wrap(s0[:, FC0_OUTPUTS - 1] * SKIP_NUM, 32), SKIP_DEN)
    out = torch.empty(n, dtype=torch.int64)
    out[order] = _wrap(s2 + fwd, 32)
    return out


def psqt_value(ps_stm: torch.Tensor, ps_nstm: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
    """Step 7's ``psqt``: (N, 8) PSQT sums of each perspective -> (N,) int64."""
    b = bucket.view(-1, 1)
    return _tdiv(_wrap(ps_stm.gather(1, b)[:, 0] - ps_nstm.gather(1, b)[:, 0], 32), 2)


def value_from_indices(net: SFNNv5IntegerNet, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor,
                       return_parts: bool = False):
    """The engine's internal value ``NNUE::evaluate(pos, false)`` (steps 1–7): stm, nstm (N, A)
    int32 −1 padded, bucket (N,) int64 in 0..7 -> (N,) int64, side to move's point of view
    (with return_parts, also {"psqt", "positional"} (N,) int64, before the division by 16)."""
    a_s, p_s = accumulate(net, stm)
    a_n, p_n = accumulate(net, nstm)
    return _value(net, a_s, p_s, a_n, p_n, bucket, return_parts)


def _value(net: SFNNv5IntegerNet, a_s, p_s, a_n, p_n, bucket: torch.Tensor, return_parts: bool = False):
    """Steps 2–7 from both perspectives' int16 accumulators (N, L1) (float32 or integer, exact,
    already wrapped) and PSQT sums (N, 8) int64 (int32 range): -> (N,) int64 internal values
    (and the parts of :func:`value_from_indices`)."""
    bucket = bucket.long()
    positional = layer_stack(net, transform(a_s, a_n), bucket)
    psqt = psqt_value(p_s, p_n, bucket)
    v = _tdiv(_wrap(psqt + positional, 32), OUTPUT_SCALE)
    if return_parts:
        return v, {"psqt": psqt, "positional": positional, "acc": torch.stack([a_s, a_n], 1).to(torch.int64)}
    return v


def to_cp(value: torch.Tensor) -> torch.Tensor:
    """Internal values -> UCI centipawns, ``v·100 / 361`` truncating (``UCI::value``)."""
    return _tdiv(value * 100, NORMALIZE_TO_PAWN)


def forward_int(net: SFNNv5IntegerNet, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor,
                return_parts: bool = False):
    """Exact integer eval from feature indices, the evaluator interface of every kind: stm, nstm
    (N, A) int32 −1 padded, bucket (N,) int64 -> (N,) int64 UCI centipawns, stm POV (with
    return_parts, also {"value": internal values, "psqt", "positional", "acc", "out"})."""
    v, parts = value_from_indices(net, stm, nstm, bucket, True)
    cp = to_cp(v)
    if return_parts:
        return cp, parts | {"value": v, "out": parts["psqt"] + parts["positional"]}
    return cp


# ------------------------------------------------------------- from incremental accumulators
# The incremental accumulator (nnue.inference.incremental) keeps, per perspective, one int32 row
# of L1 + 8 columns: the feature transformer's sum (bias included) in columns 0..L1-1 and the
# PSQT sums in columns L1..L1+7, updated by adding and subtracting rows of one (F, L1 + 8) int32
# table. The engine adds in int16 (FT) and int32 (PSQT) and wraps; addition modulo 2^16 and 2^32
# does not depend on the order or on intermediate wraps, so the int16 accumulator is the int32
# column sum wrapped to int16 once at eval time, and the PSQT column is NumPy's wrapping int32
# sum itself: both equal :func:`accumulate`'s wrapped sums bit for bit (the FT column sums stay
# far inside int32: at most 32 features, each ≤ 2^15, plus the bias).

def accumulator_table(net: SFNNv5IntegerNet) -> tuple[np.ndarray, np.ndarray]:
    """The incremental accumulator's rows: (w (F, L1 + 8) int32 = ``ft_weight`` then ``psqt``
    columns, b (L1 + 8,) int32 = ``ft_bias`` then 8 zeros), NumPy, made once per net (again when
    a tensor is replaced or changed in place)."""
    def build(ft_w, ft_b, ps):
        w = np.concatenate((ft_w.numpy().astype(np.int32), ps.numpy().astype(np.int32)), axis=1)
        b = np.concatenate((ft_b.numpy().astype(np.int32), np.zeros(ps.shape[1], dtype=np.int32)))
        return np.ascontiguousarray(w), b
    return cached(net, "sf_acc_table", (net.ft_weight, net.ft_bias, net.psqt), build)


def split_accumulator(net: SFNNv5IntegerNet, acc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, L1 + 8) integer accumulators of one perspective -> (the int16 accumulator (N, L1)
    int64, wrapped; the PSQT sums (N, 8) int64, wrapped to int32), as :func:`accumulate` gives
    them."""
    L1 = net.arch["hidden"]
    acc = acc.to(torch.int64)
    return _wrap(acc[:, :L1], 16), _wrap(acc[:, L1:], 32)


def forward_from_accumulators(net: SFNNv5IntegerNet, acc_stm: torch.Tensor, acc_nstm: torch.Tensor,
                              bucket: torch.Tensor, return_parts: bool = False):
    """Steps 2–8 from the incremental accumulators: (N, L1 + 8) int32 (or int64) rows of each
    perspective (FT columns then PSQT columns, see :func:`accumulator_table`; any value, wrapped
    here to int16 and int32) and (N,) int64 layer stacks -> (N,) int64 UCI centipawns, stm POV
    (with return_parts, also the parts of :func:`forward_int`). Never raises on overflow: the
    engine's sums wrap."""
    a_s, p_s = split_accumulator(net, acc_stm)
    a_n, p_n = split_accumulator(net, acc_nstm)
    v, parts = _value(net, a_s, p_s, a_n, p_n, bucket, True)
    cp = to_cp(v)
    if return_parts:
        return cp, parts | {"value": v, "out": parts["psqt"] + parts["positional"]}
    return cp


def accumulator_layers(net: SFNNv5IntegerNet) -> list[tuple]:
    """Per layer stack, the matrices and biases of :func:`evaluate_accumulator`: fc_0's weights
    in float32 when every partial sum is exact there (L1·127·128 < 2^24: L1 ≤ 1,024 among the
    multiples of 32), else float64; fc_1's (its 30 used input columns; the padding columns meet zero inputs) and
    fc_2's in float64; biases int64 (fc_2's a Python int); and for fc_0 and fc_1 whether a sum
    can leave int32 at all (Σ|w|·x_max + |b| over each output; x ≤ 126 into fc_0, ≤ 127 into
    fc_1): where it cannot, the wrap is skipped (it would change nothing)."""
    def may_wrap(w, b, x_max):  # whether some sum can leave int32: max over outputs of Σ|w|·x_max + |b|
        return int((w.long().abs().sum(1) * x_max + b.long().abs()).max()) >= 1 << 31

    def build(w0, b0, w1, b1, w2, b2):
        ft = np.float32 if w0.shape[2] * 127 * 128 < (1 << 24) else np.float64
        return [(w0[s].numpy().astype(ft), b0[s].numpy().astype(np.int64), may_wrap(w0[s], b0[s], 126),
                 np.ascontiguousarray(w1[s, :, :FC1_INPUTS].double().numpy()), b1[s].numpy().astype(np.int64),
                 may_wrap(w1[s, :, :FC1_INPUTS], b1[s], 127),
                 w2[s, 0].double().numpy(), int(b2[s, 0])) for s in range(w0.shape[0])]
    return cached(net, "sf_one", (net.fc0_weight, net.fc0_bias, net.fc1_weight, net.fc1_bias, net.fc2_weight,
                                  net.fc2_bias), build)


def tdiv_int(a: int, b: int) -> int:
    """C's ``a / b`` on Python ints (truncating toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _wrap_int(v: int, bits: int) -> int:
    half = 1 << (bits - 1)
    return ((v + half) & ((1 << bits) - 1)) - half


def _wrap32_np(a: np.ndarray) -> np.ndarray:
    """int64 array -> the same values wrapped to int32 (as int64)."""
    return ((a + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def evaluate_accumulator(net: SFNNv5IntegerNet, acc: np.ndarray, stm: int, bucket: int,
                         layers: list[tuple] | None = None) -> int:
    """One position's UCI centipawns (stm POV) from its incremental accumulators: ``acc`` (2,
    L1 + 8) int32 NumPy, white's perspective in row 0 (see :func:`accumulator_table`); ``stm``
    0 white / 1 black to move; ``bucket`` the layer stack 0..7. The formula of
    :func:`forward_from_accumulators` (steps 2–8) on NumPy arrays and Python ints, for one
    position without torch's per-call cost (~25 us against ~480 us at L1 1,024, one core,
    ``nnue bench incremental --kind sfnnv5``; tested
    ``torch.equal`` against it and the batch path in tests/inference/test_incremental_sfnnv5.py).
    fc_0 runs in float32 or float64 (see :func:`accumulator_layers`), fc_1 and fc_2 in float64:
    every partial sum is an integer the type holds exactly. ``layers``: the net's
    :func:`accumulator_layers`, when the caller keeps them (the incremental accumulator does,
    saving the ~5 us of checking the net's tensors for changes on every call)."""
    L1 = acc.shape[1] - PSQT_BUCKETS
    half = L1 // 2
    w0, b0, wrap0, w1, b1, wrap1, w2, b2 = (layers or accumulator_layers(net))[bucket]
    # int32 -> int16: NumPy's cast wraps mod 2^16 (the engine's int16 adds); np.maximum and
    # np.minimum rather than np.clip, which costs ~3 us more a call on arrays this small
    a = acc[:, :L1].astype(np.int16)
    np.maximum(a, 0, out=a)
    np.minimum(a, 127, out=a)
    p = a[:, :half] * a[:, half:]  # ≤ 127² < 2^15: exact in int16
    p >>= 7
    x0 = (p if stm == 0 else p[::-1]).astype(w0.dtype).reshape(-1)  # stm's half first
    s0 = (w0 @ x0).astype(np.int64) + b0
    if wrap0:
        s0 = _wrap32_np(s0)
    h = s0[:FC0_OUTPUTS - 1]
    x1 = np.concatenate((np.minimum((h * h) >> (2 * WEIGHT_SCALE_BITS + 7), 127),
                         np.minimum(np.maximum(h >> WEIGHT_SCALE_BITS, 0), 127))).astype(np.float64)
    s1 = (w1 @ x1).astype(np.int64) + b1
    if wrap1:
        s1 = _wrap32_np(s1)
    x2 = np.minimum(np.maximum(s1 >> WEIGHT_SCALE_BITS, 0), 127).astype(np.float64)
    s2 = _wrap_int(int(w2 @ x2) + b2, 32)
    fwd = tdiv_int(_wrap_int(int(s0[FC0_OUTPUTS - 1]) * SKIP_NUM, 32), SKIP_DEN)
    positional = _wrap_int(s2 + fwd, 32)
    psqt = tdiv_int(_wrap_int(int(acc[stm, L1 + bucket]) - int(acc[1 - stm, L1 + bucket]), 32), 2)
    v = tdiv_int(_wrap_int(psqt + positional, 32), OUTPUT_SCALE)
    return tdiv_int(v * 100, NORMALIZE_TO_PAWN)


def _load_kernels():
    from . import compiled  # numba: imported on first use only

    return compiled


def _kernels(backend: str | None, cpu: bool):
    """The compiled kernel (:mod:`nnue.inference.kinds.sfnnv5.compiled`) when ``backend`` asks for
    it and it can run here, else None (:func:`nnue.inference.backends.kernels`)."""
    return backends.kernels(backend, cpu, _load_kernels)


def values(net: SFNNv5IntegerNet, boards: torch.Tensor, chunk: int = 4096, backend: str | None = None) -> torch.Tensor:
    """Internal values of packed boards: (N, 32) uint8 -> (N,) int64, stm POV.

    On CPU by default (``backend``: :data:`nnue.inference.backends.BACKENDS`, "auto",
    "compiled" or "torch"; None: its ``DEFAULT_BACKEND``) steps 1–7 run in one compiled pass
    per board (:func:`nnue.inference.kinds.sfnnv5.compiled.values`: int16 register lanes with
    wrapping adds for the feature transformer, int32 lanes for the layers, each position's own
    layer stack; ~8× the torch path, ``bench/results/infer_sfnnv5_cpu.json``); otherwise, or
    where it does not apply, the torch steps (:func:`value_from_indices`, ``chunk`` positions a
    call). Same integers either way (tests/inference/test_compiled_sfnnv5.py). Raises
    ValueError for boards that are not (N, 32) uint8 or that HalfKAv2_hm cannot encode."""
    from nnue.pipeline.features.board_tensor import check_boards

    check_boards(boards)
    comp = _kernels(backend, boards.device.type == "cpu")
    if comp is not None and boards.shape[0]:
        res = comp.values(net, boards)
        if res is not None:
            return res[0]
        backends.not_applicable(backend)
    fs, buckets = net.features, net.buckets
    out = []
    for s in range(0, boards.shape[0], chunk):
        b = boards[s:s + chunk]
        stm, nstm = fs.encode(b)
        out.append(value_from_indices(net, stm, nstm, buckets.of(b)))
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.int64)


def evaluate_small(net: SFNNv5IntegerNet, boards: torch.Tensor) -> list[int] | None:
    """A few positions without the batch machinery (:func:`nnue.inference.api.evaluate_net`
    sends calls of at most ``SMALL_BATCH`` CPU boards here first): (N, 32) uint8 -> N Python
    ints, UCI centipawns, stm POV, the values of :func:`evaluate`, from
    :func:`nnue.inference.kinds.sfnnv5.compiled.values`; None when the compiled kernel cannot run
    (the API then evaluates one by one from scratch, :func:`nnue.inference.incremental.evaluate_one`)."""
    comp = _kernels(None, boards.device.type == "cpu")
    res = None if comp is None else comp.values(net, boards)
    return None if res is None else [tdiv_int(v * 100, NORMALIZE_TO_PAWN) for v in res[0].tolist()]


def evaluate(net: SFNNv5IntegerNet, boards: torch.Tensor, chunk: int = 4096, backend: str | None = None) -> torch.Tensor:
    """Integer evals of packed boards: (N, 32) uint8 -> (N,) int64 UCI centipawns, stm POV
    (:func:`values`, then :func:`to_cp`; ``backend`` as :func:`values`)."""
    return to_cp(values(net, boards, chunk, backend))
