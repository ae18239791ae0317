"""Stockfish 19's network (SFNNv16) as an integer net, evaluated exactly as the engine does.

Architecture and arithmetic (Stockfish source at master 762dd1da, the architecture and ``.nnue``
version of tag ``sf_19``: ``nnue_architecture.h``, ``nnue_feature_transformer.h``,
``nnue_accumulator.cpp``, ``network.cpp``, ``layers/*.h``, ``evaluate.cpp``, ``uci.cpp``;
``shared/SF19.md``). All integers, C semantics: ``>>`` is an arithmetic shift, ``/`` truncates
toward zero, and int16/int32 sums wrap as the engine's SIMD additions do:

1. feature transformer, per perspective p, over the 86,896 inputs of the ``sfnnv16`` feature set
   (Full_Threats 0..59,807, PP_3Wide 59,808..64,367, HalfKAv2_hm 64,368..86,895):
   ``acc_p = ft_bias + Σ threat_weight[f] (int8 rows: threats and pawn pairs) + Σ ft_weight[f]``
   (int16 rows: HalfKAv2_hm), int16, wrapping; ``psqt_p = Σ threat_psqt[f] + Σ psqt[f]`` (int32,
   8 values, one per PSQT bucket);
2. transformed features, stm perspective first: for j < L1/2,
   ``x0[j] = clamp(acc[j], 0, 255) · clamp(acc[j + L1/2], 0, 255) >> 9`` (u8, ≤ 127);
3. bucket ``b = (pieces − 1) / 4`` picks the layer stack and the PSQT column;
4. ``s0 = fc0_bias[b] + fc0_weight[b] · x0`` (32 int32 sums);
   ``x1 = [min(127, s0[i]² >> 21)] ++ [clamp(s0[i] >> 7, 0, 127)]`` (SqrClippedReLU and
   ClippedReLU at WeightScaleBits + 1, 64 values);
5. ``s1 = fc1_bias[b] + fc1_weight[b] · x1`` (32); ``x2 = [min(127, s1² >> 19)] ++
   [clamp(s1 >> 6, 0, 127)]`` (64);
6. ``s2 = fc2_bias[b] + fc2_weight[b] · (x1 ++ x2)`` (one sum over 128 inputs);
   ``fwd = s2 + s0[30] − s0[31]`` (the skip, int32); ``positional = fwd·9,600 / 16,384``
   (600·OutputScale / (HiddenOneVal·2^WeightScaleBits·2), the product in int64);
7. ``psqt = (psqt_stm[b] − psqt_nstm[b]) / 2``; the engine's ``(psqt, positional)`` are these
   each divided by OutputScale 16 (``Network::evaluate``), and its internal value is their sum,
   side to move's point of view;
8. UCI centipawns ``cp = round(100·v / a(material))`` (``UCIEngine::to_cp``: a cubic of the
   material count P + 3N + 3B + 5R + 9Q clamped to 17..78, over 58; :func:`win_rate_a`).

Step 1 runs as a float32 ``embedding_bag`` (≤ 289 terms, int8 terms ≤ 2^7 and at most 32 + 1
int16 terms ≤ 2^15: every partial sum below 2^21, exact) and a float64 one for the int32 PSQT
sums; the layers run in float32 where K·127·128 < 2^24 (fc_0 at L1 ≤ 1,024), else float64; the
rest on exact int64 tensors.

Tensors (``net.safetensors``, layer stacks bucket-major): ``ft_bias`` int16 (L1,),
``threat_weight`` int8 (64,368, L1) (the engine's ``threatAndPpWeights``: Full_Threats rows then
PP_3Wide rows), ``threat_psqt`` int32 (64,368, 8), ``ft_weight`` int16 (22,528, L1) (HalfKAv2_hm),
``psqt`` int32 (22,528, 8), ``fc0_bias`` int32 (8, 32), ``fc0_weight`` int8 (8, 32, L1),
``fc1_bias`` int32 (8, 32), ``fc1_weight`` int8 (8, 32, 64), ``fc2_bias`` int32 (8, 1),
``fc2_weight`` int8 (8, 1, 128).
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

#: the inputs of SFNNv16, per perspective, in the order of the file and of the feature set
THREAT_INPUTS = 59808
PP_INPUTS = 4560
PSQ_INPUTS = 22528
INT8_INPUTS = THREAT_INPUTS + PP_INPUTS       # 64,368 rows of int8 weights, then int16 rows
NUM_INPUTS = INT8_INPUTS + PSQ_INPUTS         # 86,896
#: the feature set's registry name (Full_Threats + PP_3Wide + HalfKAv2_hm)
FEATURE_SET = "sfnnv16"
OUTPUT_BUCKETS = "SFPieceCount<8>"
FC0_OUTPUTS = 32        # L2: 30 go on as activations only, 30 − 31 is also the skip
FC1_INPUTS = 64         # SqrClippedReLU and ClippedReLU of fc_0's 32 outputs
FC1_OUTPUTS = 32        # L3
FC2_INPUTS = 128        # both activated layers, 64 + 64
LAYER_STACKS = 8
PSQT_BUCKETS = 8
STOCKFISH_L1 = 1024
OUTPUT_SCALE = 16       # OutputScale
WEIGHT_SCALE_BITS = 6   # WeightScaleBits
FT_MAX = 255            # FtMaxVal
HIDDEN_ONE = 128        # HiddenOneVal
OUT_NUM = 600 * OUTPUT_SCALE                            # 9,600
OUT_DEN = HIDDEN_ONE * (1 << WEIGHT_SCALE_BITS) * 2     # 16,384
#: the defaults of the kind's header quantisation (nominal: the arithmetic is fixed)
SCHEME = QuantScheme(qa=255, qb=128, scale=400)
#: PieceValue of Stockfish 19 (types.h), for the material term of its final evaluation
PIECE_VALUES = (208, 781, 825, 1276, 2538)
#: evaluate.cpp's range: VALUE_TB_WIN_IN_MAX_PLY − 1 (32000 − 246 − 1 − 246 − 1)
VALUE_LIMIT = 31506
#: the WDL model's cubic of a (uci.cpp ``win_rate_params``) as Stockfish 19 is built: read from the
#: f64 constants of its WebAssembly build (stockfish-web 0.5.0 ``sf_19.wasm``; master 762dd1da,
#: before the release's refit, has -72.32565836, 185.93832038, -144.58862193, 416.44950446)
_AS = (-142.72052667, 372.35176398, -340.71073572, 415.23490212)
#: ``Eval::evaluate``'s blend of Stockfish 19 (the same build's i64 constants; 77,871 at master
#: 762dd1da): v = nnue·(EVAL_BASE + material) / EVAL_BASE
EVAL_BASE = 91000


def _wrap(t: torch.Tensor, bits: int) -> torch.Tensor:
    """Two's-complement wrap of an int64 tensor to ``bits`` bits; ``t`` itself when in range."""
    half = 1 << (bits - 1)
    if t.numel() == 0 or (int(t.min()) >= -half and int(t.max()) < half):
        return t
    return torch.remainder(t + half, 1 << bits) - half


def _tdiv(t: torch.Tensor, d: int) -> torch.Tensor:
    return torch.div(t, d, rounding_mode="trunc")


def _tdiv_int(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _round_half_away(x: float) -> int:
    """C's ``std::round``: halves away from zero."""
    return int(np.floor(x + 0.5)) if x >= 0 else -int(np.floor(-x + 0.5))


def win_rate_a(material: int) -> float:
    """``a`` of Stockfish 19's WDL model (uci.cpp ``win_rate_params``) for a material count
    P + 3N + 3B + 5R + 9Q of both sides: the internal value that is 100 centipawns."""
    m = min(max(int(material), 17), 78) / 58.0
    return ((_AS[0] * m + _AS[1]) * m + _AS[2]) * m + _AS[3]


def win_rate_a_tensor(material: torch.Tensor) -> torch.Tensor:
    """:func:`win_rate_a` of a tensor of material counts: (N,) float64."""
    m = material.double().clamp(17, 78) / 58.0
    return ((_AS[0] * m + _AS[1]) * m + _AS[2]) * m + _AS[3]


def to_cp_int(v: int, material: int) -> int:
    """``UCIEngine::to_cp``: an internal value -> centipawns, ``round(100·v / a)``."""
    return _round_half_away(100 * int(v) / win_rate_a(material))


def to_cp(value: torch.Tensor, material: torch.Tensor) -> torch.Tensor:
    """:func:`to_cp_int` of tensors: (N,) int64 internal values and (N,) material counts ->
    (N,) int64 centipawns (round half away from zero, as ``std::round``)."""
    x = value.double() * 100 / win_rate_a_tensor(material)
    return (torch.sign(x) * torch.floor(x.abs() + 0.5)).to(torch.int64)


#: material weight of each HalfKAv2_hm plane (2·type + not-own; 10 = kings): P N B R Q = 1 3 3 5 9
_PLANE_MATERIAL = torch.tensor([1, 1, 3, 3, 3, 3, 5, 5, 9, 9, 0], dtype=torch.int64)


def material_of_indices(indices: torch.Tensor) -> torch.Tensor:
    """The material count P + 3N + 3B + 5R + 9Q of both sides from one perspective's
    ``sfnnv16`` feature indices (N, A) int32, −1 padded (its HalfKAv2_hm part names every piece
    once): (N,) int64."""
    idx = indices.long()
    psq = idx >= INT8_INPUTS
    plane = torch.where(psq, ((idx - INT8_INPUTS) % 704) // 64, torch.full_like(idx, 10))
    return _PLANE_MATERIAL.to(idx.device)[plane].sum(1)


def make_sfnnv16_arch(feature_set: str = FEATURE_SET, output_buckets: str = OUTPUT_BUCKETS,
                      hidden: int = STOCKFISH_L1, description: str = "") -> dict:
    """The ``architecture`` dict of an sfnnv16 net: L1 = ``hidden`` (a multiple of 64; 1,024 is
    what Stockfish 19 loads), the engine's description string. Raises ValueError for another
    feature set, other output buckets or an L1 the layout cannot hold."""
    fs = get_feature_set(feature_set)
    buckets = parse_output_buckets(output_buckets)
    if fs.name != FEATURE_SET:
        raise ValueError(f"sfnnv16 nets read the {FEATURE_SET} features (Full_Threats + PP_3Wide + HalfKAv2_hm), "
                         f"not {fs.name}")
    if fs.num_inputs != NUM_INPUTS:
        raise ValueError(f"feature set {fs.name} has {fs.num_inputs} inputs, sfnnv16 {NUM_INPUTS}")
    if buckets.name != OUTPUT_BUCKETS:
        raise ValueError(f"sfnnv16 nets have 8 layer stacks chosen by (pieces - 1) / 4 "
                         f"(output_buckets {OUTPUT_BUCKETS}), not {buckets.name}")
    if not isinstance(hidden, int) or isinstance(hidden, bool) or hidden < 64 or hidden % 64:
        raise ValueError(f"sfnnv16 L1 (model.hidden) is {hidden}: a positive multiple of 64 (Stockfish 19: 1024)")
    return {"kind": "sfnnv16", "feature_set": fs.name, "feature_hash": fs.hash, "num_inputs": fs.num_inputs,
            "hidden": hidden, "output_buckets": buckets.name, "num_buckets": buckets.count,
            "l1_outputs": FC0_OUTPUTS, "l2_outputs": FC1_OUTPUTS, "psqt_buckets": PSQT_BUCKETS,
            "description": description}


@dataclass
class SFNNv16IntegerNet(NetFile):
    """A Stockfish 19 network (see the module docstring for the tensors and the formula)."""

    arch: dict
    scheme: QuantScheme
    ft_bias: torch.Tensor
    threat_weight: torch.Tensor
    threat_psqt: torch.Tensor
    ft_weight: torch.Tensor
    psqt: torch.Tensor
    fc0_bias: torch.Tensor
    fc0_weight: torch.Tensor
    fc1_bias: torch.Tensor
    fc1_weight: torch.Tensor
    fc2_bias: torch.Tensor
    fc2_weight: torch.Tensor
    provenance: dict = field(default_factory=dict)

    kind = "sfnnv16"
    ARCH_FIELDS = {"kind": str, "feature_set": str, "feature_hash": str, "num_inputs": int, "hidden": int,
                   "output_buckets": str, "num_buckets": int, "l1_outputs": int, "l2_outputs": int,
                   "psqt_buckets": int, "description": str}
    ARCH_ACTIVATIONS = {}  # no activation field: the arithmetic is fixed

    def tensors(self) -> dict[str, torch.Tensor]:
        return {k: getattr(self, k) for k in self.tensor_specs(self.arch)}

    @staticmethod
    def tensor_specs(arch: dict) -> dict[str, tuple[torch.dtype, tuple]]:
        """name -> (dtype, shape) of every tensor a net of ``arch`` holds."""
        L1 = arch["hidden"]
        S = LAYER_STACKS
        return {"ft_bias": (torch.int16, (L1,)),
                "threat_weight": (torch.int8, (INT8_INPUTS, L1)), "threat_psqt": (torch.int32, (INT8_INPUTS, PSQT_BUCKETS)),
                "ft_weight": (torch.int16, (PSQ_INPUTS, L1)), "psqt": (torch.int32, (PSQ_INPUTS, PSQT_BUCKETS)),
                "fc0_bias": (torch.int32, (S, FC0_OUTPUTS)), "fc0_weight": (torch.int8, (S, FC0_OUTPUTS, L1)),
                "fc1_bias": (torch.int32, (S, FC1_OUTPUTS)), "fc1_weight": (torch.int8, (S, FC1_OUTPUTS, FC1_INPUTS)),
                "fc2_bias": (torch.int32, (S, 1)), "fc2_weight": (torch.int8, (S, 1, FC2_INPUTS))}

    @staticmethod
    def raw_layout() -> str:
        return "Stockfish 19 .nnue (SFNNv16)"

    def raw_bytes(self) -> bytes:
        """The engine file: Stockfish 19's ``.nnue`` layout (:mod:`nnue.inference.kinds.sfnnv16.codec`)."""
        from .codec import nnue_bytes

        return nnue_bytes(file_tensors(self), self.arch.get("description", ""))

    def layers(self) -> list[dict]:
        """Per-layer dtypes and shifts (written into export.json)."""
        return [
            {"layer": "ft", "weight": "int16 (HalfKAv2_hm), int8 (Full_Threats, PP_3Wide)", "bias": "int16",
             "scale": 256, "sum": "int16 (wrapping)", "psqt": "int32, scale 9600",
             "output": "u8: clamp(a,0,255)*clamp(b,0,255) >> 9 (pairwise)"},
            {"layer": "fc_0", "weight": "int8", "bias": "int32", "weight_scale": 128, "bias_scale": 16384,
             "outputs": "32 -> SqrClippedReLU (x*x >> 21) and ClippedReLU (x >> 7); skip 30 - 31"},
            {"layer": "fc_1", "weight": "int8", "bias": "int32", "weight_scale": 64, "bias_scale": 8192,
             "outputs": "32 -> SqrClippedReLU (x*x >> 19) and ClippedReLU (x >> 6)"},
            {"layer": "fc_2", "weight": "int8", "bias": "int32", "weight_scale": 128, "bias_scale": 16384,
             "inputs": "128 (both activated layers)"},
            {"layer": "eval", "positional": "(fc_2 + skip) * 9600 / 16384 / 16", "psqt": "(stm - nstm) / 2 / 16",
             "cp": "round(100 * v / a(material))"},
        ]


def file_tensors(net: SFNNv16IntegerNet) -> dict[str, torch.Tensor]:
    """The tensors of the engine file (:func:`nnue.inference.kinds.sfnnv16.codec.tensor_specs` names): the
    int8 rows split into threat and pawn-pair blocks, the HalfKAv2_hm rows as ``halfka_*``."""
    t = net.tensors()
    return {"ft_bias": t["ft_bias"],
            "threat_weight": t["threat_weight"][:THREAT_INPUTS], "threat_psqt": t["threat_psqt"][:THREAT_INPUTS],
            "pp_weight": t["threat_weight"][THREAT_INPUTS:], "pp_psqt": t["threat_psqt"][THREAT_INPUTS:],
            "halfka_weight": t["ft_weight"], "halfka_psqt": t["psqt"],
            **{k: t[k] for k in ("fc0_bias", "fc0_weight", "fc1_bias", "fc1_weight", "fc2_bias", "fc2_weight")}}


def read_nnue(path, data: bytes | None = None) -> SFNNv16IntegerNet:
    """Read a Stockfish 19 ``.nnue`` file into an integer net (kind sfnnv16; the description kept
    in ``arch["description"]``; L1 from the feature transformer's hash). Every check of the file
    is :func:`nnue.inference.kinds.sfnnv16.codec.parse_nnue`'s (version, hashes, sizes, LEB128 blocks, the
    end), each a :class:`~nnue.inference.net.NetFormatError` naming the file, the block and its
    byte offset. Raises NetFormatError for an L1 that is not a multiple of 64."""
    from ...net import NetFormatError
    from .codec import parse_nnue

    p = parse_nnue(path, data)
    try:
        arch = make_sfnnv16_arch(hidden=p["l1"], description=p["description"])
    except ValueError as e:
        raise NetFormatError(f"{path}: {e}") from None
    return SFNNv16IntegerNet(arch, SCHEME, p["ft_bias"],
                             torch.cat([p["threat_weight"], p["pp_weight"]]), torch.cat([p["threat_psqt"], p["pp_psqt"]]),
                             p["halfka_weight"], p["halfka_psqt"],
                             *(p[k] for k in ("fc0_bias", "fc0_weight", "fc1_bias", "fc1_weight", "fc2_bias",
                                              "fc2_weight")),
                             provenance={"imported_from": str(p["path"]),
                                         "stockfish_hash": f"0x{p['header_hash']:08X}"})


# ------------------------------------------------------------------------- the evaluation
def _ft_f32(net: SFNNv16IntegerNet) -> torch.Tensor:
    """(F + 1, L1) float32: row 0 zeros (for the −1 padding), then the int8 rows, then the int16."""
    def build(w8, w16):
        return torch.cat((torch.zeros(1, w8.shape[1]), w8.float(), w16.float())).contiguous()
    return cached(net, "sf16_ft", (net.threat_weight, net.ft_weight), build)


def _psqt_f64(net: SFNNv16IntegerNet) -> torch.Tensor:
    def build(p8, p16):
        return torch.cat((torch.zeros(1, p8.shape[1], dtype=torch.float64), p8.double(), p16.double())).contiguous()
    return cached(net, "sf16_psqt", (net.threat_psqt, net.psqt), build)


def accumulate(net: SFNNv16IntegerNet, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Step 1: (N, A) int32 feature indices, −1 padded -> (accumulator (N, L1) float32 holding
    exact integers in the int16 range, wrapped as the engine's int16 adds; PSQT sums (N, 8) int64
    in the int32 range). Raises ValueError for an index outside the 86,896 inputs."""
    idx = indices.long().clamp(min=-1) + 1
    n = idx.shape[0]
    if n == 0:
        return torch.zeros((0, net.arch["hidden"])), torch.zeros((0, PSQT_BUCKETS), dtype=torch.int64)
    if idx.numel() and int(indices.max()) >= NUM_INPUTS:
        raise ValueError(f"feature index {int(indices.max())} out of range {NUM_INPUTS}")
    acc = torch.nn.functional.embedding_bag(idx, _ft_f32(net), mode="sum")
    acc.add_(net.ft_bias.to(torch.float32))
    if float(acc.min()) < -32768 or float(acc.max()) > 32767:
        acc = _wrap(acc.to(torch.int64), 16).to(torch.float32)
    ps = torch.nn.functional.embedding_bag(idx, _psqt_f64(net), mode="sum").to(torch.int64)
    return acc, _wrap(ps, 32)


def transform(acc_stm: torch.Tensor, acc_nstm: torch.Tensor) -> torch.Tensor:
    """Step 2: accumulators (N, L1) (float32 or integer, exact) -> transformed features (N, L1)
    float32 holding the integers 0..127, stm first: ``a·b`` ≤ 65,025 is exact in float32 and the
    division by 512 is exact in binary, so the floor is the engine's ``>> 9``."""
    half = acc_stm.shape[1] // 2
    parts = []
    for acc in (acc_stm, acc_nstm):
        c = acc.to(torch.float32).clamp(0, FT_MAX)
        parts.append(torch.floor(c[:, :half] * c[:, half:] * (1 / 512)))
    return torch.cat(parts, 1)


def _weights_t(net: SFNNv16IntegerNet, name: str) -> list[torch.Tensor]:
    """The layer's per-stack weights as (K, M) float matrices (float32 where every partial sum
    of K products ≤ 127·128 is below 2^24, else float64), made once per net."""
    def build(w):
        k = w.shape[2]
        dt = torch.float32 if k * 127 * 128 < (1 << 24) else torch.float64
        return [w[s].to(dt).T.contiguous() for s in range(w.shape[0])]
    return cached(net, ("sf16_wt", name), (getattr(net, name),), build)


def _affine(net: SFNNv16IntegerNet, name: str, x: torch.Tensor, counts: list[int]) -> torch.Tensor:
    """A bucketed affine layer, exact, on positions sorted by bucket (``counts[s]`` positions of
    stack s, in order): x (N, K) holding integers 0..127 -> (N, M) int64, bias added, wrapped to
    int32 (the engine's int32 sums)."""
    wt = _weights_t(net, name + "_weight")
    b = getattr(net, name + "_bias").to(torch.int64)
    x = x.to(wt[0].dtype)
    out = torch.empty((x.shape[0], wt[0].shape[1]), dtype=torch.int64)
    start = 0
    for s, c in enumerate(counts):
        if c:
            out[start:start + c] = (x[start:start + c] @ wt[s]).to(torch.int64) + b[s]
            start += c
    return _wrap(out, 32)


def _activate(s: torch.Tensor, shift: int) -> torch.Tensor:
    """SqrClippedReLU then ClippedReLU of int32 sums (N, M) int64 at ``shift`` (WeightScaleBits
    of the layer): (N, 2·M) int64 in 0..127."""
    sqr = torch.clamp((s * s) >> (2 * shift + 7), max=127)
    return torch.cat([sqr, (s >> shift).clamp(0, 127)], 1)


def layer_stack(net: SFNNv16IntegerNet, x0: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
    """Steps 4–6: transformed features (N, L1) (exact integers, any dtype) and layer-stack
    indices (N,) int64 -> ``positional`` (N,) int64 (before the division by OutputScale).
    Positions are grouped by stack once and put back in order at the end."""
    n = x0.shape[0]
    if n == 0:
        return torch.zeros(0, dtype=torch.int64)
    order = torch.argsort(bucket, stable=True)
    counts = torch.bincount(bucket, minlength=LAYER_STACKS).tolist()
    s0 = _affine(net, "fc0", x0.index_select(0, order), counts)
    x1 = _activate(s0, WEIGHT_SCALE_BITS + 1)
    s1 = _affine(net, "fc1", x1, counts)
    x2 = _activate(s1, WEIGHT_SCALE_BITS)
    s2 = _affine(net, "fc2", torch.cat([x1, x2], 1), counts)[:, 0]
    fwd = _wrap(s2 + s0[:, FC0_OUTPUTS - 2] - s0[:, FC0_OUTPUTS - 1], 32)
    out = torch.empty(n, dtype=torch.int64)
    out[order] = _tdiv(fwd * OUT_NUM, OUT_DEN)
    return out


def psqt_value(ps_stm: torch.Tensor, ps_nstm: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
    """Step 7's ``psqt`` before OutputScale: (N, 8) PSQT sums of each perspective -> (N,) int64."""
    b = bucket.view(-1, 1)
    return _tdiv(_wrap(ps_stm.gather(1, b)[:, 0] - ps_nstm.gather(1, b)[:, 0], 32), 2)


def _value(net: SFNNv16IntegerNet, a_s, p_s, a_n, p_n, bucket: torch.Tensor, return_parts: bool = False):
    """Steps 2–7 from both perspectives' int16 accumulators (N, L1) (exact, wrapped) and PSQT
    sums (N, 8) int64: -> (N,) int64 internal values, stm POV (and with return_parts the engine's
    ``psqt`` and ``positional``, each already divided by OutputScale)."""
    bucket = bucket.long()
    positional = _tdiv(layer_stack(net, transform(a_s, a_n), bucket), OUTPUT_SCALE)
    psqt = _tdiv(psqt_value(p_s, p_n, bucket), OUTPUT_SCALE)
    v = psqt + positional
    if return_parts:
        return v, {"psqt": psqt, "positional": positional, "acc": torch.stack([a_s, a_n], 1).to(torch.int64)}
    return v


def _load_kernels():
    from . import compiled

    return compiled


def _compiled(backend: str | None, cpu: bool):
    """:mod:`nnue.inference.kinds.sfnnv16.compiled` when ``backend`` asks for it and it can run
    here, else None (:func:`nnue.inference.backends.kernels`)."""
    return backends.kernels(backend, cpu, _load_kernels)


def value_from_indices(net: SFNNv16IntegerNet, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor,
                       return_parts: bool = False, backend: str | None = None):
    """The engine's internal value ``psqt + positional`` (steps 1–7): stm, nstm (N, A) int32
    −1 padded ``sfnnv16`` indices, bucket (N,) int64 in 0..7 -> (N,) int64, stm POV.

    Without return_parts, on CPU by default (``backend`` as :func:`values`) one compiled pass
    per position (:func:`nnue.inference.kinds.sfnnv16.compiled.values_sfnnv16`: int16 register lanes
    over the int8 and int16 rows, each position's own layer stack); ``backend="torch"``, or where
    it does not apply, the torch steps. The same integers either way
    (``tests/inference/test_compiled_sfnnv16.py``)."""
    if not return_parts and stm.shape[0]:
        comp = _compiled(backend, stm.device.type == "cpu")
        if comp is not None:
            v = comp.values_sfnnv16(net, stm, nstm, bucket)
            if v is not None:
                return v
            backends.not_applicable(backend)
    a_s, p_s = accumulate(net, stm)
    a_n, p_n = accumulate(net, nstm)
    return _value(net, a_s, p_s, a_n, p_n, bucket, return_parts)


def forward_int(net: SFNNv16IntegerNet, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor,
                return_parts: bool = False):
    """Exact integer eval from feature indices, the evaluator interface of every kind: stm, nstm
    (N, A) int32 −1 padded, bucket (N,) int64 -> (N,) int64 UCI centipawns, stm POV (step 8,
    the material read from the HalfKAv2_hm indices; with return_parts, also {"value": internal
    values, "psqt", "positional", "acc", "out", "material"}). Without return_parts the values
    come from the compiled path on CPU (:func:`value_from_indices`)."""
    material = material_of_indices(stm)
    if not return_parts:
        return to_cp(value_from_indices(net, stm, nstm, bucket), material)
    v, parts = value_from_indices(net, stm, nstm, bucket, True)
    cp = to_cp(v, material)
    return cp, parts | {"value": v, "out": v, "material": material}


def values(net: SFNNv16IntegerNet, boards: torch.Tensor, chunk: int = 4096, backend: str | None = None,
           return_material: bool = False):
    """Internal values of packed boards: (N, 32) uint8 -> (N,) int64, stm POV (with
    return_material also the (N,) material counts), ``chunk`` boards encoded a call. ``backend``
    (as :func:`nnue.inference.kinds.perspective.evaluate`): "auto"/None (on CPU the compiled path,
    :func:`nnue.inference.kinds.sfnnv16.compiled.values_sfnnv16`, where it applies), "compiled" (it,
    or RuntimeError) or "torch" (the torch steps); the same integers. Raises ValueError for
    boards that are not (N, 32) uint8 or that the feature set cannot encode."""
    from nnue.pipeline.features.board_tensor import check_boards

    check_boards(boards)
    fs, buckets = net.features, net.buckets
    out, mat = [], []
    for s in range(0, boards.shape[0], chunk):
        b = boards[s:s + chunk]
        stm, nstm = fs.encode(b)
        out.append(value_from_indices(net, stm, nstm, buckets.of(b), backend=backend))
        mat.append(material_of_indices(stm))
    v = torch.cat(out) if out else torch.zeros(0, dtype=torch.int64)
    if return_material:
        return v, (torch.cat(mat) if mat else torch.zeros(0, dtype=torch.int64))
    return v


def evaluate(net: SFNNv16IntegerNet, boards: torch.Tensor, chunk: int = 4096, backend: str | None = None) -> torch.Tensor:
    """Integer evals of packed boards: (N, 32) uint8 -> (N,) int64 UCI centipawns, stm POV
    (:func:`values`, then :func:`to_cp` with each position's material)."""
    v, m = values(net, boards, chunk, backend, return_material=True)
    return to_cp(v, m)


# ------------------------------------------------------------------ the engine's eval trace
def final_value(psqt: int, positional: int, pawns: int, non_pawn_material: int, rule50: int) -> int:
    """``Eval::evaluate`` with optimism 0 (evaluate.cpp): the engine's final evaluation, stm POV,
    internal units, from the net's ``psqt`` and ``positional``, the pawn count of both sides,
    the non-pawn material of both sides (PieceValue units) and the halfmove clock."""
    nnue = psqt + positional
    complexity = abs(psqt - positional)
    nnue -= _tdiv_int(nnue * complexity, 18236)
    material = 534 * pawns + non_pawn_material
    v = _tdiv_int(nnue * (EVAL_BASE + material), EVAL_BASE)
    v -= _tdiv_int(v * rule50, 199)
    return min(max(v, -VALUE_LIMIT), VALUE_LIMIT)


def _aligned(v: int, material: int) -> str:
    """Stockfish 19's ``format_cp_aligned_dot``: the sign of ``v``, then ``%6.2f`` of
    |to_cp(v)| / 100."""
    sign = "-" if v < 0 else "+" if v > 0 else " "
    return sign + "%6.2f" % abs(0.01 * to_cp_int(v, material))


def _pawns(v: int, material: int) -> str:
    """``0.01 * to_cp(v)`` printed with ``std::showpos``, fixed, two decimals."""
    return "%+.2f" % (0.01 * to_cp_int(v, material))


_PIECE_CODES = {c: i + 1 for i, c in enumerate("PNBRQK")} | {c: i + 9 for i, c in enumerate("pnbrqk")}
_KNIGHT_STEPS = ((1, 2), (2, 1), (2, -1), (1, -2), (-1, -2), (-2, -1), (-2, 1), (-1, 2))
_KING_STEPS = ((1, 0), (1, 1), (0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1))


def fen_facts(fen: str) -> tuple[list[int], bool, int]:
    """A FEN's (64 piece codes, a1 = 0: 1..6 white P N B R Q K, 9..14 black; white to move; the
    halfmove clock, 0 when absent). Raises ValueError on a malformed placement or side to move."""
    fields = fen.split()
    if len(fields) < 2 or fields[1] not in ("w", "b"):
        raise ValueError(f"FEN {fen!r}: expected a placement and a side to move")
    sq = [0] * 64
    ranks = fields[0].split("/")
    if len(ranks) != 8:
        raise ValueError(f"FEN {fen!r}: {len(ranks)} ranks")
    for r, row in enumerate(ranks):
        f = 0
        for ch in row:
            if ch.isdigit():
                f += int(ch)
            elif ch in _PIECE_CODES and f < 8:
                sq[(7 - r) * 8 + f] = _PIECE_CODES[ch]
                f += 1
            else:
                raise ValueError(f"FEN {fen!r}: bad placement character {ch!r}")
        if f != 8:
            raise ValueError(f"FEN {fen!r}: rank {8 - r} has {f} files")
    clock = int(fields[4]) if len(fields) > 4 and fields[4].isdigit() else 0
    return sq, fields[1] == "w", clock


def in_check(sq: list[int], white: bool) -> bool:
    """Whether the side to move's king (white's when ``white``) is attacked on the board ``sq``
    (:func:`fen_facts`' codes). Raises ValueError when that side has no king."""
    own = 0 if white else 8
    them = 8 - own
    try:
        k = sq.index(6 + own)
    except ValueError:
        raise ValueError("the side to move has no king") from None
    kf, kr = k % 8, k // 8

    def at(f, r):
        return sq[r * 8 + f] if 0 <= f < 8 and 0 <= r < 8 else -1
    pawn_rank = kr + (1 if white else -1)  # an enemy pawn attacks from one rank ahead of the king
    if any(at(kf + d, pawn_rank) == 1 + them for d in (-1, 1)):
        return True
    if any(at(kf + df, kr + dr) == 2 + them for df, dr in _KNIGHT_STEPS):
        return True
    if any(at(kf + df, kr + dr) == 6 + them for df, dr in _KING_STEPS):
        return True
    for df, dr in _KING_STEPS:
        sliders = (3, 5) if df and dr else (4, 5)   # bishops/queens on diagonals, rooks/queens on lines
        f, r = kf + df, kr + dr
        while 0 <= f < 8 and 0 <= r < 8:
            p = sq[r * 8 + f]
            if p:
                if p - them in sliders and (p >> 3) == (them >> 3):
                    return True
                break
            f, r = f + df, r + dr
    return False


def trace(net: SFNNv16IntegerNet, fens: list[str]) -> list[str]:
    """Stockfish 19's ``eval`` output for each FEN, character for character: the table of the 8
    buckets ("NNUE network contributions (Normalized, …)": Material (PSQT), Positional (Layers),
    Total, stm POV, in pawns of the WDL model), the two ``NNUE evaluation`` lines (internal units,
    stm POV; pawns, white's point of view) and the ``Final evaluation`` line. Each text ends with a
    newline. The engine prints ``Final evaluation: none (in check)`` for a position in check: so
    does this. Raises ValueError on a malformed FEN."""
    from nnue.pipeline.board import pack_fen

    if not fens:
        return []
    facts = [fen_facts(f) for f in fens]
    boards = torch.from_numpy(np.frombuffer(b"".join(pack_fen(f) for f in fens), dtype=np.uint8)
                              .reshape(-1, 32).copy())
    fs = net.features
    stm, nstm = fs.encode(boards)
    a_s, p_s = accumulate(net, stm)
    a_n, p_n = accumulate(net, nstm)
    x0 = transform(a_s, a_n)
    material = material_of_indices(stm).tolist()
    n = len(fens)
    psqt, positional = [], []
    for k in range(LAYER_STACKS):
        bk = torch.full((n,), k, dtype=torch.int64)
        psqt.append(_tdiv(psqt_value(p_s, p_n, bk), OUTPUT_SCALE).tolist())
        positional.append(_tdiv(layer_stack(net, x0, bk), OUTPUT_SCALE).tolist())
    out = []
    for i, (sq, white, clock) in enumerate(facts):
        if in_check(sq, white):
            out.append("Final evaluation: none (in check)\n")
            continue
        pieces = sum(1 for p in sq if p)
        used = (pieces - 1) // 4
        m = material[i]
        lines = [f"NNUE network contributions (Normalized, {'White' if white else 'Black'} to move)",
                 "+------------+------------+------------+------------+",
                 "|   Bucket   |  Material  | Positional |   Total    |",
                 "|            |   (PSQT)   |  (Layers)  |            |",
                 "+------------+------------+------------+------------+"]
        for k in range(LAYER_STACKS):
            p, q = psqt[k][i], positional[k][i]
            line = f"|  {k}         |  {_aligned(p, m)}   |  {_aligned(q, m)}   |  {_aligned(p + q, m)}   |"
            lines.append(line + (" <-- this bucket is used" if k == used else ""))
        lines.append("+------------+------------+------------+------------+")
        lines.append("")
        v = psqt[used][i] + positional[used][i]
        lines.append(f"NNUE evaluation          {v:+d} (side to move, internal units)")
        lines.append(f"NNUE evaluation        {_pawns(v if white else -v, m)} (white side)")
        pawns = sum(1 for p in sq if p & 7 == 1)
        npm = sum(PIECE_VALUES[(p & 7) - 1] for p in sq if 2 <= (p & 7) <= 5)
        f = final_value(psqt[used][i], positional[used][i], pawns, npm, clock)
        lines.append(f"Final evaluation      {_pawns(f if white else -f, m)} (white side) [with scaled NNUE, ...]")
        out.append("\n".join(lines) + "\n")
    return out
