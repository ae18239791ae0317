"""A damaged part, in either layout, is quarantined whole by the training stream (one line naming
it, its rows counted under ``damaged``, never rows read in silence) and named in one line by the
commands that read it: a page whose bytes changed (parts carry page checksums), a file cut short
(no Parquet footer), a chain that does not decode."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nnue.pipeline import parts
from nnue.pipeline.stream import Filters, PackedStream
from tests.samples import CUT, SAMPLE, selfplay

NO_FILTERS = Filters(skip_in_check=False, skip_capture=False, skip_score_none=False, skip_mate=False)


def _three_groups(out: Path, layout: str) -> Path:
    """The sample (4,015 positions) packed in ``layout`` in row groups of 1,500: three of them."""
    from nnue.pipeline import pack as pack_mod
    from nnue.pipeline.pack import pack

    old, pack_mod.ROW_GROUP = pack_mod.ROW_GROUP, 1500
    try:
        pack([SAMPLE], out, progress=False, layout=layout)
    finally:
        pack_mod.ROW_GROUP = old
    return out


@pytest.fixture
def three_groups(tmp_path, layout) -> Path:
    return _three_groups(tmp_path / "ds", layout)


def _part(ds: Path) -> Path:
    return next(ds.glob("part-*.parquet"))


def _stream(ds: Path) -> PackedStream:
    return PackedStream([ds], 256, shuffle_buffer=0, split="all", drop_last=False, filters=NO_FILTERS)


def _boards(ds: Path) -> np.ndarray:
    return np.concatenate([b["boards"].numpy() for b in _stream(ds)])


def _flip_page_bytes(part: Path, rg: int, column: str) -> None:
    """Change 32 bytes in the middle of the (compressed) data of ``column``'s first page in row
    group ``rg``: zstd may still decode it, to other values."""
    md = pq.ParquetFile(part).metadata.row_group(rg)
    c = next(md.column(i) for i in range(md.num_columns) if md.column(i).path_in_schema == column)
    data = bytearray(part.read_bytes())
    mid = c.data_page_offset + c.total_compressed_size // 2
    for i in range(mid, mid + 32):
        data[i] ^= 0x5A
    part.write_bytes(bytes(data))


def test_a_page_whose_bytes_changed_quarantines_the_part(three_groups, layout, capfd):
    """Row group 1's board (flat) or move (chained) column damaged: the stream reads row group 0,
    then quarantines the part (row groups 1 and 2 skipped and counted, one line naming the file,
    row group and the failed checksum); before page checksums the flat layout read the changed
    boards in silence, and the chained one read row group 2 after skipping 1."""
    ds = three_groups
    part = _part(ds)
    before = _boards(ds)
    sizes = [pq.ParquetFile(part).metadata.row_group(i).num_rows for i in range(3)]
    assert sizes == [1500, 1500, 1015]
    _flip_page_bytes(part, 1, "board" if layout == "flat" else "move")
    capfd.readouterr()
    s = _stream(ds)
    got = np.concatenate([b["boards"].numpy() for b in s])
    err = capfd.readouterr().err
    assert len(got) == 1500 and np.array_equal(got, before[:1500])
    assert s.counts["damaged"] == 1500 + 1015 and s.counts["read"] == 1500
    lines = [x for x in err.splitlines() if x.startswith("nnue stream: quarantined a damaged part")]
    assert len(lines) == 1, err
    assert f"{part}: row group 1: unreadable" in lines[0] and "CRC checksum verification failed" in lines[0]
    # the next epochs skip the whole part, without another line
    s.set_epoch(1)
    damaged = s.counts["damaged"]
    assert sum(len(b["score"]) for b in s) == 0 and capfd.readouterr().err == ""
    assert s.counts["damaged"] - damaged == 4015
    # a command that reads the row group names it in one line, status 2
    with pytest.raises(parts.PartError, match="row group 1: unreadable"):
        parts.read_group(parts.open_part(part), 1)
    assert parts.read_group(parts.open_part(part), 0).num_rows == 1500


def test_a_chain_that_does_not_decode_quarantines_the_part(tmp_path, capfd):
    """A chained part whose row group 1 does not decode: row group 2 is skipped too (the part is
    quarantined whole, as a page that does not read)."""
    ds = _three_groups(tmp_path / "ds", "chained")
    part = _part(ds)
    pf = parts.open_part(part)
    tables = [pf.read_row_group(g) for g in range(3)]
    t = tables[1]
    col = t.column("move").to_pylist()
    col[10] = 999  # no move of its position
    tables[1] = t.set_column(t.schema.get_field_index("move"), "move", pa.array(col, pa.uint16()))
    with parts.writer(part, pf.schema_arrow) as w:
        for x in tables:
            w.write_table(x, row_group_size=x.num_rows)
    s = _stream(ds)
    n = sum(len(b["score"]) for b in s)
    err = capfd.readouterr().err
    assert n == 1500 and s.counts["damaged"] == 1500 + 1015
    assert f"{part}: row group 1, row 10: its move index is no move of its position" in err
    assert err.count("nnue stream: quarantined a damaged part") == 1


def test_a_part_cut_short_is_quarantined_and_named(three_groups, capfd):
    """A part with no footer (cut short): the stream quarantines it when it lists the parts (no
    traceback; the other parts read); inspect names the file in one line, status 2."""
    from nnue.pipeline.pack import pack

    ds = three_groups
    part = _part(ds)
    pack([selfplay(f"{CUT}.plain")], ds, progress=False)  # a second part
    other = sum(pq.ParquetFile(p).metadata.num_rows for p in ds.glob("part-*.parquet") if p != part)
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    capfd.readouterr()
    s = _stream(ds)
    assert sum(len(b["score"]) for b in s) == other == 12_678
    err = capfd.readouterr().err
    assert f"nnue stream: quarantined a damaged part, skipped from here on: {part}: not a readable Parquet part" in err
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "inspect", str(ds)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and str(part) in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
