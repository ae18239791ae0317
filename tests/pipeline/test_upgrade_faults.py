"""``nnue convert DATASET --to chained`` killed with SIGKILL part way (no ``except`` runs, so its
temporary file stays): the dataset reads the same rows, and a rerun finishes the upgrade and
removes the dead run's temporary file (before, it stayed beside the parts for good: only
``pack --watch`` removed orphans). And a flat part whose page fails its checksum: one line naming
the file and row group (before: pyarrow's message alone)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from nnue.pipeline import manifest as mf
from nnue.pipeline import parts
from nnue.pipeline.pack import pack
from tests.samples import CUT, SAMPLE, XFEN960, selfplay

# runs the upgrade and kills itself with SIGKILL as it is about to rename its second part into place
_KILLED_AT_SECOND_RENAME = """
import os, signal, sys
from nnue.pipeline import upgrade
real, calls = os.replace, []
def replace(a, b):
    calls.append(b)
    if len(calls) == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    real(a, b)
upgrade.os.replace = replace
upgrade.upgrade(sys.argv[1])
"""


def _rows(ds: Path) -> pa.Table:
    m = mf.load(ds)
    return pa.concat_tables([parts.read_part(ds / n) for e in sorted(m["files"].values(), key=mf.entry_key)
                             for n in mf.entry_parts(e)])


def _versions(ds: Path) -> list[int]:
    return sorted(parts.layout(parts.open_part(p)) for p in ds.glob("part-*.parquet"))


def test_an_upgrade_killed_part_way_reads_and_a_rerun_finishes(tmp_path):
    ds = tmp_path / "ds"
    ds.mkdir()
    mf.save(ds, mf.new(2))  # a dataset of schema 2
    pack([SAMPLE, selfplay(f"{XFEN960}.plain"), selfplay(f"{CUT}.plain")], ds, progress=False)
    before = _rows(ds)
    assert _versions(ds) == [2, 2, 2]
    r = subprocess.run([sys.executable, "-c", _KILLED_AT_SECOND_RENAME, str(ds)], capture_output=True, text=True)
    assert r.returncode == -9, r.stderr
    assert _versions(ds) == [2, 2, 3] and mf.load(ds)["schema_version"] == 2
    assert len(list(ds.glob(".part-*.tmp"))) == 1  # the killed run's temporary file
    assert _rows(ds).equals(before)
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "convert", str(ds), "--to", "chained", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    m = mf.load(ds)
    assert _versions(ds) == [3, 3, 3] and m["schema_version"] == 3
    assert m["upgraded"][-1]["parts"] == 3 and m["upgraded"][-1]["parts_upgraded"] == 2
    assert _rows(ds).equals(before)
    assert not list(ds.glob(".part-*.tmp"))


def test_an_upgrade_names_a_flat_page_that_does_not_read(tmp_path):
    ds = tmp_path / "ds"
    pack([SAMPLE], ds, progress=False, layout="flat")
    part = next(ds.glob("part-*.parquet"))
    md = pq.ParquetFile(part).metadata.row_group(0)
    c = next(md.column(i) for i in range(md.num_columns) if md.column(i).path_in_schema == "score")
    data = bytearray(part.read_bytes())
    mid = c.data_page_offset + c.total_compressed_size // 2
    for i in range(mid, mid + 8):
        data[i] ^= 0x5A
    part.write_bytes(bytes(data))
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "convert", str(ds), "--to", "chained"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"{part}: row group 0: unreadable" in r.stderr, r.stderr
    assert part.read_bytes() == bytes(data) and not list(ds.glob(".part-*.tmp"))
    assert mf.load(ds)["schema_version"] == 1


def test_an_upgrade_names_a_value_schema_3_cannot_hold(tmp_path):
    """A schema-2 part whose flags column holds 99 (bits schema 3's status has no room for):
    one line naming the file, row group and row (before: the message alone, no file)."""
    ds = tmp_path / "ds"
    ds.mkdir()
    mf.save(ds, mf.new(2))
    pack([SAMPLE], ds, progress=False)
    part = next(ds.glob("part-*.parquet"))
    pf = parts.open_part(part)
    t = pf.read()
    flags = t.column("flags").to_pylist()
    flags[9] = 99
    t = t.set_column(t.schema.get_field_index("flags"), t.schema.field("flags"), pa.array(flags, pa.uint8()))
    with parts.writer(part, pf.schema_arrow) as w:
        w.write_table(t)
    data = part.read_bytes()
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "convert", str(ds), "--to", "chained"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{part}: row group 0, row 9: a flags value that is null or above 15" in r.stderr, r.stderr
    assert part.read_bytes() == data and not list(ds.glob(".part-*.tmp")) and mf.load(ds)["schema_version"] == 2
