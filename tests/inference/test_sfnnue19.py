"""The Stockfish 19 .nnue codec without an engine: its hashes, signed LEB128 against a per-value
reference, synthetic nets of several L1 round-tripping byte for byte, and every kind of damaged
file refused in one line naming the block and byte offset. (The official net's round trip and the
engine loading what the codec writes: tests/engines/test_sf19.py.)"""
from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

from nnue.inference import NetFormatError
from nnue.inference.kinds.sfnnv16 import codec as c


def test_hashes_are_stockfish_19s():
    assert (c.ft_hash(1024), c.stack_hash(1024), c.file_hash(1024)) == (0xCB685313, 0x63337116, 0xA85B2205)
    assert c.stack_bytes(1024) == 35_208
    # another L1 gives other hashes, each named by it
    assert len({c.file_hash(l1) for l1 in (128, 256, 512, 1024, 1536, 3072)}) == 6


def _ref_encode(v: int) -> bytes:
    """Signed LEB128, one value at a time (the textbook loop)."""
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if (v == 0 and not b & 0x40) or (v == -1 and b & 0x40):
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


EDGES = [0, 1, -1, 63, 64, -64, -65, 127, 128, -128, 8191, 8192, -8192, -8193, 32767, -32768]
EDGES32 = EDGES + [2**20, -2**20 - 1, 2**27 - 1, 2**27, -2**27, -2**27 - 1, 2**31 - 1, -2**31]


def test_leb128_equals_the_reference_loop():
    g = np.random.default_rng(0)
    for bits, edges in ((16, EDGES), (32, EDGES32)):
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1))
        v = np.concatenate([np.array(edges, dtype=np.int64), g.integers(lo, hi, 5000),
                            g.integers(-300, 300, 5000)])
        enc = c.leb128_encode(v)
        assert enc == b"".join(_ref_encode(int(x)) for x in v)
        back = c.leb128_decode(np.frombuffer(enc, dtype=np.uint8), len(v), bits, "t", 0)
        assert np.array_equal(back, v)
    assert c.leb128_encode(np.zeros(0, dtype=np.int16)) == b""


def random_tensors(l1: int, seed: int = 0, description: str = "synthetic SFNNv16 net") -> dict:
    """Random tensors of every SFNNv16 block at L1 ``l1``, over each dtype's whole range (the
    LEB128 blocks get 1- to 3-byte (int16) and 1- to 5-byte (int32) values)."""
    g = torch.Generator().manual_seed(seed)
    t = {}
    for name, (dtype, shape) in c.tensor_specs(l1).items():
        info = torch.iinfo(dtype)
        x = torch.randint(info.min, info.max + 1, shape, generator=g, dtype=torch.int64)
        small = torch.randint(-70, 70, shape, generator=g, dtype=torch.int64)  # most weights are small
        t[name] = torch.where(torch.rand(shape, generator=g) < 0.7, small, x).to(dtype)
    t["description"] = description
    return t


@pytest.mark.parametrize("l1", [32, 96, 256])
def test_synthetic_nets_round_trip_byte_for_byte(l1):
    t = random_tensors(l1, seed=l1, description=f"é L1 {l1}")
    data = c.nnue_bytes(t)
    back = c.parse_nnue("synthetic.nnue", data)
    assert back["l1"] == l1 and back["description"] == f"é L1 {l1}" and back["header_hash"] == c.file_hash(l1)
    for name, (dtype, shape) in c.tensor_specs(l1).items():
        assert back[name].dtype == dtype and tuple(back[name].shape) == shape, name
        assert torch.equal(back[name], t[name]), name
    assert c.nnue_bytes(back) == data
    assert c.net_extent(data + b"more bytes after it") == len(data)


def _offsets(data: bytes) -> dict:
    """The byte offset of each part of a file this codec wrote (walking the blocks' counts)."""
    n = struct.unpack_from("<I", data, 8)[0]
    p = 12 + n
    out = {"ft_hash": p}
    p += 4
    l1 = c.check_tensors(c.parse_nnue("x", data))
    specs = c.tensor_specs(l1)
    for name, compressed, _ in c.FT_BLOCKS:
        out[name] = p
        if compressed:
            p += 17 + 4 + struct.unpack_from("<I", data, p + 17)[0]
        else:
            p += int(np.prod(specs[name][1]))
    out["stack0"] = p
    return out


def _damaged(data: bytes):
    """(name, bytes, what the one-line error must say) for each kind of damage."""
    o = _offsets(data)
    hk = o["halfka_weight"]
    hk_n = struct.unpack_from("<I", data, hk + 17)[0]
    hk_body = hk + 21
    yield "other version", struct.pack("<I", 0x7AF32F20) + data[4:], \
        r"byte 0: version 0x7AF32F20 is not Stockfish 19's 0x6A448AFA \(Stockfish 12-18's version"
    yield "unknown version", struct.pack("<I", 0x12345678) + data[4:], r"byte 0: version 0x12345678 is not"
    yield "truncated in the header", data[:6], r"truncated at byte 6 while reading the header hash"
    yield "truncated in the threat weights", data[:o["threat_weight"] + 1000], \
        rf"truncated at byte {o['threat_weight'] + 1000:,} while reading the threat weights \(at offset {o['threat_weight']:,}"
    yield "truncated LEB128 block", data[:hk_body + 100], \
        rf"truncated LEB128 block: the HalfKAv2_hm weights \(at offset {hk:,}\) need {hk_n:,} bytes from offset {hk_body:,}"
    yield "truncated in a LEB128 magic", data[:hk + 5], r"while reading the HalfKAv2_hm weights' LEB128 magic"
    yield "truncated in the last stack", data[:-5], r"truncated at byte [\d,]+ while reading layer stack 7's fc2_weight"
    yield "extra bytes", data + b"\0\0\0", r"3 extra bytes after the end of the net at offset [\d,]+"
    # the HalfKAv2_hm block's count one byte short: the block ends inside a value
    short = bytearray(data)
    struct.pack_into("<I", short, hk + 17, hk_n - 1)
    yield "LEB128 count short", bytes(short[:hk_body + hk_n - 1] + short[hk_body + hk_n:]), \
        r"the HalfKAv2_hm weights \(LEB128 block at offset [\d,]+\): truncated LEB128 block: it ends inside a value|" \
        r"holds [\d,]+ LEB128 values, [\d,]+ expected"
    # one value too many inside the count: the count disagrees with the block
    longer = bytearray(data)
    struct.pack_into("<I", longer, hk + 17, hk_n + 1)
    yield "LEB128 count long", bytes(longer[:hk_body + hk_n] + b"\x05" + longer[hk_body + hk_n:]), \
        r"its byte count [\d,]+ \(at offset [\d,]+\) disagrees with the block: the [\d,]+ values end at byte"
    # a 3-byte value beyond int16 in an int16 block
    big = bytearray(data)
    bias = o["ft_bias"] + 21
    n_bias = struct.unpack_from("<I", data, o["ft_bias"] + 17)[0]
    first = 1 + next(i for i in range(n_bias) if data[bias + i] < 0x80)
    over = bytes([0x80, 0x80, 0x02])  # 32768
    body = over + data[bias + first:bias + n_bias]
    struct.pack_into("<I", big, o["ft_bias"] + 17, len(body))
    yield "value outside int16", bytes(big[:bias] + body + big[bias + n_bias:]), \
        r"LEB128 value 0 at byte [\d,]+ is 32,768, outside int16"
    # an int16 block written raw (nnue-pytorch --ft_compression none)
    yield "no LEB128 magic", data[:hk] + b"X" + data[hk + 1:], \
        rf"byte {hk:,}: the HalfKAv2_hm weights are not a LEB128 block \(no COMPRESSED_LEB128 magic"
    yield "description not UTF-8", data[:12] + b"\xff" + data[13:], r"byte 12: the description is not UTF-8"
    yield "description too long", data[:8] + struct.pack("<I", 10**9) + data[12:], r"byte 8: description length"


@pytest.fixture(scope="module")
def small() -> bytes:
    return c.nnue_bytes(random_tensors(64, seed=3))


def test_damaged_files_are_refused_in_one_line(small):
    seen = set()
    for name, bad, msg in _damaged(small):
        with pytest.raises(NetFormatError, match=msg) as e:
            c.parse_nnue("bad.nnue", bad)
        assert "\n" not in str(e.value) and str(e.value).startswith("bad.nnue: "), (name, e.value)
        seen.add(name)
    assert len(seen) == 14


def _with_hash(data: bytes, at: int, h: int) -> bytes:
    return data[:at] + struct.pack("<I", h) + data[at + 4:]


def test_hashes_of_another_shape_name_the_dimension(small):
    o = _offsets(small)
    # the feature transformer of another L1 (its header hash matching it): the header hash names
    # the L1 it would need, the layer stacks then name theirs
    cases = [
        (_with_hash(small, 4, 0x12345678), r"byte 4: header hash 0x12345678 is not SFNNv16's at L1 64 "
                                           r"\(0x[0-9A-F]{8}\): another layer-stack architecture"),
        (_with_hash(small, 4, c.ft_hash(64) ^ c.stack_hash(64, 16, 32)),
         r"byte 4: header hash 0x[0-9A-F]{8} is not SFNNv16's at L1 64 .*: the hash of layer stacks with fc_0 16 and fc_1 32 "
         r"outputs \(SFNNv16: 32 and 32\)"),
        (_with_hash(small, o["ft_hash"], 0x11111111),
         rf"byte {o['ft_hash']}: feature transformer hash 0x11111111 is not SFNNv16's .*another feature set"),
        (_with_hash(small, o["stack0"], c.stack_hash(64, 32, 15)),
         rf"byte {o['stack0']:,}: layer stack 0's hash 0x[0-9A-F]{{8}} is not 0x[0-9A-F]{{8}}: the hash of fc_0 32 and fc_1 15 outputs"),
    ]
    for bad, msg in cases:
        with pytest.raises(NetFormatError, match=msg):
            c.parse_nnue("bad.nnue", bad)
    # a file of L1 128 whose body is L1 64's: read as L1 128, its blocks then disagree
    other = _with_hash(_with_hash(small, 4, c.file_hash(128)), o["ft_hash"], c.ft_hash(128))
    with pytest.raises(NetFormatError, match=r"feature transformer biases .* holds 64 LEB128 values, 128 expected"):
        c.parse_nnue("bad.nnue", other)


def test_the_writer_names_a_tensor_of_another_shape():
    t = random_tensors(32, seed=1)
    for name, bad, msg in [("fc1_weight", torch.zeros(8, 32, 30, dtype=torch.int8),
                            r"fc1_weight: shape \(8, 32, 30\), the file holds \(8, 32, 64\) \(dimension 2 differs\)"),
                           ("halfka_weight", t["halfka_weight"].to(torch.int32), r"halfka_weight: dtype int32, the file holds int16"),
                           ("threat_psqt", None, r"threat_psqt: missing")]:
        u = dict(t)
        if bad is None:
            del u[name]
        else:
            u[name] = bad
        with pytest.raises(ValueError, match=msg):
            c.nnue_bytes(u)
