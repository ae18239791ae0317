"""Stockfish 15.1 ``.nnue`` files, the codec: decode one into the tensors of an
:class:`~nnue.inference.kinds.sfnnv5.SFNNv5IntegerNet` (:func:`parse_nnue`;
:func:`nnue.inference.kinds.sfnnv5.read_nnue` builds the net) and write one from such a net
(:func:`nnue_bytes`; :func:`write_stockfish`, ``nnue export-net --to stockfish-15.1``), byte for
byte as the engine writes them. It imports nothing of :mod:`nnue.inference.kinds.sfnnv5.net`,
which imports it.

Layout (little-endian, uncompressed; Stockfish ``evaluate_nnue.cpp`` read/write_parameters,
``nnue_feature_transformer.h``, ``layers/affine_transform.h``; ``shared/SF15.md``):

======================  ==============================================================
header                  u32 version 0x7AF32F20; u32 hash (feature-transformer hash XOR
                        network hash); u32 N; N bytes of description
feature transformer     u32 hash 0x7F234CB8 ^ 2·L1; int16 bias[L1]; int16 weight[F][L1];
                        int32 psqt[F][8]
8 layer stacks          u32 network hash; fc_0: int32 bias[16], int8 weight[16][L1];
                        fc_1: int32 bias[32], int8 weight[32][32]; fc_2: int32 bias[1],
                        int8 weight[1][32]
end                     the file ends exactly here
======================  ==============================================================

The hashes are computed, not copied: HalfKAv2_hm's 0x7F234CB8 XOR the FT's output count 2·L1;
the network's from 0xEC42E90D ^ 2·L1 through each layer's ``get_hash_value`` (AffineTransform:
``(0xCC03DAE4 + outputs) ^ (prev >> 1) ^ (prev << 31)``; ClippedReLU: ``0x538D24C7 + prev``;
SqrClippedReLU adds nothing). At L1 = 1,024 they give 0x7F2344B8, 0x63336A4A and 0x1C102EF2, the
values in Stockfish 15.1's own net (tests check them).
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import torch

from nnue.pipeline.atomic import atomic_write_bytes
from nnue.pipeline.features import get_feature_set

from ...net import NetFormatError

#: Stockfish 15.1's fixed sizes (its file format; :mod:`nnue.inference.kinds.sfnnv5.net` imports them)
FC0_OUTPUTS = 16        # FC_0_OUTPUTS + 1: 15 go on, the 16th is the skip to the output
FC1_PADDED = 32         # fc_1's input dimension in the file (ceil to 32)
FC1_OUTPUTS = 32
LAYER_STACKS = 8
PSQT_BUCKETS = 8
#: the L1 (feature transformer width) Stockfish 15.1 loads
STOCKFISH_L1 = 1024

VERSION = 0x7AF32F20
HALFKAV2_HM_HASH = 0x7F234CB8
_M = 0xFFFFFFFF
#: the file name of Stockfish 15.1's built-in net: the engine never reads a file of that name
BUILTIN_NAME = "nn-ad9b42354671.nnue"


def affine_hash(prev: int, outputs: int) -> int:
    """An affine layer's hash after ``prev`` (Stockfish ``AffineTransform::get_hash_value``)."""
    h = (0xCC03DAE4 + outputs) & _M
    h ^= prev >> 1
    h ^= (prev << 31) & _M
    return h


def crelu_hash(prev: int) -> int:
    """A ClippedReLU's hash after ``prev`` (Stockfish ``ClippedReLU::get_hash_value``)."""
    return (0x538D24C7 + prev) & _M


def ft_hash(l1: int) -> int:
    """The feature transformer's hash for L1 outputs per perspective."""
    return HALFKAV2_HM_HASH ^ (2 * l1)


def network_hash(l1: int) -> int:
    """The hash of one layer stack after an L1-wide feature transformer."""
    h = 0xEC42E90D ^ (2 * l1)
    h = crelu_hash(affine_hash(h, FC0_OUTPUTS))
    h = crelu_hash(affine_hash(h, FC1_OUTPUTS))
    return affine_hash(h, 1)


def file_hash(l1: int) -> int:
    """The header's hash: feature-transformer hash XOR network hash."""
    return ft_hash(l1) ^ network_hash(l1)


def stack_bytes(l1: int) -> int:
    return 4 + 4 * FC0_OUTPUTS + FC0_OUTPUTS * l1 + 4 * FC1_OUTPUTS + FC1_OUTPUTS * FC1_PADDED + 4 + FC1_OUTPUTS


def file_size(l1: int, description_bytes: int, num_inputs: int = 22528) -> int:
    """Bytes of a ``.nnue`` file (47,001,424 + N at L1 = 1,024)."""
    ft = 4 + 2 * l1 + 2 * l1 * num_inputs + 4 * PSQT_BUCKETS * num_inputs
    return 12 + description_bytes + ft + LAYER_STACKS * stack_bytes(l1)


def nnue_bytes(net) -> bytes:
    """The ``.nnue`` file of ``net`` (an :class:`~nnue.inference.kinds.sfnnv5.SFNNv5IntegerNet`; its
    description from ``arch["description"]``)."""
    l1 = net.arch["hidden"]
    desc = net.arch.get("description", "").encode("utf-8")
    le = {torch.int8: "i1", torch.int16: "<i2", torch.int32: "<i4"}

    def raw(t):
        return t.contiguous().numpy().astype(le[t.dtype], copy=False).tobytes()
    parts = [struct.pack("<III", VERSION, file_hash(l1), len(desc)), desc,
             struct.pack("<I", ft_hash(l1)), raw(net.ft_bias), raw(net.ft_weight), raw(net.psqt)]
    nh = struct.pack("<I", network_hash(l1))
    for s in range(LAYER_STACKS):
        parts += [nh, raw(net.fc0_bias[s]), raw(net.fc0_weight[s]), raw(net.fc1_bias[s]), raw(net.fc1_weight[s]),
                  raw(net.fc2_bias[s]), raw(net.fc2_weight[s])]
    return b"".join(parts)


def check_writable(net, path: str | Path | None = None, target_l1: int = STOCKFISH_L1) -> None:
    """Refuse, in one line naming the dimension or field, a net Stockfish 15.1 cannot load: not
    an sfnnv5 net (its kind, feature set, buckets), or L1 other than 1,024; and an output path
    named like the built-in net (the engine would ignore the file). Raises ValueError."""
    a = net.arch
    if a.get("kind") != "sfnnv5":
        raise ValueError(f"net kind {a.get('kind')!r}: Stockfish 15.1 loads only the sfnnv5 kind "
                         f"(HalfKAv2_hm -> 1024x2 pairwise -> 8 layer stacks 16/32/1; train with model=sfnnv5)")
    if a["hidden"] != target_l1:
        raise ValueError(f"L1 (feature transformer width, model.hidden) is {a['hidden']}: Stockfish 15.1 "
                         f"loads only {target_l1} (its hash would be 0x{file_hash(a['hidden']):08X}, "
                         f"the engine expects 0x{file_hash(target_l1):08X})")
    if path is not None and Path(path).name == BUILTIN_NAME:
        raise ValueError(f"{path}: Stockfish never reads a file named {BUILTIN_NAME} (it uses its built-in "
                         "net instead); choose another name")


def write_stockfish(net, path) -> dict:
    """``nnue export-net --to stockfish-15.1``: the ``.nnue`` file (refused in one line, naming the
    dimension or field, for a net Stockfish 15.1 cannot load: :func:`check_writable`), written
    atomically. Returns what ``--json`` prints."""
    path = Path(path)
    check_writable(net, path)
    data = nnue_bytes(net)
    atomic_write_bytes(path, data)
    return {"target": "stockfish-15.1", "file": str(path), "bytes": len(data),
            "layout": "Stockfish 15.1 .nnue (SFNNv5): header, feature transformer, 8 layer stacks",
            "hash": f"0x{file_hash(net.arch['hidden']):08X}", "description": net.arch.get("description", ""),
            "notes": [f"load it with: setoption name EvalFile value {path}"]}


def engine_notes(arch: dict, path: Path, engine: str = "Stockfish 15.1",
                 engine_l1: int = STOCKFISH_L1) -> list[tuple[str, bool]]:
    """What ``nnue export`` says about the ``net.nnue`` it wrote at ``path``: how ``engine``
    loads it (L1 ``engine_l1``, the one width the engine is built for), or that no engine does
    (another L1), as ``(line, to_stderr)``. Stockfish 19's kind uses it with its own name."""
    if arch["hidden"] == engine_l1:
        return [(f"{engine}: setoption name EvalFile value {Path(path).resolve()}", False)]
    return [(f"note: net.nnue has L1 {arch['hidden']}: {engine} loads only {engine_l1} (nnue eval and "
             "nnue import-net read it)", True)]


def import_facts(net, engine_l1: int = STOCKFISH_L1) -> dict:
    """What ``nnue import-net`` records about a Stockfish ``.nnue`` besides its kind: the
    description, L1, the header's hash and whether the engine loads it (L1 ``engine_l1``)."""
    return {"description": net.arch.get("description", ""), "l1": net.arch["hidden"],
            "stockfish_hash": net.provenance.get("stockfish_hash"),
            "stockfish_loadable": net.arch["hidden"] == engine_l1}


def read_bytes(path: Path) -> bytes:
    """The bytes of a net file; NetFormatError naming it when it cannot be read."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise NetFormatError(f"{path}: cannot read: {e.strerror or e}") from None


class Reader:
    """Sequential little-endian reads that name the field and offset when the file ends early
    (``data``: bytes, or a memoryview to read without copying)."""

    def __init__(self, path, data: bytes):
        self.path, self.data, self.pos = path, data, 0

    def take(self, n: int, what: str) -> bytes:
        if self.pos + n > len(self.data):
            raise NetFormatError(f"{self.path}: truncated at byte {len(self.data):,} while reading {what} "
                                 f"(at offset {self.pos:,}, {n:,} bytes needed)")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u32(self, what: str) -> int:
        return struct.unpack("<I", self.take(4, what))[0]

    def array(self, dtype: str, shape: tuple, what: str) -> torch.Tensor:
        n = int(np.prod(shape))
        a = np.frombuffer(self.take(n * np.dtype(dtype).itemsize, what), dtype=dtype).reshape(shape)
        return torch.from_numpy(a.astype(a.dtype.newbyteorder("="), copy=True))


def parse_nnue(path: str | Path, data: bytes | None = None) -> dict:
    """Decode a Stockfish 15.1 ``.nnue`` file (``data``, or read from ``path``): a dict with
    ``path``, ``l1`` (from the feature transformer's hash), ``description``, ``header_hash`` and
    the tensors, named and shaped as :class:`~nnue.inference.kinds.sfnnv5.SFNNv5IntegerNet` holds them
    (:func:`nnue.inference.kinds.sfnnv5.read_nnue` builds the net).

    Checks the version, every hash, the sizes and the end of the file. Raises
    :class:`~nnue.inference.net.NetFormatError` naming the file, the field and its byte offset:
    another version (a newer or older Stockfish net), another architecture, a truncated file,
    bytes after the end."""
    path = Path(path)
    if data is None:
        data = read_bytes(path)
    r = Reader(path, data)
    version = r.u32("the version (offset 0)")
    if version != VERSION:
        hint = " (a later Stockfish's network: SFNNv6+, LEB128-compressed)" if version == 0x6A448AFA else ""
        raise NetFormatError(f"{path}: byte 0: version 0x{version:08X} is not Stockfish 15.1's 0x{VERSION:08X}"
                             f"{hint}; not a Stockfish 15.1 .nnue")
    header_hash = r.u32("the header hash (offset 4)")
    n = r.u32("the description length (offset 8)")
    if n > len(data):
        raise NetFormatError(f"{path}: byte 8: description length {n:,} is longer than the file ({len(data):,} bytes)")
    raw_desc = r.take(n, "the description")
    try:
        desc = raw_desc.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NetFormatError(f"{path}: byte {12 + e.start}: the description is not UTF-8") from None
    off = r.pos
    fth = r.u32(f"the feature transformer hash (offset {off})")
    l1x2 = fth ^ HALFKAV2_HM_HASH
    l1 = l1x2 // 2
    if l1x2 % 2 or not 32 <= l1 <= 8192 or l1 % 32:
        raise NetFormatError(f"{path}: byte {off}: feature transformer hash 0x{fth:08X} is not HalfKAv2_hm's "
                             f"(0x{HALFKAV2_HM_HASH:08X} ^ 2*L1, Stockfish 15.1: 0x{ft_hash(STOCKFISH_L1):08X}): "
                             "another feature set or architecture")
    if header_hash != file_hash(l1):
        raise NetFormatError(f"{path}: byte 4: header hash 0x{header_hash:08X} does not match the architecture "
                             f"(SFNNv5 at L1 {l1}: 0x{file_hash(l1):08X}): another network architecture")
    fs = get_feature_set("halfkav2_hm")
    F = fs.num_inputs
    want = file_size(l1, n, F)
    if len(data) > want:
        raise NetFormatError(f"{path}: {len(data) - want:,} extra bytes after the end of the net at offset {want:,}")
    ft_bias = r.array("<i2", (l1,), f"the feature transformer biases (offset {r.pos:,})")
    ft_weight = r.array("<i2", (F, l1), f"the feature transformer weights (offset {r.pos:,})")
    psqt = r.array("<i4", (F, PSQT_BUCKETS), f"the PSQT weights (offset {r.pos:,})")
    nh = network_hash(l1)
    stacks = {k: [] for k in ("fc0_bias", "fc0_weight", "fc1_bias", "fc1_weight", "fc2_bias", "fc2_weight")}
    for s in range(LAYER_STACKS):
        off = r.pos
        h = r.u32(f"layer stack {s}'s hash (offset {off:,})")
        if h != nh:
            raise NetFormatError(f"{path}: byte {off:,}: layer stack {s}'s hash 0x{h:08X} is not 0x{nh:08X} "
                                 "(fc_0 16, fc_1 32, fc_2 1): another layer-stack architecture")
        for name, dt, shape in (("fc0_bias", "<i4", (FC0_OUTPUTS,)), ("fc0_weight", "i1", (FC0_OUTPUTS, l1)),
                                ("fc1_bias", "<i4", (FC1_OUTPUTS,)), ("fc1_weight", "i1", (FC1_OUTPUTS, FC1_PADDED)),
                                ("fc2_bias", "<i4", (1,)), ("fc2_weight", "i1", (1, FC1_OUTPUTS))):
            stacks[name].append(r.array(dt, shape, f"layer stack {s}'s {name} (offset {r.pos:,})"))
    return {"path": path, "l1": l1, "description": desc, "header_hash": header_hash, "ft_bias": ft_bias,
            "ft_weight": ft_weight, "psqt": psqt, **{k: torch.stack(v) for k, v in stacks.items()}}
