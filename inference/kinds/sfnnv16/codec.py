"""Stockfish 19 ``.nnue`` files (SFNNv16, version 0x6A448AFA), the codec: decode one into named
integer tensors (:func:`parse_nnue`) and write such tensors back, byte for byte as Stockfish and
nnue-pytorch write them (:func:`nnue_bytes`). It knows the file, not the net: the integer net of
kind ``sfnnv16`` is built from what :func:`parse_nnue` returns.

Layout (little-endian; Stockfish ``network.cpp`` read/write_parameters and ``read_header``,
``nnue_feature_transformer.h`` read/write_parameters, ``nnue_common.h`` read/write_leb_128,
``layers/affine_transform*.h``; nnue-pytorch ``model/utils/serialize.py`` ``NNUEWriter``):

======================  ==================================================================
header                  u32 version 0x6A448AFA; u32 hash (feature-transformer hash XOR
                        layer-stack hash); u32 N; N bytes of description (UTF-8)
feature transformer     u32 hash; then seven blocks: biases int16[L1] (LEB128); threat
                        weights int8[59,808][L1] (raw); threat PSQT int32[59,808][8]
                        (LEB128); pawn-pair weights int8[4,560][L1] (raw); pawn-pair PSQT
                        int32[4,560][8] (LEB128); HalfKAv2_hm weights int16[22,528][L1]
                        (LEB128); HalfKAv2_hm PSQT int32[22,528][8] (LEB128)
8 layer stacks          u32 hash; fc_0 int32[32] + int8[32][pad32(L1)]; fc_1 int32[32] +
                        int8[32][64]; fc_2 int32[1] + int8[1][128] (weights [output][input],
                        the input dimension padded to a multiple of 32 as ``AffineTransform``
                        reads it: ``PaddedInputDimensions``)
end                     the file ends exactly here
======================  ==================================================================

A LEB128 block is the 17 bytes ``COMPRESSED_LEB128``, a u32 byte count, then that many bytes of
signed LEB128 values, one after another, each in its shortest form (7 bits a byte, low first, the
top bit set on every byte but a value's last; Stockfish's ``write_leb_128`` and nnue-pytorch's
``encode_leb_128_array`` both write the shortest form, so a file they wrote is rewritten
byte-identical). nnue-pytorch writes every int16 and int32 block of the feature transformer
compressed and the int8 ones raw (its ``--ft_compression leb128``, the default; Stockfish 19
reads the LEB128 blocks unconditionally, so ``--ft_compression none`` files are refused here).

Hashes, computed (not copied): the feature transformer's is ``combine(0x2E6B9D04 (Full_Threats),
0x86F2B1DD (PP_3Wide), 0x7F234CB8 (HalfKAv2_hm)) ^ 2·L1`` with ``combine``: ``h = rotl(h, 1) ^ c``
per component (``FeatureTransformer::combine_hash``); a layer stack's from ``0xEC42E90D ^ 2·L1``
through fc_0 (32 outputs), ClippedReLU, fc_1 (32), ClippedReLU, fc_2 (1) (AffineTransform:
``(0xCC03DAE4 + outputs) ^ (prev >> 1) ^ (prev << 31)``; ClippedReLU: ``0x538D24C7 + prev``; the
SqrClippedReLUs add nothing: ``NetworkArchitecture::get_hash_value``). At L1 = 1,024:
0xCB685313, 0x63337116 and 0xA85B2205, the values in the official net (tests check them).
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import torch

from ...net import NetFormatError
from ..sfnnv5.codec import Reader, affine_hash, crelu_hash, read_bytes

VERSION = 0x6A448AFA
#: the feature-set hashes, in the order of the feature transformer (Stockfish ``features/*.h``)
THREAT_HASH, PP_HASH, HALFKA_HASH = 0x2E6B9D04, 0x86F2B1DD, 0x7F234CB8
#: inputs per perspective of each feature set, in file order (86,896 in all)
THREAT_INPUTS, PP_INPUTS, HALFKA_INPUTS = 59_808, 4_560, 22_528
PSQT_BUCKETS = 8
LAYER_STACKS = 8
FC0_OUTPUTS = 32        # L2
FC1_OUTPUTS = 32        # L3
FC1_INPUTS = 2 * FC0_OUTPUTS                      # fc_0's outputs through SqrClippedReLU and ClippedReLU
FC2_INPUTS = 2 * FC0_OUTPUTS + 2 * FC1_OUTPUTS    # both activated layers
#: the L1 (feature transformer width) Stockfish 19 is built for
STOCKFISH_L1 = 1024
LEB128_MAGIC = b"COMPRESSED_LEB128"
_M = 0xFFFFFFFF
_CHUNK = 1 << 22        # LEB128 values decoded/encoded at a time (bounds the int64 temporaries: ~200 MB)


def padded(n: int) -> int:
    """An affine layer's input dimension as the file holds it: ``ceil_to_multiple(n, 32)``
    (Stockfish ``MaxSimdWidth``; nnue-pytorch pads FC inputs to 32)."""
    return (n + 31) // 32 * 32


def combine_hash(hashes) -> int:
    """Stockfish's ``FeatureTransformer::combine_hash``: ``h = rotl(h, 1) ^ c`` for each c."""
    h = 0
    for c in hashes:
        h = ((h << 1) | (h >> 31)) & _M
        h ^= c
    return h


FEATURES_HASH = combine_hash((THREAT_HASH, PP_HASH, HALFKA_HASH))


def ft_hash(l1: int) -> int:
    """The feature transformer's hash for L1 outputs per perspective (0xCB685313 at 1,024)."""
    return FEATURES_HASH ^ (2 * l1)


def stack_hash(l1: int, fc0_outputs: int = FC0_OUTPUTS, fc1_outputs: int = FC1_OUTPUTS) -> int:
    """The hash of one layer stack after an L1-wide feature transformer (0x63337116 at 1,024)."""
    h = 0xEC42E90D ^ (2 * l1)
    h = crelu_hash(affine_hash(h, fc0_outputs))
    h = crelu_hash(affine_hash(h, fc1_outputs))
    return affine_hash(h, 1)


def file_hash(l1: int) -> int:
    """The header's hash: feature-transformer hash XOR layer-stack hash (0xA85B2205 at 1,024)."""
    return ft_hash(l1) ^ stack_hash(l1)


def tensor_specs(l1: int) -> dict[str, tuple[torch.dtype, tuple]]:
    """name -> (dtype, shape) of every tensor of an SFNNv16 file with L1 ``l1``, in file order.
    The layer-stack tensors are stacked over the 8 stacks; their weights are [output][input]
    with the input padded as the file holds it (fc_0: pad32(L1), fc_1: 64, fc_2: 128)."""
    S, B = LAYER_STACKS, PSQT_BUCKETS
    return {"ft_bias": (torch.int16, (l1,)),
            "threat_weight": (torch.int8, (THREAT_INPUTS, l1)), "threat_psqt": (torch.int32, (THREAT_INPUTS, B)),
            "pp_weight": (torch.int8, (PP_INPUTS, l1)), "pp_psqt": (torch.int32, (PP_INPUTS, B)),
            "halfka_weight": (torch.int16, (HALFKA_INPUTS, l1)), "halfka_psqt": (torch.int32, (HALFKA_INPUTS, B)),
            "fc0_bias": (torch.int32, (S, FC0_OUTPUTS)), "fc0_weight": (torch.int8, (S, FC0_OUTPUTS, padded(l1))),
            "fc1_bias": (torch.int32, (S, FC1_OUTPUTS)), "fc1_weight": (torch.int8, (S, FC1_OUTPUTS, padded(FC1_INPUTS))),
            "fc2_bias": (torch.int32, (S, 1)), "fc2_weight": (torch.int8, (S, 1, padded(FC2_INPUTS)))}


#: the feature transformer's blocks in file order: (tensor, compressed, what the errors call it)
FT_BLOCKS = (("ft_bias", True, "the feature transformer biases"),
             ("threat_weight", False, "the threat weights"),
             ("threat_psqt", True, "the threat PSQT weights"),
             ("pp_weight", False, "the pawn-pair weights"),
             ("pp_psqt", True, "the pawn-pair PSQT weights"),
             ("halfka_weight", True, "the HalfKAv2_hm weights"),
             ("halfka_psqt", True, "the HalfKAv2_hm PSQT weights"))
#: one layer stack's tensors in file order (all raw)
STACK_BLOCKS = ("fc0_bias", "fc0_weight", "fc1_bias", "fc1_weight", "fc2_bias", "fc2_weight")
_NP = {torch.int8: np.dtype("i1"), torch.int16: np.dtype("<i2"), torch.int32: np.dtype("<i4")}
_BITS = {torch.int8: 8, torch.int16: 16, torch.int32: 32}


def stack_bytes(l1: int) -> int:
    """Bytes of one layer stack, its hash included (35,208 at L1 = 1,024)."""
    specs = tensor_specs(l1)
    return 4 + sum(_NP[specs[k][0]].itemsize * int(np.prod(specs[k][1][1:])) for k in STACK_BLOCKS)


# ------------------------------------------------------------------ signed LEB128
def leb128_encode(values: np.ndarray) -> bytes:
    """Signed LEB128 of ``values`` (any integer array, flattened), each in its shortest form."""
    v_all = np.asarray(values).reshape(-1)
    parts = []
    for s in range(0, len(v_all), _CHUNK):
        v = v_all[s:s + _CHUNK].astype(np.int64)
        n = np.ones(len(v), dtype=np.int64)
        for k in range(1, 10):  # bytes needed: -2^(7n-1) <= v < 2^(7n-1)
            lim = 1 << (7 * k - 1)
            n += (v >= lim) | (v < -lim)
        ends = np.cumsum(n)
        starts = ends - n
        out = np.empty(int(ends[-1]) if len(v) else 0, dtype=np.uint8)
        for k in range(int(n.max()) if len(v) else 0):
            m = n > k
            byte = (v[m] >> (7 * k)) & 0x7F
            out[starts[m] + k] = (byte | np.where(n[m] > k + 1, 0x80, 0)).astype(np.uint8)
        parts.append(out.tobytes())
    return b"".join(parts)


def leb128_decode(buf: np.ndarray, count: int, bits: int, where: str, offset: int) -> np.ndarray:
    """``count`` signed LEB128 values from ``buf`` (uint8, exactly the block's bytes) -> int64.

    Raises :class:`NetFormatError` (``where``: the file and block; ``offset``: the file offset of
    ``buf[0]``) when the block holds fewer or more values than ``count``, ends inside a value, or
    a value does not fit ``bits`` bits (signed)."""
    term = np.flatnonzero(buf < 0x80)  # a value's last byte
    if len(buf) and buf[-1] >= 0x80:
        raise NetFormatError(f"{where}: truncated LEB128 block: it ends inside a value at byte "
                             f"{offset + len(buf):,} (after {len(term):,} of {count:,} values)")
    if len(term) != count:
        if len(term) < count:
            raise NetFormatError(f"{where}: its byte count {len(buf):,} (at offset {offset - 4:,}) holds "
                                 f"{len(term):,} LEB128 values, {count:,} expected")
        raise NetFormatError(f"{where}: its byte count {len(buf):,} (at offset {offset - 4:,}) disagrees with "
                             f"the block: the {count:,} values end at byte {offset + int(term[count - 1]) + 1:,}, "
                             f"{len(buf) - int(term[count - 1]) - 1:,} byte(s) before the count's end")
    out = np.empty(count, dtype=np.int64)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    for s in range(0, count, _CHUNK):
        ends = term[s:s + _CHUNK].astype(np.int64)
        starts = np.empty_like(ends)
        starts[0] = int(term[s - 1]) + 1 if s else 0
        starts[1:] = ends[:-1] + 1
        n = ends - starts + 1
        if n.max() > (bits + 6) // 7:
            i = int(np.argmax(n > (bits + 6) // 7))
            raise NetFormatError(f"{where}: LEB128 value {s + i:,} at byte {offset + int(starts[i]):,} takes "
                                 f"{int(n[i])} bytes: more than an int{bits} needs")
        v = np.zeros(len(ends), dtype=np.int64)
        for k in range(int(n.max())):
            m = n > k
            v[m] |= (buf[starts[m] + k].astype(np.int64) & 0x7F) << (7 * k)
        neg = (buf[ends] & 0x40) != 0
        v[neg] -= np.left_shift(1, 7 * n[neg])
        bad = (v < lo) | (v > hi)
        if bad.any():
            i = int(np.argmax(bad))
            raise NetFormatError(f"{where}: LEB128 value {s + i:,} at byte {offset + int(starts[i]):,} is "
                                 f"{int(v[i]):,}, outside int{bits}")
        out[s:s + len(ends)] = v
    return out


# ------------------------------------------------------------------ reading
def _stack_dims(l1: int, h: int) -> tuple[int, int] | None:
    """The (fc_0, fc_1) output counts whose layer-stack hash after an L1-wide feature
    transformer is ``h``, or None. The hash is not one-to-one, so the likeliest come first: one
    of the two as SFNNv16 has it (up to 1,024 for the other), then both multiples of 8 (up to
    512), then any up to 64 (about 12,000 hashes, a few ms)."""
    ones = [(a, FC1_OUTPUTS) for a in range(1, 1025)] + [(FC0_OUTPUTS, b) for b in range(1, 1025)]
    eights = [(a, b) for a in range(8, 513, 8) for b in range(8, 513, 8)]
    small = [(a, b) for a in range(1, 65) for b in range(1, 65)]
    for a, b in ones + eights + small:
        if stack_hash(l1, a, b) == h:
            return a, b
    return None


def _check_header(path, header_hash: int, fth: int, off: int) -> int:
    """L1 from the feature transformer's hash ``fth`` (at byte ``off``), checked against the
    header's hash; NetFormatError naming the dimension that differs."""
    l1x2 = fth ^ FEATURES_HASH
    l1 = l1x2 // 2
    if l1x2 % 2 or not 32 <= l1 <= 16384 or l1 % 32:
        raise NetFormatError(
            f"{path}: byte {off}: feature transformer hash 0x{fth:08X} is not SFNNv16's (Full_Threats + PP_3Wide + "
            f"HalfKAv2_hm: 0x{FEATURES_HASH:08X} ^ 2*L1, L1 a multiple of 32; Stockfish 19: "
            f"0x{ft_hash(STOCKFISH_L1):08X}): another feature set")
    if header_hash != file_hash(l1):
        dims = _stack_dims(l1, header_hash ^ fth)
        what = (f"the hash of layer stacks with fc_0 {dims[0]} and fc_1 {dims[1]} outputs (SFNNv16: {FC0_OUTPUTS} "
                f"and {FC1_OUTPUTS})" if dims else "another layer-stack architecture")
        raise NetFormatError(f"{path}: byte 4: header hash 0x{header_hash:08X} is not SFNNv16's at L1 {l1} "
                             f"(0x{file_hash(l1):08X}): {what}")
    return l1


def _walk(path, data: bytes, decode: bool, exact_end: bool) -> tuple[dict, int]:
    """Read the file (``decode``: the tensors too; otherwise only the layout, every count
    followed) -> (fields, end offset). Every check of :func:`parse_nnue`."""
    r = Reader(path, memoryview(data))
    version = r.u32("the version")
    if version != VERSION:
        hint = {0x7AF32F20: " (Stockfish 12-18's version: a Stockfish 15.1 net is imported as sfnnv5)"}.get(version, "")
        raise NetFormatError(f"{path}: byte 0: version 0x{version:08X} is not Stockfish 19's 0x{VERSION:08X}{hint}")
    header_hash = r.u32("the header hash")
    n = r.u32("the description length")
    if n > len(data):
        raise NetFormatError(f"{path}: byte 8: description length {n:,} is longer than the file ({len(data):,} bytes)")
    raw_desc = bytes(r.take(n, "the description"))
    try:
        desc = raw_desc.decode("utf-8")
    except UnicodeDecodeError as e:
        raise NetFormatError(f"{path}: byte {12 + e.start}: the description is not UTF-8") from None
    off = r.pos
    l1 = _check_header(path, header_hash, r.u32("the feature transformer hash"), off)
    specs = tensor_specs(l1)
    out = {"path": Path(path), "version": version, "l1": l1, "description": desc, "header_hash": header_hash}
    for name, compressed, what in FT_BLOCKS:
        dtype, shape = specs[name]
        count = int(np.prod(shape))
        start = r.pos
        if compressed:
            magic = bytes(r.take(len(LEB128_MAGIC), f"{what}' LEB128 magic"))
            if magic != LEB128_MAGIC:
                raise NetFormatError(f"{path}: byte {start:,}: {what} are not a LEB128 block (no "
                                     f"{LEB128_MAGIC.decode()} magic; Stockfish 19 reads them compressed, "
                                     "nnue-pytorch writes them so unless --ft_compression none)")
            nbytes = r.u32(f"{what}' LEB128 byte count")
            body_at = r.pos
            if body_at + nbytes > len(data):
                raise NetFormatError(f"{path}: truncated LEB128 block: {what} (at offset {start:,}) need "
                                     f"{nbytes:,} bytes from offset {body_at:,}, the file ends at byte {len(data):,}")
            body = np.frombuffer(r.take(nbytes, what), dtype=np.uint8)
            if decode:
                v = leb128_decode(body, count, _BITS[dtype], f"{path}: {what} (LEB128 block at offset {start:,})",
                                  body_at)
                out[name] = torch.from_numpy(v.astype(_NP[dtype].newbyteorder("="))).reshape(shape)
            elif nbytes < count:
                raise NetFormatError(f"{path}: {what} (LEB128 block at offset {start:,}): its byte count "
                                     f"{nbytes:,} cannot hold {count:,} values")
        else:
            raw = r.take(count * _NP[dtype].itemsize, what)
            if decode:
                out[name] = torch.from_numpy(np.frombuffer(raw, dtype=_NP[dtype]).astype(
                    _NP[dtype].newbyteorder("="))).reshape(shape)
    sh = stack_hash(l1)
    stacks = {k: [] for k in STACK_BLOCKS}
    for s in range(LAYER_STACKS):
        off = r.pos
        h = r.u32(f"layer stack {s}'s hash")
        if h != sh:
            dims = _stack_dims(l1, h)
            what = (f"the hash of fc_0 {dims[0]} and fc_1 {dims[1]} outputs (SFNNv16: {FC0_OUTPUTS} and "
                    f"{FC1_OUTPUTS})" if dims else "another layer-stack architecture")
            raise NetFormatError(f"{path}: byte {off:,}: layer stack {s}'s hash 0x{h:08X} is not 0x{sh:08X}: {what}")
        for name in STACK_BLOCKS:
            dtype, shape = specs[name]
            raw = r.take(int(np.prod(shape[1:])) * _NP[dtype].itemsize,
                         f"layer stack {s}'s {name}")
            if decode:
                stacks[name].append(torch.from_numpy(np.frombuffer(raw, dtype=_NP[dtype]).astype(
                    _NP[dtype].newbyteorder("="))).reshape(shape[1:]))
    if exact_end and r.pos != len(data):
        raise NetFormatError(f"{path}: {len(data) - r.pos:,} extra bytes after the end of the net at offset {r.pos:,}")
    if decode:
        out.update({k: torch.stack(v) for k, v in stacks.items()})
    return out, r.pos


def parse_nnue(path: str | Path, data: bytes | None = None) -> dict:
    """Decode a Stockfish 19 ``.nnue`` file (``data``, or read from ``path``).

    Returns a dict: ``path``, ``version``, ``l1`` (from the feature transformer's hash),
    ``description`` (str), ``header_hash``, and the tensors of :func:`tensor_specs` (torch,
    their dtypes and shapes: ``ft_bias`` int16 (L1,); ``threat_weight`` int8 (59,808, L1);
    ``threat_psqt`` int32 (59,808, 8); ``pp_weight`` int8 (4,560, L1); ``pp_psqt`` int32
    (4,560, 8); ``halfka_weight`` int16 (22,528, L1); ``halfka_psqt`` int32 (22,528, 8);
    ``fc0_bias`` int32 (8, 32), ``fc0_weight`` int8 (8, 32, pad32(L1)); ``fc1_bias`` int32
    (8, 32), ``fc1_weight`` int8 (8, 32, 64); ``fc2_bias`` int32 (8, 1), ``fc2_weight`` int8
    (8, 1, 128)).

    Checks the version, every hash (computed for the file's L1), every block's magic, count and
    size, every LEB128 value's range, and the end of the file. Raises
    :class:`~nnue.inference.net.NetFormatError`, one line naming the file, the block or field
    and its byte offset: another version (naming the one read), a truncated file or LEB128
    block, a LEB128 count that disagrees with its block, hashes of another shape (naming the
    dimension: L1, the feature set, fc_0 / fc_1 outputs), bytes after the end."""
    path = Path(path)
    if data is None:
        data = read_bytes(path)
    return _walk(path, data, decode=True, exact_end=True)[0]


def net_extent(data, start: int = 0, where: str = "memory") -> int:
    """The number of bytes of the SFNNv16 net that begins at ``data[start]`` (a buffer that may
    go on after it, e.g. a memory image), following every block's count without decoding the
    values. Raises NetFormatError as :func:`parse_nnue` does (offsets relative to ``start``)."""
    return _walk(f"{where} at offset {start:,}", memoryview(data)[start:], decode=False, exact_end=False)[1]


# ------------------------------------------------------------------ writing
def check_tensors(t: dict) -> int:
    """L1 of the tensor dict ``t`` (:func:`tensor_specs`' names, dtypes and shapes, from
    ``ft_bias``); ValueError naming the tensor and the dimension that differs."""
    if "ft_bias" not in t or getattr(t["ft_bias"], "ndim", None) != 1:
        raise ValueError("ft_bias: missing or not one-dimensional (int16, (L1,))")
    l1 = int(t["ft_bias"].shape[0])
    if l1 < 32 or l1 % 32:
        raise ValueError(f"ft_bias: L1 {l1} is not a positive multiple of 32")
    for name, (dtype, shape) in tensor_specs(l1).items():
        x = t.get(name)
        if not isinstance(x, torch.Tensor):
            raise ValueError(f"{name}: missing (a {str(dtype).replace('torch.', '')} tensor of shape {shape})")
        if x.dtype != dtype:
            raise ValueError(f"{name}: dtype {str(x.dtype).replace('torch.', '')}, the file holds "
                             f"{str(dtype).replace('torch.', '')}")
        if tuple(x.shape) != shape:
            dim = next((i for i, (a, b) in enumerate(zip(x.shape, shape)) if a != b), min(x.ndim, len(shape)))
            raise ValueError(f"{name}: shape {tuple(x.shape)}, the file holds {shape} (dimension {dim} differs)")
    return l1


def nnue_bytes(t: dict, description: str | None = None) -> bytes:
    """The ``.nnue`` file of the tensors ``t`` (what :func:`parse_nnue` returns, or any dict with
    those names, dtypes and shapes; L1 from ``ft_bias``), its description ``description`` or
    ``t["description"]``. Hashes computed for the L1; int16 and int32 feature-transformer blocks
    LEB128-compressed, int8 ones raw. Raises ValueError naming a tensor of another dtype or
    shape."""
    l1 = check_tensors(t)
    desc = (t.get("description", "") if description is None else description).encode("utf-8")

    def raw(x: torch.Tensor) -> bytes:
        return x.contiguous().numpy().astype(_NP[x.dtype], copy=False).tobytes()

    parts = [struct.pack("<III", VERSION, file_hash(l1), len(desc)), desc, struct.pack("<I", ft_hash(l1))]
    for name, compressed, _ in FT_BLOCKS:
        if compressed:
            body = leb128_encode(t[name].numpy())
            parts += [LEB128_MAGIC, struct.pack("<I", len(body)), body]
        else:
            parts.append(raw(t[name]))
    sh = struct.pack("<I", stack_hash(l1))
    for s in range(LAYER_STACKS):
        parts.append(sh)
        parts += [raw(t[k][s]) for k in STACK_BLOCKS]
    return b"".join(parts)
