"""Issue 15 item 4: a file from which nothing decodes is not a dataset (FormatError naming the
file and offset, nothing written for it), and a binpack cut inside its block keeps every whole
chain before the cut."""
from __future__ import annotations

import json
import os
import struct

import pytest
import zstandard

from nnue.pipeline import manifest as mf
from nnue.pipeline.formats import FormatError
from nnue.pipeline.pack import pack
from tests.samples import SAMPLE, public


def _nothing_written(ds):
    return not ds.exists() or not any(p.name.startswith(("part-", "rejects-", ".")) for p in ds.iterdir())


CASES = {
    "random .bin (viriformat by default)": ("r.bin", lambda: os.urandom(200_000), "auto"),
    "random .vf": ("r.vf", lambda: os.urandom(50_000), "auto"),
    "random .bf": ("r.bf", lambda: os.urandom(32 * 3000), "auto"),
    "random .marlin": ("r.marlin", lambda: os.urandom(32 * 3000), "auto"),
    "BINP header + garbage": ("g.binpack", lambda: b"BINP" + struct.pack("<I", 5000) + os.urandom(5000), "auto"),
    "BINP header, block cut": ("c.binpack", lambda: b"BINP" + struct.pack("<I", 5000) + os.urandom(20), "auto"),
    "corrupt .zst": ("a.plain.zst", lambda: zstandard.ZstdCompressor().compress(SAMPLE.read_bytes())[:-2000]
                     + os.urandom(500), "auto"),
    "not zstd at all": ("b.plain.zst", lambda: os.urandom(3000), "auto"),
    "corrupt .gz": ("a.plain.gz", lambda: b"\x1f\x8b\x08\x00" + os.urandom(3000), "auto"),
    "text as bulletformat": ("t.txt", lambda: SAMPLE.read_bytes(), "bulletformat"),
    "text as marlinformat": ("t.plain", lambda: SAMPLE.read_bytes(), "marlinformat"),
    "text as bin": ("t.plain", lambda: SAMPLE.read_bytes(), "bin"),
    "text as viriformat": ("t.plain", lambda: SAMPLE.read_bytes(), "viriformat"),
    "text as binpack": ("t.plain", lambda: SAMPLE.read_bytes(), "binpack"),
    "shorter than one record": ("s.bf", lambda: os.urandom(20), "auto"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_nothing_decodes_is_a_format_error(tmp_path, name):
    fname, data, fmt = CASES[name]
    src = tmp_path / fname
    src.write_bytes(data())
    ds = tmp_path / "ds"
    with pytest.raises(FormatError) as e:
        pack([src], ds, fmt=fmt, progress=False)
    msg = str(e.value)
    assert str(src) in msg and "\n" not in msg
    assert "byte" in msg or "stream" in msg or "records all fail" in msg, msg
    assert _nothing_written(ds)


def test_a_good_file_next_to_a_bad_one_is_kept(tmp_path):
    bad = tmp_path / "r.bin"
    bad.write_bytes(os.urandom(10_000))
    ds = tmp_path / "ds"
    pack([SAMPLE], ds, progress=False)
    with pytest.raises(FormatError):
        pack([bad], ds, progress=False)
    m = mf.load(ds)
    assert len(m["files"]) == 1 and sorted(p.name for p in ds.iterdir() if p.name.startswith("part-")) != []


def _chains(data: bytes, most: int = 6):
    """Byte offsets (within the block) of the chains of a one-block binpack, by decoding."""
    from nnue.pipeline.formats.binpack import read_chain

    size = int.from_bytes(data[4:8], "little")
    block = data[8:8 + size]
    pos, game, ends = 0, 0, []
    while pos < len(block) and len(ends) < most:
        recs, pos = read_chain(block, pos, 8, game)
        ends.append((pos, len(recs)))
        game += 1
    return ends


def test_binpack_cut_inside_its_block_keeps_the_whole_chains(tmp_path):
    src = public("small.binpack").read_bytes()
    first = _chains(src)[:6]
    body = src[8:8 + first[-1][0]]
    data = b"BINP" + len(body).to_bytes(4, "little") + body  # one block of its first 6 chains
    ends = _chains(data)
    assert len(ends) == 6
    full = pack([_write(tmp_path, "full.binpack", data)], tmp_path / "full", progress=False)
    assert full["rejected"] == {}
    for k in (1, 3, 5):  # cut in the middle of chain k (0-based): chains 0..k-1 are whole
        cut_at = 8 + (ends[k - 1][0] + ends[k][0]) // 2
        src = _write(tmp_path, f"cut{k}.binpack", data[:cut_at])
        s = pack([src], tmp_path / f"ds{k}", progress=False)
        kept = sum(n for _, n in ends[:k])
        assert s["packed"] == kept and s["rejected"] == {"truncated record": 1}, s
        entry = next(iter(mf.load(tmp_path / f"ds{k}")["files"].values()))
        rej = [json.loads(x) for x in (tmp_path / f"ds{k}" / entry["rejects"]).read_text().splitlines()]
        assert rej[0]["location"] == f"byte {8 + ends[k - 1][0]}"
    # cut exactly at a chain boundary: all chains before it kept, the missing rest one reject
    src = _write(tmp_path, "cutb.binpack", data[:8 + ends[2][0]])
    s = pack([src], tmp_path / "dsb", progress=False)
    assert s["packed"] == sum(n for _, n in ends[:3]) and s["rejected"] == {"truncated record": 1}


def _write(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return p
