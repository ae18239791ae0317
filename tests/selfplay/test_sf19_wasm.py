"""The WebAssembly data-section reader that takes the official Stockfish 19 net out of
``stockfish-19-single.wasm`` (nnue.selfplay.sf19), on modules built here byte by byte: segments
laid out with gaps (the runs of zeros the linker leaves out), every segment flag, a net cut
exactly at its end, and malformed modules refused in one line."""
from __future__ import annotations

import struct

import pytest

from nnue.inference.kinds.sfnnv16 import codec as sfnnue19
from nnue.selfplay import sf19
from nnue.selfplay.sf19 import WasmError, data_segments, extract_net, memory_image

from ..inference.test_sfnnue19 import _ref_encode as sleb, random_tensors


def uleb(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def section(sid: int, body: bytes) -> bytes:
    return bytes([sid]) + uleb(len(body)) + body


def active(offset: int, data: bytes, flag: int = 0, op: int = 0x41) -> bytes:
    head = uleb(flag) + (uleb(0) if flag == 2 else b"")
    return head + bytes([op]) + sleb(offset) + b"\x0b" + uleb(len(data)) + data


def passive(data: bytes) -> bytes:
    return uleb(1) + uleb(len(data)) + data


def module(*segments: bytes, extra_sections: bool = True) -> bytes:
    out = b"\0asm\x01\0\0\0"
    if extra_sections:  # a type section and a custom section before the data section, as a linker writes them
        out += section(1, b"\x01\x60\x00\x00") + section(0, b"\x04name\x00")
    return out + section(11, uleb(len(segments)) + b"".join(segments))


def split_without_zero_runs(net: bytes, base: int, run: int = 64) -> list[bytes]:
    """The net as active segments at base + offset, with every run of >= ``run`` zero bytes left
    out (what wasm-ld does with a data section)."""
    segs, i = [], 0
    while i < len(net):
        if net[i:i + run] == bytes(run):
            i += run
            while i < len(net) and net[i] == 0:
                i += 1
            continue
        j = i
        while j < len(net) and net[j:j + run] != bytes(run):
            j += 1
        segs.append(active(base + i, net[i:j], flag=2 if len(segs) % 3 == 1 else 0))
        i = j
    return segs


@pytest.fixture(scope="module")
def net() -> bytes:
    t = random_tensors(32, seed=7)
    t["threat_weight"][1000:3000] = 0  # long zero runs, left out of the segments
    t["fc0_weight"][3] = 0
    return sfnnue19.nnue_bytes(t)


def test_the_net_is_cut_out_of_its_segments_exactly(net):
    decoy = struct.pack("<I", 0x6A448AFA) + b"not a net" * 3  # a stray version field before the net
    other = b"\x01\x02\x03" * 50
    segs = [active(16, decoy), active(512, other)] + split_without_zero_runs(net, 4096) + [
        active(4096 + len(net), b"\xff" * 40), passive(b"a passive segment")]
    wasm = module(*segs)
    found, n_passive = data_segments(wasm)
    assert n_passive == 1 and len(found) == len(segs) - 1
    img = memory_image(found)
    assert img[4096:4096 + len(net)] == net and img[16:16 + len(decoy)] == decoy
    assert extract_net(wasm) == net


def test_i64_offsets_and_negative_constants_decode():
    wasm = module(active(300, b"abc", op=0x42), active(2, b"xy"), extra_sections=False)
    segs, _ = data_segments(wasm)
    assert [(o, bytes(d)) for o, d in segs] == [(300, b"abc"), (2, b"xy")]
    with pytest.raises(WasmError, match="negative offset -5"):
        memory_image(data_segments(module(active(-5, b"z")))[0])


def test_malformed_modules_are_refused_in_one_line(net):
    good = module(active(0, b"abc"))
    cases = [
        (b"\0asm\x02\0\0\0", "not a WebAssembly module"),
        (good[:-2], "truncated: section 11 at byte"),
        (module(active(0, b"abc", op=0x23)), "data segment 0's offset is not a constant expression (opcode 0x23)"),
        (module(uleb(7) + b"\x00"), "data segment 0 has flag 7"),
        (module(active(0, b"abc")[:-1] + b""), "truncated"),
        (module(active(0, b"abc"), active(10, b"d"))[:-1] + b"", "truncated"),
    ]
    for wasm, msg in cases:
        with pytest.raises(WasmError) as e:
            memory_image(data_segments(wasm)[0])
        assert msg in str(e.value) and "\n" not in str(e.value), (msg, str(e.value))
    with pytest.raises(WasmError, match="no Stockfish 19 net in the module's active data segments; it has 1 passive"):
        extract_net(module(active(0, b"abc"), passive(net)))
    with pytest.raises(WasmError, match=r"the last candidate: .*truncated"):
        extract_net(module(active(0, net[:5000])))


def test_the_official_net_check_refuses_another_net(net, tmp_path):
    wasm = tmp_path / "engine.wasm"
    wasm.write_bytes(module(*split_without_zero_runs(net, 64)))
    with pytest.raises(WasmError, match=r"engine.wasm: the net found \([\d,]+ bytes, SHA-256 [0-9a-f]{12}\.\.\.\) is not "
                                        r"nn-1a298aa575a0.nnue"):
        sf19.extract_official_net(wasm, tmp_path / "out.nnue")
    assert not (tmp_path / "out.nnue").exists()
    assert sf19.main(["extract", str(wasm), str(tmp_path / "out.nnue")]) == 2


def test_the_cache_folder_follows_the_settings(monkeypatch, tmp_path):
    monkeypatch.setenv("NNUE_SF19_CACHE", str(tmp_path / "c"))
    assert sf19.official_net_path() == tmp_path / "c" / "nn-1a298aa575a0.nnue"
    monkeypatch.delenv("NNUE_SF19_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert sf19.engine_module_path() == tmp_path / "x" / "nnue-forge" / "sf19" / sf19.ENGINE_MODULE
