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
        raise NetFormatError(f"{path}: not a safetensors net: {e}") from None
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
    arch = meta["architecture"]
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


def _as_float(net: IntegerNet, name: str, dtype: torch.dtype) -> torch.Tensor:
    """A float copy of an int16 tensor of the net, made once and kept on the net."""
    cache = net.__dict__.setdefault("_float_cache", {})
    t = getattr(net, name)
    key = (name, dtype)
    hit = cache.get(key)
    if hit is None or hit[0] is not t:
        hit = cache[key] = (t, t.to(dtype))
    return hit[1]


def accumulators_f32(net: IntegerNet, indices: torch.Tensor) -> torch.Tensor:
    """Accumulators as exact integers held in float32: (N, A) indices -> (N, H) float32."""
    if indices.shape[1] > 256:
        raise ValueError("more than 256 active features would break the float32 exactness bound")
    valid = indices >= 0
    acc = torch.nn.functional.embedding_bag(indices.clamp(min=0).long(), _as_float(net, "l0w", torch.float32),
                                            mode="sum", per_sample_weights=valid.float())
    return acc.add_(_as_float(net, "l0b", torch.float32))


def accumulators(net: IntegerNet, indices: torch.Tensor) -> torch.Tensor:
    """Integer feature transformer: (N, A) int32 indices, −1 padded -> (N, H) int32.

    Runs as a float32 ``embedding_bag``: every partial sum of ≤ 256 int16 rows (plus the bias)
    is below 2^24 in magnitude, so float32 holds it exactly (DESIGN.md, "exact integer
    arithmetic").
    """
    return accumulators_f32(net, indices).to(torch.int32)


def check_int32(t: torch.Tensor, what: str) -> None:
    if t.numel() and (t.min() < INT32_MIN or t.max() > INT32_MAX):
        raise OverflowError(f"{what} leaves the int32 range ({int(t.min())}..{int(t.max())})")


def forward_int(net: IntegerNet, stm: torch.Tensor, nstm: torch.Tensor, bucket: torch.Tensor,
                return_parts: bool = False):
    """Exact integer eval from feature indices.

    stm, nstm: (N, A) int32 −1-padded; bucket: (N,) int64. Returns (N,) int64 centipawns, stm
    POV; with return_parts, also a dict with ``acc`` (N, 2, H) int32 and ``sum`` (N,) int64,
    the L1 sum before the division (for the overflow audit).
    Raises OverflowError when an accumulator leaves int16 or a sum leaves int32.

    Exactness: accumulators are float32 sums of int16 values below 2^24; activations (≤ QA²)
    are exact in float32; the L1 products and sums run as float64 matrix products against every
    bucket's weights, each product an integer of magnitude ≤ QA²·32767 < 2^31 and each sum of
    L1 ≤ 4M of them below 2^53, so every value is represented exactly; the sums are converted
    back to int64 before the integer (truncating) divisions. Tested bit-exact against the C
    reference evaluator.
    """
    s = net.scheme
    qa = s.qa
    act = net.arch["activation"]
    half = net.arch["l1_inputs"] // 2
    if 2 * half > 1 << 22:
        raise ValueError("L1 wider than 2^22 inputs would break the float64 exactness bound")
    w = _as_float(net, "l1w", torch.float64)
    total = None
    accs = []
    for p, idx in enumerate((stm, nstm)):
        acc = accumulators_f32(net, idx)  # exact integers in float32
        if acc.numel() and (acc.min() < -32768 or acc.max() > 32767):
            raise OverflowError(f"accumulator leaves int16 ({int(acc.min())}..{int(acc.max())})")
        if return_parts:
            accs.append(acc.to(torch.int32))
        v = acc.clamp_(0, qa)
        if act == "pairwise_crelu":
            h = net.arch["hidden"] // 2
            x = v[:, :h] * v[:, h:]  # ≤ QA² < 2^24: exact in float32
        elif act == "screlu":
            x = v.square_()
        else:
            x = v
        part = x.double() @ w[:, p * half:(p + 1) * half].T  # (N, B), exact integers < 2^53
        total = part if total is None else total.add_(part)
    total = total.gather(1, bucket.view(-1, 1)).squeeze(1).to(torch.int64)
    check_int32(total, "L1 sum")
    if act in ("screlu", "pairwise_crelu"):
        out = torch.div(total, qa, rounding_mode="trunc")
    else:
        out = total
    out = out + net.l1b.to(torch.int64)[bucket]
    check_int32(out, "L1 output")
    ev = torch.div(out * s.scale, qa * s.qb, rounding_mode="trunc")
    if return_parts:
        return ev, {"acc": torch.stack(accs, 1), "sum": total}
    return ev


def evaluate(net: IntegerNet, boards: torch.Tensor, chunk: int = 1024) -> torch.Tensor:
    """Integer evals of packed boards: (N, 32) uint8 -> (N,) int64 centipawns, stm POV."""
    if net.kind == "deep":
        from .deep import evaluate as evaluate_deep

        return evaluate_deep(net, boards, chunk)
    fs, buckets = net.features, net.buckets
    out = []
    for s in range(0, boards.shape[0], chunk):
        b = boards[s:s + chunk]
        stm, nstm = fs.encode(b)
        out.append(forward_int(net, stm, nstm, buckets.of(b)))
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.int64)


def boards_from_fens(fens: list[str]) -> torch.Tensor:
    """FENs -> (N, 32) uint8 packed boards. Checks syntax and that each side has one king (no
    further legality checks). Raises ValueError naming the 1-based position of a bad FEN."""
    from nnue.pipeline.board import pack_fen

    rows = []
    for i, fen in enumerate(fens, 1):
        try:
            packed = pack_fen(fen)
            placement = fen.split()[0]
            if placement.count("K") != 1 or placement.count("k") != 1:
                raise ValueError("each side needs exactly one king")
            rows.append(packed)
        except ValueError as e:
            raise ValueError(f"FEN {i} ({fen!r}): {e}") from None
    if not rows:
        return torch.zeros((0, 32), dtype=torch.uint8)
    return torch.from_numpy(np.frombuffer(b"".join(rows), dtype=np.uint8).reshape(-1, 32).copy())


def evaluate_fens(net: IntegerNet, fens: list[str]) -> list[int]:
    """Integer evals (centipawns, side-to-move POV) of FENs."""
    return evaluate(net, boards_from_fens(fens)).tolist()
