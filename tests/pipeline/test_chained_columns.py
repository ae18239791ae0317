"""A chained part whose columns are not the ones its schema writes, or whose values no writer makes
(a column missing, of another type, nullable where schema 3 requires it; a null score delta, a move
stored both ways, a piece count no board holds): every reader names the file (and the column, or
the row group and row) in one line, status 2, and the training stream quarantines the part and
reads the others. Before these checks such parts read as other values in silence (a uint32 read
as uint16 halves), or stopped the stream with a KeyError or a NumPy message naming no file."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nnue.pipeline import manifest as mf
from nnue.pipeline import parts
from nnue.pipeline.pack import pack
from nnue.pipeline.stream import Filters, PackedStream
from tests.samples import SAMPLE, XFEN960, XFEN960_POSITIONS, selfplay

SAMPLE_POSITIONS = 4015
NO_FILTERS = Filters(skip_in_check=False, skip_capture=False, skip_score_none=False, skip_mate=False)


def _dataset(out: Path, version: int = 3) -> tuple[Path, Path]:
    """The sample and the Chess960 set packed into a dataset of chained ``version``: (the
    dataset, the sample's part, which the tests damage)."""
    if version != 3:
        out.mkdir()
        mf.save(out, mf.new(version))
    pack([SAMPLE], out, progress=False)
    sample = set(out.glob("part-*.parquet"))
    pack([selfplay(f"{XFEN960}.plain")], out, progress=False)
    return out, sample.pop()


def _rewrite(part: Path, column: str, type_: pa.DataType | None, nullable: bool = True,
             null_row: int | None = None, version: bytes | None = None) -> None:
    """Rewrite ``part`` with ``column`` dropped (type_ None) or cast to ``type_`` (its field
    ``nullable``; a null at ``null_row`` of row group 0), its schema version metadata
    ``version`` if given; the other columns and the row groups as they are."""
    pf = pq.ParquetFile(part)
    schema = pf.schema_arrow
    tables = [pf.read_row_group(g) for g in range(pf.metadata.num_row_groups)]
    i = schema.get_field_index(column)
    if type_ is None:
        schema = schema.remove(i)
        tables = [t.drop_columns([column]) for t in tables]
    else:
        field = pa.field(column, type_, nullable=nullable)
        schema = schema.set(i, field)
        out = []
        for g, t in enumerate(tables):
            a = t.column(column).combine_chunks().cast(type_, safe=False)
            if null_row is not None and g == 0:
                values = a.to_pylist()
                values[null_row] = None
                a = pa.array(values, type_)
            out.append(t.set_column(i, field, a))
        tables = out
    if version is not None:
        schema = schema.with_metadata({**schema.metadata, parts.SCHEMA_KEY.encode(): version})
    with pq.ParquetWriter(part, schema, compression="zstd", write_page_checksum=True) as w:
        for t in tables:
            w.write_table(t.replace_schema_metadata(schema.metadata), row_group_size=max(t.num_rows, 1))


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nnue.cli", *map(str, args)], capture_output=True, text=True)


def _stream_reads_the_rest(ds: Path, part: Path, capfd, why: str) -> None:
    capfd.readouterr()
    s = PackedStream([ds], 256, shuffle_buffer=0, split="all", drop_last=False, filters=NO_FILTERS)
    got = sum(len(b["score"]) for b in s)
    err = capfd.readouterr().err
    assert got == XFEN960_POSITIONS and s.counts["damaged"] == SAMPLE_POSITIONS, (got, dict(s.counts), err)
    lines = [x for x in err.splitlines() if x.startswith("nnue stream: quarantined a damaged part")]
    assert len(lines) == 1 and str(part) in lines[0] and why in lines[0], err


@pytest.mark.parametrize("version,column,type_,nullable,null_row,why", [
    (3, "status", pa.uint16(), True, None,
     "its status column is nullable uint16 (a part of schema 3 stores required uint16"),
    (3, "status", pa.uint16(), True, 5, "its status column is nullable uint16"),
    (3, "status", pa.uint8(), False, None, "its status column is required uint8"),
    (3, "status", pa.int32(), False, None, "its status column is required int32"),
    (3, "score_delta", pa.uint64(), False, None, "its score_delta column is required uint64"),
    (3, "score_delta", pa.uint32(), True, 7, "its score_delta column is nullable uint32"),
    (3, "stem", pa.binary(), True, None, "its stem column is binary (a part of schema 3 stores fixed_size_binary[32]"),
    (3, "move_raw", pa.uint32(), True, None, "its move_raw column is uint32"),
    (3, "ply_reset", pa.int32(), True, None, "its ply_reset column is int32"),
    (3, "status", None, True, None, "no status column (a part of schema 3 has one"),
    (3, "stem", None, True, None, "no stem column"),
    (2, "flags", pa.int32(), True, None, "its flags column is int32 (a part of schema 2 stores uint8"),
    (2, "result", None, True, None, "no result column (a part of schema 2 has one"),
])
def test_a_part_whose_columns_are_not_its_schemas_is_named(tmp_path, capfd, version, column, type_, nullable,
                                                           null_row, why):
    ds, part = _dataset(tmp_path / "ds", version)
    _rewrite(part, column, type_, nullable, null_row)
    with pytest.raises(parts.PartError, match="a damaged part, or one this build did not write"):
        parts.read_group(parts.open_part(part), 0)
    r = _cli("inspect", ds)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"{part}: {why}" in r.stderr, r.stderr
    _stream_reads_the_rest(ds, part, capfd, why)


def test_schema_3_metadata_on_schema_2_columns_is_named(tmp_path, capfd):
    """A part of schema 2's columns whose metadata says schema 3 (status missing): before, the
    stream stopped with a KeyError and annotate rewrote the part as if it were whole."""
    ds, part = _dataset(tmp_path / "ds", 2)
    _rewrite(part, "flags", pa.uint8(), version=b"3")
    for args in (["inspect", ds], ["annotate", ds, "--base", "material", "--no-progress"]):
        r = _cli(*args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and str(part) in r.stderr, r.stderr
        assert "a part of schema 3" in r.stderr and "Traceback" not in r.stderr
    _stream_reads_the_rest(ds, part, capfd, "a part of schema 3")


def _set(part: Path, column: str, row: int, value) -> None:
    """Rewrite ``part`` with one value of ``column`` (row group 0) changed, its field as it is."""
    pf = parts.open_part(part)
    tables = [pf.read_row_group(g) for g in range(pf.metadata.num_row_groups)]
    t = tables[0]
    field = t.schema.field(column)
    values = t.column(column).to_pylist()
    values[row] = value
    tables[0] = t.set_column(t.schema.get_field_index(column), field, pa.array(values, field.type))
    with parts.writer(part, pf.schema_arrow) as w:
        for x in tables:
            w.write_table(x, row_group_size=x.num_rows)


def test_a_null_score_delta_of_schema_2_is_named(tmp_path, capfd):
    """Schema 2's score_delta is nullable in its schema but never written null: a null was read
    as the zero under it, another score in silence."""
    ds, part = _dataset(tmp_path / "ds", 2)
    _set(part, "score_delta", 7, None)
    why = "row group 0, row 7: a score delta that is null"
    with pytest.raises(parts.ChainError, match=why):
        parts.read_group(parts.open_part(part), 0, ["score"])
    with pytest.raises(parts.ChainError, match=why):  # the boards alone (the score not asked for)
        parts.Group(parts.open_part(part), 0, ["result"], with_board=True).boards()
    _stream_reads_the_rest(ds, part, capfd, why)


def test_boards_without_scores_name_an_overflowing_delta(tmp_path):
    """Group.boards() rebuilt the scores itself when they were not asked for and dropped the
    overflow it found: the boards of the rows from there on came from uninitialised scores."""
    ds, part = _dataset(tmp_path / "ds")
    _set(part, "score_delta", 7, 200_000)
    with pytest.raises(parts.ChainError, match="row group 0, row 7: score delta overflows int16"):
        parts.Group(parts.open_part(part), 0, ["result"], with_board=True).boards()


def test_a_move_stored_both_ways_is_named(tmp_path):
    """A row with both a move index and a move kept whole (the writer keeps one): best_move read
    one of them in silence."""
    ds, part = _dataset(tmp_path / "ds")
    pf = parts.open_part(part)
    has = pf.read_row_group(0, columns=["move"]).column("move").is_valid().to_numpy(zero_copy_only=False)
    row = int(np.flatnonzero(has)[3])
    _set(part, "move_raw", row, 0x0FFF)
    with pytest.raises(parts.ChainError, match=f"row group 0, row {row}: both a move index and a move kept whole"):
        parts.read_group(parts.open_part(part), 0, ["best_move"])
    r = _cli("convert", ds, "--to", "plain", "-o", tmp_path / "out.plain")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and f"{part}: row group 0, row {row}:" in r.stderr
    assert not (tmp_path / "out.plain").exists()


@pytest.mark.parametrize("value", [250, 40])
def test_a_piece_count_no_board_holds_is_named(tmp_path, value):
    """A piece_count_reset above 32: inspect stopped with a NumPy broadcast error naming no file."""
    ds, part = _dataset(tmp_path / "ds")
    _set(part, "piece_count_reset", 0, value)
    with pytest.raises(parts.ChainError, match=f"row group 0, row 0: a piece count of {value}"):
        parts.read_group(parts.open_part(part), 0, ["piece_count"])
    r = _cli("inspect", ds)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and f"{part}: row group 0, row 0:" in r.stderr, r.stderr


def test_annotate_names_a_damaged_part(tmp_path):
    """annotate opened parts and read pages without the file's name: a part cut short or a page
    whose checksum fails was one line naming no file."""
    ds, part = _dataset(tmp_path / "ds")
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    r = _cli("annotate", ds, "--base", "material", "--no-progress")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and f"{part}: not a readable Parquet part" in r.stderr, \
        r.stderr
    part.write_bytes(data)
    md = pq.ParquetFile(part).metadata.row_group(0)
    c = next(md.column(i) for i in range(md.num_columns) if md.column(i).path_in_schema == "move")
    damaged = bytearray(data)
    mid = c.data_page_offset + c.total_compressed_size // 2
    for i in range(mid, mid + 8):
        damaged[i] ^= 0x5A
    part.write_bytes(bytes(damaged))
    r = _cli("annotate", ds, "--base", "material", "--no-progress")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and f"{part}: row group 0: unreadable" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_inspect_counts_a_flat_piece_count_above_64(tmp_path):
    """A flat part stores piece_count as written (uint8); inspect's histogram had 65 bins and
    stopped with a NumPy broadcast error naming no file at a count above 64."""
    out = tmp_path / "flat"
    pack([SAMPLE], out, progress=False, layout="flat")
    part = next(out.glob("part-*.parquet"))
    _set(part, "piece_count", 3, 200)
    r = _cli("inspect", out, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["piece_count"]["200"] == 1


@pytest.mark.parametrize("bits", [0x30, 0xC0])
def test_a_status_with_a_value_beside_its_null_is_named(tmp_path, bits):
    """in_check (or the capture) set beside its own null bit, which the writer never makes:
    read_group gave a null and the stream's Group a true (it skipped the row as in check)."""
    ds, part = _dataset(tmp_path / "ds")
    st = parts.open_part(part).read_row_group(0, columns=["status"]).column("status").to_pylist()
    _set(part, "status", 9, st[9] | bits)
    why = f"row group 0, row 9: a status of {st[9] | bits:#x}, which no writer makes"
    with pytest.raises(parts.ChainError, match=why):
        parts.read_group(parts.open_part(part), 0, ["in_check", "best_move_is_capture"])
    with pytest.raises(parts.ChainError, match=why):
        parts.Group(parts.open_part(part), 0, ["in_check", "best_move_is_capture"])


def test_the_pyarrow_we_require_reads_chained_parts():
    """Chained parts store integer columns BYTE_STREAM_SPLIT (move, score_delta, status): pyarrow
    15 neither writes nor reads them ("BYTE_STREAM_SPLIT only supports FLOAT and DOUBLE"), and
    16.0.0 fails on a nullable one with nulls, as ``move`` is ("Data size ... does not match
    number of values"; both tried in a scratch venv). pyproject.toml asked for pyarrow>=15."""
    from packaging.requirements import Requirement

    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's")

    from tests.samples import REPO

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    req = next(Requirement(d) for d in deps if Requirement(d).name == "pyarrow")
    assert not any(req.specifier.contains(v) for v in ("15.0.2", "16.0.0")) and req.specifier.contains("16.1.0")
    assert req.specifier.contains(pa.__version__)


def test_eval_dataset_refuses_a_damaged_part(tmp_path, capfd):
    """``nnue eval --dataset`` promises every row in file order: a damaged part is one line naming
    it, status 2 (before: the stream quarantined it, and eval printed the other part's rows and
    exited 0)."""
    from nnue.cli import main as cli_main
    from tests.netfiles import make_int_net

    net = tmp_path / "net.safetensors"
    make_int_net("kb768hm4", "screlu", hidden=32, seed=4).save(net)
    ds, part = _dataset(tmp_path / "ds")
    _set(part, "move", 20, 65535)
    capfd.readouterr()
    assert cli_main(["eval", str(net), "--dataset", str(ds)]) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and f"{part}: row group 0, row 20: its move index is no move" in err, err
    assert "quarantined" not in err


def test_a_strict_stream_raises_instead_of_quarantining(tmp_path):
    """PackedStream(strict=True), for the commands that promise every row (eval --dataset,
    export --data): the damaged part's PartError, naming it, at the row group that does not read,
    and at listing for a part that does not open."""
    ds, part = _dataset(tmp_path / "ds")
    _set(part, "move", 20, 65535)
    s = PackedStream([ds], 256, shuffle_buffer=0, split="all", drop_last=False, filters=NO_FILTERS, strict=True)
    with pytest.raises(parts.ChainError, match=f"{part}: row group 0, row 20"):
        sum(len(b["score"]) for b in s)
    part.write_bytes(part.read_bytes()[:100])
    with pytest.raises(parts.PartError, match=f"{part}: not a readable Parquet part"):
        PackedStream([ds], 256, shuffle_buffer=0, split="all", drop_last=False, filters=NO_FILTERS, strict=True)
