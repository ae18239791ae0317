"""Integer nets: the quantisation scheme, the file formats, and exact integer evaluation.

Standalone: torch, numpy and safetensors only (no Lightning, Hydra or pyarrow). The feature set
and output-bucket function are the trainer's own (:mod:`nnue.pipeline.features`, torch only).

Integer formula of a perspective net (all integers, C semantics, division truncates toward 0):

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

Files: ``net.safetensors`` (tensors ``l0w`` (F, H), ``l0b`` (H,), ``l1w`` (B, L1), ``l1b`` (B,),
all int16; metadata: one key, ``nnue_forge``, holding a JSON object with ``format``,
``format_version``, ``architecture``, ``feature_set``, ``feature_hash``, ``output_buckets``,
``quantisation`` and ``provenance``) and the raw ``net.bin`` (:meth:`IntegerNet.write_bin`).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import save as st_save

from nnue.pipeline.atomic import atomic_write_bytes
from nnue.pipeline.features import FeatureSet, get_feature_set, parse_output_buckets

FORMAT = "nnue-forge-integer-net"
FORMAT_VERSION = 1
META_KEY = "nnue_forge"
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


class NetFormatError(ValueError):
    """A net file is unreadable or does not match what was asked of it (names the field)."""


@dataclass(frozen=True)
class QuantScheme:
    """Quantisation of an integer net: scales, dtypes, rounding and shifts of every layer.

    Perspective nets (bullet's conventions): qa: scale of L0 weights/biases and of the clipped
    activation (v ≤ qa). qb: scale of L1 weights. scale: eval scale to centipawns (eval_cp =
    y · scale). Biases of L1 are at qa·qb. All stored tensors are ``weight_dtype`` (int16),
    rounded to nearest (``torch.round``, half to even); sums are ``sum_dtype`` (int32).
    ft_clip / l1_clip: float weight limits the trainer clamps to, chosen so that every
    quantised weight fits int16 and, for screlu/pairwise, ``v · l1w`` fits int16 at v = qa
    (|l1w| ≤ 127 -> |w| ≤ 127 / qb = 1.984).

    Deep nets (:mod:`nnue.inference.deep`, Stockfish layer-stack style) add: ``l0_shift``, the
    right shift that brings a product of two L0 activations (≤ qa²) back to u8 (qa = 255,
    shift 8: ≤ 254); dense layers hold ``dense_weight_dtype`` (int8) weights at scale qb and
    ``dense_bias_dtype`` (int32) biases at qa·qb, and hidden dense layers shift their int32
    sums right by :attr:`dense_shift` = log2(qb) back to activation scale qa.
    """

    qa: int = 255
    qb: int = 64
    scale: int = 400
    ft_clip: float = 1.98
    l1_clip: float = 1.98
    rounding: str = "nearest-even"
    weight_dtype: str = "int16"
    sum_dtype: str = "int32"
    l0_shift: int = 8
    dense_weight_dtype: str = "int8"
    dense_bias_dtype: str = "int32"

    @property
    def dense_shift(self) -> int:
        """Deep nets: the right shift after each hidden dense layer, log2(qb). Raises
        ValueError when qb is not a power of two."""
        if self.qb <= 0 or self.qb & (self.qb - 1):
            raise ValueError(f"deep nets need qb to be a power of two, got {self.qb}")
        return self.qb.bit_length() - 1

    def to_dict(self) -> dict:
        return asdict(self)


class NetFile:
    """What every integer net shares: header, metadata, the ``.safetensors`` writer and the raw
    ``.bin`` writer. Subclasses define ``arch``, ``scheme``, ``provenance``, :meth:`tensors`
    (name -> tensor, in file order) and :meth:`raw_layout` (a one-line description)."""

    kind = "perspective"

    @property
    def features(self) -> FeatureSet:
        return get_feature_set(self.arch["feature_set"])

    @property
    def buckets(self):
        return parse_output_buckets(self.arch["output_buckets"])

    def header(self) -> dict:
        """The metadata the file carries (one JSON object; see :func:`load`)."""
        return {
            "format": FORMAT, "format_version": FORMAT_VERSION, "architecture": self.arch,
            "feature_set": self.arch["feature_set"], "feature_hash": self.arch["feature_hash"],
            "output_buckets": self.arch["output_buckets"], "quantisation": self.scheme.to_dict(),
            "provenance": self.provenance,
        }

    def metadata(self) -> dict[str, str]:
        # One key holding sorted JSON: safetensors stores metadata in a hash map whose order
        # varies from call to call, so several keys would make identical nets differ in bytes.
        return {META_KEY: json.dumps(self.header(), sort_keys=True)}

    def tensors(self) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def save(self, path: str | Path) -> None:
        """Write ``net.safetensors`` atomically (byte-identical for identical nets)."""
        data = st_save({k: v.contiguous() for k, v in self.tensors().items()}, self.metadata())
        atomic_write_bytes(Path(path), data)

    def raw_bytes(self) -> bytes:
        """The raw engine layout (:meth:`raw_layout`): every tensor of :meth:`tensors` in order,
        little-endian, row-major, no header, zero-padded to a multiple of 64 bytes."""
        le = {torch.int8: "i1", torch.int16: "<i2", torch.int32: "<i4"}
        raw = b"".join(t.contiguous().numpy().astype(le[t.dtype]).tobytes() for t in self.tensors().values())
        return raw + bytes(-len(raw) % 64)

    def write_bin(self, path: str | Path) -> None:
        atomic_write_bytes(Path(path), self.raw_bytes())


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
            "num_buckets": buckets.count, "l1_inputs": hidden if activation == "pairwise_crelu" else 2 * hidden}


def load(path: str | Path, expect: dict | None = None) -> NetFile:
    """Load ``net.safetensors``: an :class:`IntegerNet` (perspective) or a
    :class:`~nnue.inference.deep.DeepIntegerNet` (``architecture.kind == "deep"``).

    ``expect``: metadata fields that must match (e.g. ``{"feature_set": "chess768"}``). Raises
    NetFormatError naming the mismatching field, or the tensor whose dtype/shape is wrong.
    """
    path = Path(path)
    try:
        with safe_open(str(path), framework="pt") as f:
            raw_meta = f.metadata() or {}
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # safetensors raises its own error types
        hint = (" (net.bin is the raw engine layout; nnue eval reads net.safetensors)" if path.suffix == ".bin"
                else " (a folder: give NETDIR/net.safetensors)" if path.is_dir() else "")
        raise NetFormatError(f"{path}: not a safetensors net{hint}: {e}") from None
    try:
        meta = json.loads(raw_meta[META_KEY])
    except (KeyError, json.JSONDecodeError):
        raise NetFormatError(f"{path}: field 'format' missing: not an integer net written by "
                             f"nnue export (no {META_KEY!r} metadata)") from None
    if meta.get("format") != FORMAT:
        raise NetFormatError(f"{path}: field 'format' is {meta.get('format')!r}, expected {FORMAT!r}")
    if meta.get("format_version") != FORMAT_VERSION:
        raise NetFormatError(f"{path}: field 'format_version' is {meta.get('format_version')!r}, "
                             f"this build reads {FORMAT_VERSION}")
    for k, v in (expect or {}).items():
        if str(meta.get(k)) != str(v):
            raise NetFormatError(f"{path}: field {k!r} is {meta.get(k)!r}, expected {v!r}")
    arch = meta.get("architecture")
    if not isinstance(arch, dict):
        raise NetFormatError(f"{path}: field 'architecture' missing or not an object")
    for k in ("feature_set", "feature_hash", "output_buckets"):
        if meta.get(k) != arch.get(k):
            raise NetFormatError(f"{path}: field {k!r} is {meta.get(k)!r} but architecture.{k} is "
                                 f"{arch.get(k)!r}: the header contradicts itself")
    allowed = {"activation": ("crelu", "screlu", "pairwise_crelu"), "hidden_activation": ("crelu", "screlu")}
    for k, names in allowed.items():
        if (k in arch or k == "activation") and arch.get(k) not in names:
            raise NetFormatError(f"{path}: field 'architecture.{k}' is {arch.get(k)!r}, expected one of "
                                 f"{', '.join(names)}")
    try:
        parse_output_buckets(str(arch["output_buckets"]))
    except (KeyError, ValueError) as e:
        raise NetFormatError(f"{path}: field 'architecture.output_buckets': {e}") from None
    try:
        scheme = QuantScheme(**meta["quantisation"])
    except TypeError as e:
        raise NetFormatError(f"{path}: field 'quantisation' is not a scheme this build reads: {e}") from None
    fs = get_feature_set(arch["feature_set"])
    if fs.hash != arch["feature_hash"]:
        raise NetFormatError(f"{path}: field 'feature_hash' is {arch['feature_hash']}, but this build's "
                             f"{fs.name} hashes to {fs.hash}: the indexing differs")
    kind = arch.get("kind", "perspective")
    if kind == "deep":
        from .deep import DeepIntegerNet as cls
    elif kind == "perspective":
        cls = IntegerNet
    else:
        raise NetFormatError(f"{path}: field 'architecture.kind' is {kind!r}, expected 'perspective' or 'deep'")
    specs = cls.tensor_specs(arch)
    for k, (dtype, shape) in specs.items():
        t = tensors.get(k)
        if t is None or tuple(t.shape) != shape or t.dtype != dtype:
            raise NetFormatError(f"{path}: tensor {k!r} should be {str(dtype).removeprefix('torch.')} {shape}, "
                                 f"found {None if t is None else (t.dtype, tuple(t.shape))}")
    return cls(arch, scheme, *(tensors[k] for k in specs), provenance=meta.get("provenance") or {})


def _cached(net, key, sources: tuple[torch.Tensor, ...], build):
    """A value derived from some of the net's tensors, built once and kept on the net; rebuilt
    when one of ``sources`` is replaced or modified in place (tensor ``_version``)."""
    cache = net.__dict__.setdefault("_float_cache", {})
    stamp = tuple(t._version for t in sources)
    hit = cache.get(key)
    if hit is None or len(hit[0]) != len(sources) or any(a is not b for a, b in zip(hit[0], sources)) \
            or hit[1] != stamp:
        hit = cache[key] = (sources, stamp, build(*sources))
    return hit[2]


def _as_float(net: IntegerNet, name: str, dtype: torch.dtype) -> torch.Tensor:
    """A float copy of an int16 tensor of the net, made once and kept on the net."""
    return _cached(net, ("float", name, dtype), (getattr(net, name),), lambda t: t.to(dtype))


# Exact integer evaluation. Every value below is an integer; the heavy steps run on float or
# int8 kernels only where a bound proves them exact (each function states its bound):
#
# 1. feature transformer: one float32 embedding_bag per step of positions over the rows of
#    _ft_table (a zero row for the −1 padding, the bias row once per bag): a bag sums at most
#    A + 1 ≤ 257 int16 values, every partial sum is below 257·2^15 < 2^24, and float32 holds
#    every integer below 2^24, so no addition rounds whatever order the kernel adds in;
# 2. L1 sums of every bucket needed (see _l1_plan): int8 torch._int_mm on byte digits of the
#    activations and int8 digits of the weights (int32 partial sums below K·2^13 < 2^31,
#    recombined in int64), or float64 (products < 2^31, sums < 2^53);
# 3. the position's own bucket, the int32 checks and the truncating divisions, in int64.

# Positions per step of forward_int / evaluate. Measured on the bench machine (one core): 512
# keeps the step's temporaries (1 MiB of float32 accumulators at H = 256) in L2 and recycled by
# the allocator; 1024 makes glibc hand back and re-fault pages (~1,500 page faults per 4,096
# evals, +50 % time), 256 and below pay the per-op dispatch more often.
_STEP = 512
# XOR with this int16 (bytes 0x80, 0x80) subtracts 128 from both bytes of a uint16 modulo 256:
# each byte b becomes the int8 b − 128.
_XOR_8080 = 0x8080 - 0x10000
# A step computes its L1 columns one matrix-vector product each (torch._int_mm with one column)
# when it needs at most this many, else one product with every column: measured here (oneDNN,
# AVX-512 VNNI, K' = 1024, 512 rows) 14 µs for one column against 70 µs for 2 to 16.
_GEMV_MAX_COLS = 4


def _ft_table(net) -> torch.Tensor:
    """(F + 2, H) float32: row 0 zeros (where −1 padding points), row f + 1 = ``l0w[f]``, row
    F + 1 = ``l0b``, so that a bag of (indices + 1) and F + 1 sums an accumulator, bias included."""
    def build(l0w, l0b):
        h = l0w.shape[1]
        return torch.cat((torch.zeros(1, h), l0w.float(), l0b.float().view(1, h))).contiguous()
    return _cached(net, "ft_table", (net.l0w, net.l0b), build)


_OFFSETS: dict[tuple[int, int], torch.Tensor] = {}


def _eb(table: torch.Tensor, bags: torch.Tensor) -> torch.Tensor:
    """Sum of the rows of ``table`` named by each row of ``bags`` (2-D, equal-width bags):
    ``torch.embedding_bag`` (mode sum) with cached int32 offsets, as
    ``F.embedding_bag(bags, table, mode="sum")`` computes it, less the per-call Python work."""
    nb, w = bags.shape
    if w == 0:
        return torch.zeros((nb, table.shape[1]))
    offsets = _OFFSETS.get((nb, w))
    if offsets is None:
        offsets = torch.arange(0, nb * w, w, dtype=torch.int32)
        if nb == 2 * _STEP:  # full steps only: the cache stays small (≤ 257 widths)
            _OFFSETS[(nb, w)] = offsets
    return torch.embedding_bag(table, bags.reshape(-1), offsets, False, 0)[0]


def _bags(stm: torch.Tensor, nstm: torch.Tensor, bias_row: int | None = None) -> torch.Tensor:
    """(m, w) −1-padded index lists of both perspectives -> (2m, w (+ 1)) int32 bags of
    :func:`_ft_table` rows: row 2i = stm[i] + 1, row 2i + 1 = nstm[i] + 1, each led by
    ``bias_row`` when given."""
    m, w = stm.shape
    b = 0 if bias_row is None else 1
    idx = torch.empty((m, 2, w + b), dtype=torch.int32)
    if b:
        idx[:, :, 0] = bias_row
    torch.add(stm, 1, out=idx[:, 0, b:])
    torch.add(nstm, 1, out=idx[:, 1, b:])
    return idx.view(2 * m, w + b)


def _check_indices(net, *lists: torch.Tensor) -> None:
    f = net.l0w.shape[0]
    for t in lists:
        if t.numel() and int(t.max()) >= f:
            raise IndexError(f"feature index {int(t.max())} out of range for {f} inputs")


def accumulators_f32(net: IntegerNet, indices: torch.Tensor) -> torch.Tensor:
    """Accumulators as exact integers held in float32: (N, A) indices, −1 padded (any negative
    value is padding) -> (N, H) float32, bias included.

    One ``embedding_bag`` over the rows of :func:`_ft_table` (the zero row for padding, the bias
    row in every bag): each partial sum adds at most A + 1 ≤ 257 int16 values and stays below
    2^24 in magnitude, so float32 holds it exactly in any summation order."""
    if indices.shape[1] > 256:
        raise ValueError("more than 256 active features would break the float32 exactness bound")
    _check_indices(net, indices)
    table = _ft_table(net)
    n, a = indices.shape
    idx = torch.empty((n, a + 1), dtype=torch.int32)
    idx[:, 0] = table.shape[0] - 1
    torch.add(indices.clamp(min=-1), 1, out=idx[:, 1:])
    return _eb(table, idx) if n else torch.zeros((0, table.shape[1]))


_accumulators_f32 = accumulators_f32  # the name bench/bench_incremental.py imports


def accumulators(net: IntegerNet, indices: torch.Tensor) -> torch.Tensor:
    """Integer feature transformer: (N, A) int32 indices, −1 padded -> (N, H) int32.

    Runs as a float32 ``embedding_bag`` (:func:`accumulators_f32`): every partial sum of ≤ 257
    int16 values (the rows and the bias) is below 2^24 in magnitude, so float32 holds it exactly
    (DESIGN.md, "exact integer arithmetic").
    """
    return accumulators_f32(net, indices).to(torch.int32)


def check_int32(t: torch.Tensor, what: str) -> None:
    if t.numel():
        lo, hi = torch.aminmax(t)
        if lo < INT32_MIN or hi > INT32_MAX:
            raise OverflowError(f"{what} leaves the int32 range ({int(lo)}..{int(hi)})")


def _acc_int16_proven(net, width: int) -> bool:
    """True when no accumulator of at most ``width`` active features can leave int16, whatever
    the features (repeats included): |l0b[h]| + width·max_f |l0w[f][h]| ≤ 32767 for every
    neuron h. The per-step range check is skipped then (the export audit's bound, with the 32
    largest rows, is tighter, but needs to know which rows can meet)."""
    def build(l0w, l0b):
        colmax = (l0w.to(torch.int64).abs().amax(0) if l0w.shape[0]
                  else torch.zeros_like(l0b, dtype=torch.int64))
        return {"colmax": colmax, "absb": l0b.to(torch.int64).abs(), "by_width": {}}
    c = _cached(net, "acc_bound", (net.l0w, net.l0b), build)
    ok = c["by_width"].get(width)
    if ok is None:
        ok = c["by_width"][width] = not c["absb"].numel() or \
            bool((c["absb"] + width * c["colmax"]).max() <= 32767)
    return ok


def _check_acc_int16(acc: torch.Tensor) -> None:
    if acc.numel():
        lo, hi = torch.aminmax(acc)
        if lo < -32768 or hi > 32767:
            raise OverflowError(f"accumulator leaves int16 ({int(lo)}..{int(hi)})")


_INT_MM_OK: dict[tuple, bool] = {}


def _int_mm_is_exact(k2: int, cols: int) -> bool:
    """Whether ``torch._int_mm`` computes (M, k2) × (k2, cols) int8 products exactly here:
    checked once per shape, for several row counts, on the extreme inputs of the int8 L1 path
    (inputs −128 and 127 against digits −64 and 64: the largest pair sums a saturating u8×s8
    kernel could see) and on random ones, against float64 (exact: |sum| ≤ k2·2^14 < 2^53).
    Not a formality: with ONEDNN_MAX_CPU_ISA=AVX512_CORE (AVX-512 without VNNI) this torch's
    one-column product returns wrong sums for positive digits, while 16 columns are exact."""
    key = (k2, cols, torch.get_num_threads(),
           torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled)
    ok = _INT_MM_OK.get(key)
    if ok is None:
        ok = True
        g = torch.Generator().manual_seed(0)
        try:
            for m in (1, 2, 5, 64, 333, _STEP):
                mats = [(torch.full((m, k2), a, dtype=torch.int8),
                         torch.full((k2, cols), d, dtype=torch.int8)) for a in (-128, 127) for d in (-64, 64)]
                mats.append((torch.randint(-128, 128, (m, k2), generator=g, dtype=torch.int8),
                             torch.randint(-64, 65, (k2, cols), generator=g, dtype=torch.int8)))
                for a, d in mats:
                    ref = (a.double() @ d.double()).to(torch.int64)
                    ok = ok and torch.equal(torch._int_mm(a, d).to(torch.int64), ref)
        except RuntimeError:  # no int8 product on this build
            ok = False
        _INT_MM_OK[key] = ok
    return ok


def _weight_digits(w: torch.Tensor) -> list[torch.Tensor]:
    """int64 weights -> digits d_j with w = Σ_j 128^j·d_j, every |d_j| ≤ 64: [w] itself when
    every |w| ≤ 64, else balanced base 128 (each d_j in [−64, 63]; 2 digits for |w| ≤ 8191,
    3 for any int16). Exact integer arithmetic."""
    if not w.numel() or int(w.abs().max()) <= 64:
        return [w]
    digits = []
    while bool((w != 0).any()):
        d = torch.remainder(w + 64, 128) - 64
        digits.append(d)
        w = torch.div(w - d, 128, rounding_mode="floor")  # exact: w − d ≡ 0 (mod 128)
    return digits


def _l1_plan(net) -> dict:
    """How this net's L1 sums are computed: ``mode`` "int8" (preferred) or "f64".

    The L1 input x (N, K) is crelu v ≤ QA, screlu v² ≤ QA², pairwise v·v' ≤ QA² (v = the
    clamped accumulator), stm half first; the sum of bucket b is Σ_k x_k·l1w[b][k].

    "int8" (when QA ≤ 255, 0 < K < 2^17, a little-endian machine, and :func:`_int_mm_is_exact`
    for the shapes used): x is held as uint16 (≤ 255² < 2^16; the int16 product v·v wraps to
    exactly those bits) and split into bytes x = 256·hi + lo, each made int8 by − 128 (one XOR
    with 0x8080: the int16 tensor viewed as int8 is then lo − 128, hi − 128 for each k, i.e. K'
    = 2K interleaved inputs). The weights are split into digits d_j (:func:`_weight_digits`,
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
            n_act = 1 if (qa if act == "crelu" else qa * qa) <= 255 else 2
            digits = _weight_digits(l1w.to(torch.int64))
            groups = n_act * len(digits)
            w8 = torch.zeros((k, 2, n_act, len(digits), nb), dtype=torch.int8)
            scales, const = [], torch.zeros(nb, dtype=torch.int64)
            for i in range(n_act):
                for j, d in enumerate(digits):
                    w8[:, i, i, j, :] = d.T.to(torch.int8)
                    scales.append(256 ** i * 128 ** j)
                    const += scales[-1] * 128 * d.sum(1)
            w8 = w8.view(2 * k, groups * nb)
            if _int_mm_is_exact(2 * k, w8.shape[1]):
                plan.update(mode="int8", w8=w8, groups=groups, gemv=_int_mm_is_exact(2 * k, 1),
                            w8_cols=[w8[:, c:c + 1].contiguous() for c in range(w8.shape[1])],
                            scales=torch.tensor(scales, dtype=torch.int64).view(groups, 1), const=const)
        if plan["mode"] == "f64":
            if k > 1 << 22:
                raise ValueError("L1 wider than 2^22 inputs would break the float64 exactness bound")
            plan["w64"] = l1w.to(torch.float64)
        return plan
    return _cached(net, ("l1_plan", net.arch["activation"], net.scheme.qa), (net.l1w,), build)


def _l1_input_i16(act: str, qa: int, acc: torch.Tensor) -> torch.Tensor:
    """(2m, H) accumulators, float32 or int16 (exact integers within int16; rows stm, nstm of
    each position) -> (m, K) int16 L1 inputs as uint16 bits: crelu v = clamp(acc, 0, QA),
    screlu v², pairwise v[:H/2]·v[H/2:] (the int16 products wrap to the uint16 bits of values
    ≤ 255²). An int16 ``acc`` is overwritten."""
    v = (acc if acc.dtype == torch.int16 else acc.to(torch.int16)).clamp_(0, qa)
    if act == "screlu":
        v.mul_(v)
    elif act == "pairwise_crelu":
        h = v.shape[1] // 2
        v = v[:, :h] * v[:, h:]
    return v.view(acc.shape[0] // 2, -1)


def _l1_input_f64(act: str, qa: int, acc: torch.Tensor) -> torch.Tensor:
    """(2m, H) accumulators (float32 or int16) -> (m, K) float64 L1 inputs (exact: values ≤
    QA² < 2^53)."""
    v = acc.clamp(0, qa).double()
    if act == "screlu":
        v.mul_(v)
    elif act == "pairwise_crelu":
        h = v.shape[1] // 2
        v = v[:, :h] * v[:, h:]
    return v.view(acc.shape[0] // 2, -1)


class _L1:
    """The L1 sums of a batch, filled step by step (:meth:`step`), read once (:meth:`sums`)."""

    def __init__(self, net, n: int):
        self.plan = plan = _l1_plan(net)
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


def _finish(net, total: torch.Tensor, bucket: torch.Tensor) -> torch.Tensor:
    """L1 sums (N,) int64 -> evals: the int32 checks and the truncating divisions of the module
    docstring's formula, in int64."""
    s = net.scheme
    check_int32(total, "L1 sum")
    if net.arch["activation"] in ("screlu", "pairwise_crelu"):
        out = torch.div(total, s.qa, rounding_mode="trunc")
    else:
        out = total
    out = out + _cached(net, "l1b:i64", (net.l1b,), lambda t: t.to(torch.int64))[bucket]
    check_int32(out, "L1 output")
    return torch.div(out * s.scale, s.qa * s.qb, rounding_mode="trunc")


def forward_int(net: IntegerNet, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor,
                return_parts: bool = False):
    """Exact integer eval from feature indices.

    stm, nstm: (N, A) int32 −1-padded; bucket: (N,) int64. Returns (N,) int64 centipawns, stm
    POV; with return_parts, also a dict with ``acc`` (N, 2, H) int32 and ``sum`` (N,) int64,
    the L1 sum before the division (for the overflow audit).
    Raises OverflowError when an accumulator leaves int16 or a sum leaves int32.

    Exactness, step by step (each bound is what keeps its step exact):

    * accumulators: one float32 ``embedding_bag`` per step of ``_STEP`` positions over
      :func:`_ft_table` (bags of :func:`_bags`): each partial sum adds at most A + 1 ≤ 257 int16
      values, below 2^24, which float32 holds exactly. They are range-checked against int16
      unless :func:`_acc_int16_proven` shows that no A features can leave it;
    * L1 (:func:`_l1_plan`): int8 ``torch._int_mm`` on byte digits of the activations and digits
      |d| ≤ 64 of the weights (int32 partial sums below K·2^13, recombined in int64), or float64
      (products < 2^31, sums < 2^53);
    * each position's own bucket, then the int32 checks and truncating divisions in int64.

    Tested bit-exact against an int64 reference (tests/inference/test_forward_int_paths.py) and
    the C reference evaluator.
    """
    width = max(stm.shape[1], nstm.shape[1])
    if width > 256:
        raise ValueError("more than 256 active features would break the float32 exactness bound")
    _check_indices(net, stm, nstm)
    n = stm.shape[0]
    stm, nstm = (torch.nn.functional.pad(t.clamp(min=-1), (0, width - t.shape[1]), value=-1)
                 for t in (stm, nstm))
    table = _ft_table(net)
    proven = _acc_int16_proven(net, width)
    l1 = _L1(net, n)
    accs = torch.empty((n, 2, net.l0w.shape[1]), dtype=torch.int32) if return_parts else None
    for s in range(0, n, _STEP):
        e = min(n, s + _STEP)
        acc = _eb(table, _bags(stm[s:e], nstm[s:e], table.shape[0] - 1))
        if not proven:
            _check_acc_int16(acc)
        if return_parts:
            accs[s:e] = acc.view(e - s, 2, -1)
        lo, hi = torch.aminmax(bucket[s:e])
        l1.step(acc, s, int(lo), int(hi))
    total = l1.sums(bucket)
    ev = _finish(net, total, bucket)
    if return_parts:
        return ev, {"acc": accs, "sum": total}
    return ev


def _bag_table(net, enc) -> torch.Tensor | None:
    """For a :class:`~nnue.pipeline.features.lookup.TableEncoder`: its table mapped to rows of
    :func:`_ft_table` (feature f -> f + 1, padding −1 -> the zero row 0). None when the table
    reaches past the net's inputs (the generic path then raises the IndexError)."""
    def build(table, l0w):
        return None if table.numel() and int(table.max()) >= l0w.shape[0] else table + 1
    return _cached(net, ("bag_table", id(enc)), (enc.table_cpu, net.l0w), build)


def evaluate(net: IntegerNet, boards: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """Integer evals of packed boards: (N, 32) uint8 -> (N,) int64 centipawns, stm POV.

    The values of :func:`forward_int` on the encoded boards (the same steps, the same exactness
    argument), computed faster:

    * positions are taken in order of piece count (a stable sort; the evals are put back in the
      input order at the end). A step's bags are then only as wide as its largest piece count
      (a feature set has at most one feature per piece and perspective, and pads at the end:
      true of every table-encoded set by construction, checked per step for any other, which
      falls back to the full width), and its positions fall in one or two output buckets
      (bucket functions grow with the piece count), whose L1 columns alone are computed;
    * for a table-encoded feature set (all of them) a step's bags come straight from the
      lookup keys (``TableEncoder.lookup_keys``) through a copy of the table that points at the
      rows of :func:`_ft_table`: one ``index_select`` per step (per step, not per batch:
      whole-batch buffers of a few MB fall out of L2 and cost more);
    * the bias is not a bag row: when :func:`_acc_int16_proven` holds for the step's width, the
      bias-free sums (|Σ rows| ≤ w·max|l0w| ≤ 32767 − |l0b|) are converted to int16 and the
      int16 bias added (no wrap: the biased sum is within int16 too); otherwise it is added in
      float32 (exact, below 2^24) and the sums are range-checked.

    ``chunk``: positions per feature-encoding call (for perspective nets rounded to steps, at
    least 4096; deep nets use it as given)."""
    if net.kind == "deep":
        from .deep import evaluate as evaluate_deep

        return evaluate_deep(net, boards, chunk)
    if boards.shape[0] == 0:
        _sorted_steps(net, boards, chunk)  # validates shape and dtype
        return torch.zeros(0, dtype=torch.int64)
    order, bucket, first, steps = _sorted_steps(net, boards, chunk)
    l1 = _L1(net, boards.shape[0])
    for s, e, acc, b_lo, b_hi in steps:
        l1.step(acc, s, b_lo, b_hi, first)
    ev = _finish(net, l1.sums(bucket), bucket)
    return torch.empty_like(ev).index_copy_(0, order, ev)


def _sorted_steps(net, boards: torch.Tensor, chunk: int):
    """The feature-transformer half of :func:`evaluate`, shared with deep nets.

    boards: (N, 32) uint8. Returns ``(order, bucket, first, steps)``: ``order`` (N,) int64, the
    stable sort of the positions by piece count; ``bucket`` (N,) int64, the output buckets in
    that order (non-decreasing); ``first`` (buckets + 1) list, where each bucket starts; and
    ``steps``, a generator of ``(s, e, acc, b_lo, b_hi)``: the sorted positions s..e (at most
    ``_STEP``), their accumulators ``acc`` (2·(e − s), H), rows 2i stm and 2i + 1 nstm, bias
    included, exact integers as int16 (when proven in range) or float32 (range-checked), and
    the step's first and last bucket. Raises what the encoder raises (bad boards), IndexError
    for features beyond the net's inputs, OverflowError for an accumulator outside int16."""
    from nnue.pipeline.features.board_tensor import piece_count
    from nnue.pipeline.features.lookup import TableEncoder

    fs, buckets = net.features, net.buckets
    n = boards.shape[0]
    pieces = piece_count(boards)  # also validates shape and dtype
    pieces, order = torch.sort(pieces, stable=True)
    boards = boards.index_select(0, order)
    bucket = buckets.of_piece_count(pieces)  # = buckets.of(boards), non-decreasing
    first = torch.searchsorted(bucket, torch.arange(buckets.count + 1)).tolist()

    def steps():
        enc = fs.encode
        bag_table = _bag_table(net, enc) if isinstance(enc, TableEncoder) else None
        table = _ft_table(net)
        # every step's last piece count and first and last bucket, in one read each
        starts = list(range(0, n, _STEP))
        ends = starts[1:] + [n]
        last = torch.tensor(ends) - 1
        widths, b_hi = pieces[last].tolist(), bucket[last].tolist()
        b_lo = bucket[torch.tensor(starts)].tolist()
        per_encode = max(chunk, 4096) // _STEP * _STEP
        proven: dict[int, bool] = {}
        bias16, bias32 = net.l0b.view(1, -1), table[-1]
        for i, s in enumerate(starts):
            e, m = ends[i], ends[i] - starts[i]
            if s % per_encode == 0:  # encode the next per_encode positions
                s0, b = s, boards[s:s + per_encode]
                if bag_table is not None:
                    keys, offsets = enc.lookup_keys(b)
                    a = keys.shape[1]
                    keys, offsets = keys.unsqueeze(1), offsets.unsqueeze(2)
                else:
                    stm, nstm = enc(b)
                    _check_indices(net, stm, nstm)
                    a = stm.shape[1]
            w = min(a, widths[i])
            if bag_table is not None:
                key = torch.empty((m, 2, w), dtype=torch.int32)
                torch.add(keys[s - s0:e - s0, :, :w], offsets[s - s0:e - s0], out=key)
                bags = bag_table.index_select(0, key.view(-1)).view(2 * m, w)
            else:
                st, ns = stm[s - s0:e - s0], nstm[s - s0:e - s0]
                if w < a and (int(st[:, w:].max()) >= 0 or int(ns[:, w:].max()) >= 0):
                    w = a
                bags = _bags(st[:, :w], ns[:, :w])
            acc = _eb(table, bags)  # bias not included
            if w not in proven:
                proven[w] = _acc_int16_proven(net, w)
            if proven[w]:  # |Σ rows| + |l0b| ≤ 32767: int16 holds the sum and the biased sum
                acc = acc.to(torch.int16).add_(bias16)
            else:
                _check_acc_int16(acc.add_(bias32))
            yield s, e, acc, b_lo[i], b_hi[i]

    return order, bucket, first, steps()


def boards_from_fens(fens: list[str], labels: list[str] | None = None) -> torch.Tensor:
    """FENs -> (N, 32) uint8 packed boards. Checks syntax and that each side has one king (no
    further legality checks). Raises ValueError naming a bad FEN by its label (``labels``, e.g.
    "file:line"), else by its 1-based position."""
    from nnue.pipeline.board import pack_fen

    rows = []
    for i, fen in enumerate(fens, 1):
        where = labels[i - 1] if labels is not None else i
        try:
            packed = pack_fen(fen)
            placement = fen.split()[0]
            if placement.count("K") != 1 or placement.count("k") != 1:
                raise ValueError("each side needs exactly one king")
            rows.append(packed)
        except ValueError as e:
            raise ValueError(f"FEN {where} ({fen!r}): {e}") from None
    if not rows:
        return torch.zeros((0, 32), dtype=torch.uint8)
    return torch.from_numpy(np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(-1, 32).copy())


def evaluate_fens(net: IntegerNet, fens: list[str], labels: list[str] | None = None) -> list[int]:
    """Integer evals (centipawns, side-to-move POV) of FENs (``labels``: how errors name them,
    see :func:`boards_from_fens`)."""
    return evaluate(net, boards_from_fens(fens, labels)).tolist()


def evaluate_boards(net: NetFile, boards) -> list[int]:
    """Integer evals (centipawns, side-to-move POV) of python-chess boards (any objects with a
    ``fen()`` method; python-chess itself is not imported). Raises ValueError naming the
    1-based position of a board that cannot be packed."""
    return evaluate_fens(net, [b.fen() for b in boards])


def evaluate_dataset(net: NetFile, batches, chunk: int = 65536):
    """Integer evals of a packed dataset, streamed: ``batches`` yields (N, 32) uint8 packed
    boards (e.g. the ``boards`` of :class:`nnue.pipeline.stream.PackedStream` batches, or
    row groups of the Parquet ``board`` column); yields (N,) int64 centipawn tensors, stm POV,
    one per input batch, in order. Memory stays bounded by one batch."""
    for boards in batches:
        yield evaluate(net, boards, chunk)
