"""The chained layout (schema 3, and schema 2 still read): lossless against flat rows on every format, its density, the
in-place upgrade, bad input, and the chained dump writers (binpack, viriformat) read back by our
readers and by nnue-pytorch's C++ loader."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from nnue.pipeline import manifest as mf
from nnue.pipeline import parts
from nnue.pipeline.pack import pack
from tests.pipeline import npt_loader
from tests.samples import CUT, SAMPLE, XFEN960, public, selfplay


def _rows(ds: Path, only: Path | None = None) -> pa.Table:
    """Every row of a dataset (or of its entry for the input ``only``), in dataset order, as
    logical columns (source dropped)."""
    m = mf.load(ds)
    ts = [parts.read_part(ds / name) for e in sorted(m["files"].values(), key=mf.entry_key) if e["packed"]
          and (only is None or Path(e["path"]).name == only.name) for name in mf.entry_parts(e)]
    return pa.concat_tables(ts).drop_columns(["source"]) if ts else None


def _both(src, tmp_path, **kw) -> tuple[Path, Path]:
    c, f = tmp_path / "chained", tmp_path / "flat"
    pack([src], c, progress=False, layout="chained", **kw)
    pack([src], f, progress=False, layout="flat", **kw)
    return c, f


def _part_bytes(ds: Path) -> int:
    return sum(p.stat().st_size for p in ds.glob("part-*.parquet"))


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "nnue.cli", *map(str, args)], capture_output=True, text=True,
                          env=env)


# --- lossless, every format ------------------------------------------------------------------

@pytest.mark.parametrize("name", [f"{CUT}.plain", f"{CUT}.txt", f"{XFEN960}.plain", f"{XFEN960}.pgn"])
def test_chained_rows_equal_flat_rows(name, tmp_path):
    """The same input packed in both layouts reads back to the same rows, column for column
    (Chess960 castling, bullet text's rows without moves, PGN)."""
    c, f = _both(selfplay(name), tmp_path)
    a, b = _rows(c), _rows(f)
    assert a.num_rows == b.num_rows > 4000
    for col in b.column_names:
        assert a.column(col).combine_chunks().equals(b.column(col).combine_chunks()), col
    assert json.loads((c / "manifest.json").read_text())["schema_version"] == 3
    assert json.loads((f / "manifest.json").read_text())["schema_version"] == 1


@pytest.mark.parametrize("name", ["test-vf.bin", "samplefen1000.epd", "batch.bf", "ep1.binpack"])
def test_chained_rows_equal_flat_rows_public(name, tmp_path):
    c, f = _both(public(name), tmp_path)
    a, b = _rows(c), _rows(f)
    assert a.num_rows == b.num_rows > 0
    assert a.equals(b)


def test_small_row_groups_start_chains(tmp_path):
    """Every row group begins a chain (rows of 256), and a dataset of many row groups reads back."""
    from nnue.pipeline import pack as pack_mod

    old, pack_mod.ROW_GROUP = pack_mod.ROW_GROUP, 256
    try:
        c, f = _both(SAMPLE, tmp_path)
    finally:
        pack_mod.ROW_GROUP = old
    pf = parts.open_part(next(c.glob("part-*.parquet")))
    assert pf.metadata.num_row_groups == 16
    for rg in range(pf.metadata.num_row_groups):
        assert pf.read_row_group(rg, columns=["stem"]).column("stem")[0].is_valid
    assert _rows(c).equals(_rows(f))


def test_bytes_per_position_of_the_shipped_selfplay(tmp_path):
    """Target: at most 3.0 bytes a position on our own .plain self-play (the cut the repo ships;
    bench/results/chained_cpu.json has the full files and small.binpack), against ~15 flat."""
    c, f = _both(selfplay(f"{CUT}.plain"), tmp_path)
    n = mf.totals(mf.load(c))["packed"]
    chained, flat = _part_bytes(c) / n, _part_bytes(f) / n
    assert chained <= 3.0, chained
    assert flat / chained > 4, (flat, chained)


# --- every reader, both layouts --------------------------------------------------------------

def test_readers_agree_on_both_layouts(tmp_path):
    """inspect, convert, dupes, the stream and the retrain gate give the same answers on the same
    input packed in either layout."""
    from nnue.pipeline.convert import convert
    from nnue.pipeline.dupes import fingerprint
    from nnue.pipeline.stream import Filters, PackedStream
    from nnue.trainer.retrain import gate_positions

    c, f = _both(selfplay(f"{CUT}.plain"), tmp_path)
    outs = []
    for ds in (c, f):
        r = _cli("inspect", ds, "--json", "--fens", "3")
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        for k in ("dataset", "layouts", "bytes_per_position", "schema_version"):
            rep.pop(k)
        convert(ds, "plain", tmp_path / f"{ds.name}.plain")
        part = next(ds.glob("part-*.parquet"))
        s = PackedStream([ds], 1000, shuffle_buffer=5000, seed=3, filters=Filters(min_ply=10))
        batches = [(b["boards"].numpy().tobytes(), b["score"].numpy().tobytes(), b["result"].numpy().tobytes())
                   for b in s]
        gate = gate_positions(ds, {"parts": [part.name], "fraction": 0.3, "path": "gate"}, {}, 10_000)
        outs.append((rep, (tmp_path / f"{ds.name}.plain").read_bytes(), fingerprint(part), batches,
                     [g.numpy().tobytes() for g in gate], dict(s.counts)))
    a, b = outs
    assert a[0] == b[0]
    assert a[1] == b[1]
    assert a[2] == b[2] and len(a[2]) > 100
    assert a[3] == b[3] and len(a[3]) > 5
    assert a[4] == b[4]
    assert a[5] == b[5]


def test_annotate_keeps_the_chained_layout(tmp_path):
    c, f = _both(SAMPLE, tmp_path)
    for ds in (c, f):
        r = _cli("annotate", ds, "--base", "material")
        assert r.returncode == 0, r.stderr
    pc = parts.open_part(next(c.glob("part-*.parquet")))
    assert parts.layout(pc) == parts.CHAINED and "base_eval" in pc.schema_arrow.names
    a, b = _rows(c), _rows(f)
    assert a.column("base_eval").equals(b.column("base_eval")) and a.equals(b)


def test_pack_appends_take_the_dataset_layout(tmp_path):
    """A flat dataset stays flat when more is packed into it; asking for the other layout is one line."""
    f = tmp_path / "flat"
    pack([SAMPLE], f, progress=False, layout="flat")
    pack([selfplay(f"{XFEN960}.plain")], f, progress=False)
    assert {parts.layout(parts.open_part(p)) for p in f.glob("part-*.parquet")} == {parts.FLAT}
    r = _cli("pack", selfplay(f"{CUT}.plain"), "-o", f, "--layout", "chained")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "flat parts" in r.stderr


def test_watch_and_shards_append_in_the_dataset_layout(tmp_path):
    """`pack --watch` and `pack-shards` into a flat dataset write flat parts (into a new one,
    chained; into a chained one of schema 2, schema 2); every row reads back."""
    f, folder, v2 = tmp_path / "flat", tmp_path / "dumps", tmp_path / "v2"
    pack([SAMPLE], f, progress=False, layout="flat")
    v2.mkdir()
    mf.save(v2, mf.new(2))
    pack([SAMPLE], v2, progress=False)
    folder.mkdir()
    (folder / "a.plain").write_bytes(selfplay(f"{XFEN960}.plain").read_bytes())
    r = _cli("pack", "--watch", folder, "-o", f, "--once", "--settle", "0")
    assert r.returncode == 0, r.stderr
    ins = f"inputs=[{selfplay(f'{CUT}.plain')}]"
    for ds in (f, tmp_path / "new", v2):
        r = subprocess.run([sys.executable, "-m", "nnue.cli", "pack-shards", ins, f"output={ds}", "shards=2"],
                           capture_output=True, text=True, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    assert len(mf.load(f)["files"]) == 3 and mf.load(f)["schema_version"] == 1
    assert {parts.layout(parts.open_part(p)) for p in f.glob("part-*.parquet")} == {parts.FLAT}
    assert {parts.layout(parts.open_part(p)) for p in (tmp_path / "new").glob("part-*.parquet")} == {parts.CHAINED}
    assert _rows(f).num_rows == mf.totals(mf.load(f))["packed"] == 4_015 + 4_586 + 12_678
    assert _rows(tmp_path / "new").equals(_rows(f, only=selfplay(f"{CUT}.plain")))
    assert {parts.layout(parts.open_part(p)) for p in v2.glob("part-*.parquet")} == {2}
    assert mf.load(v2)["schema_version"] == 2
    assert _rows(v2, only=selfplay(f"{CUT}.plain")).equals(_rows(f, only=selfplay(f"{CUT}.plain")))


def test_merge_refuses_shards_of_another_layout(tmp_path):
    pack([SAMPLE], tmp_path / "flat", progress=False, layout="flat")
    pack([selfplay(f"{XFEN960}.plain")], tmp_path / "shard", progress=False)
    r = _cli("merge", tmp_path / "shard", "-o", tmp_path / "flat")
    assert r.returncode == 2 and "chained parts" in r.stderr and r.stderr.count("\n") == 1
    assert (tmp_path / "shard" / "manifest.json").exists()  # nothing moved


# --- upgrade in place ------------------------------------------------------------------------

def test_upgrade_in_place(tmp_path):
    """`nnue convert DATASET --to chained`: same rows, same part names and row groups, manifest
    version 2 with a record, about 6x smaller; a second run does nothing."""
    from nnue.pipeline import pack as pack_mod

    f = tmp_path / "ds"
    old, pack_mod.ROW_GROUP = pack_mod.ROW_GROUP, 1000
    try:
        pack([selfplay(f"{CUT}.plain"), SAMPLE], f, progress=False, layout="flat")
    finally:
        pack_mod.ROW_GROUP = old
    before = _rows(f)
    names = sorted(p.name for p in f.glob("part-*.parquet"))
    groups = {p.name: parts.open_part(p).metadata.num_row_groups for p in f.glob("part-*.parquet")}
    size = _part_bytes(f)
    r = _cli("convert", f, "--to", "chained", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["parts_upgraded"] == 2 and out["positions"] == before.num_rows
    assert _rows(f).equals(before)
    assert sorted(p.name for p in f.glob("part-*.parquet")) == names
    assert {p.name: parts.open_part(p).metadata.num_row_groups for p in f.glob("part-*.parquet")} == groups
    m = mf.load(f)
    assert m["schema_version"] == 3 and m["upgraded"][0]["positions"] == before.num_rows
    assert size / _part_bytes(f) > 3  # row groups of 1,000 rows: less than at 65,536
    assert not list(f.glob(".*tmp"))
    r = _cli("convert", f, "--to", "chained", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["parts_upgraded"] == 0
    assert _rows(f).equals(before)


def test_schema_2_datasets_still_read_append_and_upgrade(tmp_path):
    """A dataset of the chained layout's schema 2 (in_check, best_move_is_capture, flags and
    result as columns of their own) reads back to the flat rows, gets parts of its own schema
    when appended to, streams the same batches as the flat layout, and ``nnue convert --to
    chained`` rewrites it as schema 3 (a ``status`` column), the same rows."""
    from nnue.pipeline.stream import PackedStream

    src = selfplay(f"{CUT}.plain")
    old, f = tmp_path / "v2", tmp_path / "flat"
    old.mkdir()
    mf.save(old, mf.new(2))
    pack([src], old, progress=False)
    pack([SAMPLE], old, progress=False)  # an append: schema 2 again
    pack([src, SAMPLE], f, progress=False, layout="flat")
    for p in old.glob("part-*.parquet"):
        pf = parts.open_part(p)
        assert parts.layout(pf) == 2 and "in_check" in pf.schema_arrow.names and "status" not in pf.schema_arrow.names
    a, b = _rows(old), _rows(f)
    assert a.num_rows == b.num_rows > 4000
    for col in b.column_names:
        assert a.column(col).combine_chunks().equals(b.column(col).combine_chunks()), col

    def batches(ds):
        s = PackedStream([ds], 1000, shuffle_buffer=5000, seed=3)
        return [b["boards"].numpy().tobytes() + b["result"].numpy().tobytes() for b in s], dict(s.counts)
    assert batches(old) == batches(f)
    r = _cli("convert", old, "--to", "chained", "--json")
    assert r.returncode == 0, r.stderr
    assert mf.load(old)["schema_version"] == 3
    for p in old.glob("part-*.parquet"):
        assert parts.layout(parts.open_part(p)) == 3
    c = _rows(old)
    for col in b.column_names:
        assert c.column(col).combine_chunks().equals(b.column(col).combine_chunks()), col


def test_status_holds_what_it_replaces(tmp_path):
    """Schema 3's ``status`` column gives back flags, in_check, best_move_is_capture and result
    with their nulls, and refuses what it has no bits for (a flag above 15, a result outside
    -1..1) in one ValueError rather than losing it."""
    t = pa.table({"flags": pa.array([0, 1, 2, 4, 7, 0], pa.uint8()),
                  "in_check": pa.array([True, False, None, True, False, False], pa.bool_()),
                  "best_move_is_capture": pa.array([None, True, False, True, None, False], pa.bool_()),
                  "result": pa.array([-1, 0, 1, None, 1, -1], pa.int8())})
    st = parts._status_of(t)
    for c in ("flags", "in_check", "best_move_is_capture", "result"):
        assert parts._status_array(st, c).equals(t.column(c).combine_chunks()), c
    with pytest.raises(ValueError, match="above 15"):
        parts._status_of(t.set_column(0, "flags", pa.array([16, 0, 0, 0, 0, 0], pa.uint8())))
    with pytest.raises(ValueError, match="outside -1..1"):
        parts._status_of(t.set_column(3, "result", pa.array([2, 0, 0, 0, 0, 0], pa.int8())))


def test_upgrade_interrupted_then_rerun(tmp_path, monkeypatch):
    """A failure after the first part leaves every part whole (one chained, one flat), the
    manifest at version 1 and no temporary file; a rerun finishes."""
    from nnue.pipeline import upgrade as up

    f = tmp_path / "ds"
    pack([selfplay(f"{CUT}.plain"), SAMPLE], f, progress=False, layout="flat")
    before = _rows(f)
    real, calls = up.upgrade_part, []

    def second_fails(part):
        calls.append(part)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(part)

    monkeypatch.setattr(up, "upgrade_part", second_fails)
    with pytest.raises(KeyboardInterrupt):
        up.upgrade(f)
    layouts = sorted(parts.layout(parts.open_part(p)) for p in f.glob("part-*.parquet"))
    assert layouts == [1, 3] and mf.load(f)["schema_version"] == 1
    assert _rows(f).equals(before) and not list(f.glob(".*tmp"))
    monkeypatch.setattr(up, "upgrade_part", real)
    r = up.upgrade(f)
    assert r["parts_upgraded"] == 1 and mf.load(f)["schema_version"] == 3
    assert _rows(f).equals(before)


def test_upgrade_refuses_counts_that_do_not_add_up(tmp_path):
    f = tmp_path / "ds"
    pack([SAMPLE], f, progress=False, layout="flat")
    m = json.loads((f / "manifest.json").read_text())
    e = next(iter(m["files"].values()))
    e["packed"] += 1
    e["read"] += 1
    (f / "manifest.json").write_text(json.dumps(m))
    r = _cli("convert", f, "--to", "chained")
    assert r.returncode == 2 and "not upgraded" in r.stderr and r.stderr.count("\n") == 1
    assert parts.layout(parts.open_part(next(f.glob("part-*.parquet")))) == parts.FLAT


def test_upgrade_keeps_annotations(tmp_path):
    f = tmp_path / "ds"
    pack([SAMPLE], f, progress=False, layout="flat")
    assert _cli("annotate", f, "--base", "material").returncode == 0
    before = _rows(f)
    from nnue.pipeline.annotate import part_annotations

    ann = part_annotations(next(f.glob("part-*.parquet")))
    assert _cli("convert", f, "--to", "chained").returncode == 0
    assert _rows(f).equals(before) and part_annotations(next(f.glob("part-*.parquet"))) == ann


# --- bad input -------------------------------------------------------------------------------

def _damage(part: Path, column: str, row: int, value, rg: int = 0) -> None:
    """Rewrite a chained part with one physical value changed (in row group ``rg``)."""
    pf = parts.open_part(part)
    tables = [pf.read_row_group(g) for g in range(pf.metadata.num_row_groups)]
    t = tables[rg]
    col = t.column(column).to_pylist()
    col[row] = value
    tables[rg] = t.set_column(t.schema.get_field_index(column), t.schema.field(column), pa.array(col, t.schema.field(column).type))
    sizes = [x.num_rows for x in tables]
    with parts.writer(part, pf.schema_arrow) as w:
        for x, n in zip(tables, sizes):
            w.write_table(x, row_group_size=n)


@pytest.fixture
def two_groups(tmp_path):
    from nnue.pipeline import pack as pack_mod

    old, pack_mod.ROW_GROUP = pack_mod.ROW_GROUP, 2048
    try:
        pack([SAMPLE], tmp_path / "ds", progress=False)
    finally:
        pack_mod.ROW_GROUP = old
    return tmp_path / "ds"


@pytest.mark.parametrize("column,row,value,why", [
    ("move", 10, 999, "its move index is no move of its position"),
    ("stem", 0, None, "a chain crosses row groups"),
    ("score_delta", 7, 200_000, "score delta overflows int16"),
    ("move", 40, None, "the row above has no move"),
    ("status", 12, 0x0300, "a status of 0x300, which no writer makes"),
    ("status", 5, 0x8000, "a status of 0x8000, which no writer makes"),
])
def test_a_damaged_chain_is_named_and_the_rest_reads(two_groups, column, row, value, why):
    """One line naming the file, row group and row, status 2; the stream skips that row group
    whole, says so and counts it, and reads the others."""
    from nnue.pipeline.stream import Filters, PackedStream

    ds = two_groups
    part = next(ds.glob("part-*.parquet"))
    n = mf.totals(mf.load(ds))["packed"]
    if column == "move" and value is None:  # drop the move of the row above row 41 (a continuation)
        row = next(r for r in range(40, 200) if not parts.open_part(part).read_row_group(1, columns=["stem"])
                   .column("stem")[r + 1].is_valid)
    _damage(part, column, row, value, rg=1)
    r = _cli("inspect", ds)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{part}: row group 1, row " in r.stderr and why in r.stderr and "Traceback" not in r.stderr
    with pytest.raises(parts.ChainError, match="row group 1"):
        parts.read_part(part)
    assert parts.read_group(parts.open_part(part), 0).num_rows == 2048  # the others still read
    s = PackedStream([ds], 256, shuffle_buffer=0, split="all", drop_last=False,
                     filters=Filters(skip_in_check=False, skip_capture=False, skip_score_none=False,
                                     skip_mate=False))
    got = sum(len(b["score"]) for b in s)
    assert got == 2048 and s.counts["damaged"] == n - 2048


def _illegal_index(pf, rg: int) -> tuple[int, int]:
    """A row of row group ``rg`` that a continuation follows, and the index of a move of its
    position that is in the move list (a pseudo-legal move) but leaves its own king in check."""
    import chess

    from nnue.pipeline.board import unpack_fen
    from nnue.pipeline.compiled import chain

    t = parts.read_group(pf, rg, ["board"])
    stem = pf.read_row_group(rg, columns=["stem"]).column("stem")
    arr = np.frombuffer(b"".join(t.column("board").to_pylist()), np.uint8).reshape(-1, 32)
    bb, pcs, st = np.zeros(16, np.uint64), np.full(64, -1, np.int8), np.zeros(4, np.int64)
    for r in range(t.num_rows - 1):
        if stem[r + 1].is_valid:
            continue
        board = chess.Board(unpack_fen(t.column("board")[r].as_py()))
        for m in board.generate_pseudo_legal_moves():
            if board.is_castling(m) or board.is_legal(m):
                continue
            assert chain.load(arr, r, bb, pcs, st)
            idx = chain.move_index(bb, pcs, int(st[0]), int(st[1]), m.from_square, m.to_square,
                                   0 if m.promotion is None else m.promotion - 1)
            if idx >= 0:
                return r, idx
    raise AssertionError("no position with an illegal pseudo-legal move")


def test_an_illegal_move_in_a_chain_is_named(two_groups):
    """A move index that names a move of the list (a piece's attack) that is illegal in its
    position: the row holding it is named, status 2; the other row group still reads."""
    ds = two_groups
    part = next(ds.glob("part-*.parquet"))
    row, idx = _illegal_index(parts.open_part(part), 1)
    _damage(part, "move", row, idx, rg=1)
    r = _cli("inspect", ds)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{part}: row group 1, row {row}: its move is illegal in its position" in r.stderr
    with pytest.raises(parts.ChainError, match=f"row group 1, row {row}:"):
        parts.Group(parts.open_part(part), 1, ["score"], with_board=True).boards()
    assert parts.read_group(parts.open_part(part), 0).num_rows == 2048


def test_a_manifest_of_a_layout_this_build_does_not_read(tmp_path):
    pack([SAMPLE], tmp_path / "ds", progress=False)
    m = json.loads((tmp_path / "ds" / "manifest.json").read_text())
    m["schema_version"] = 4
    (tmp_path / "ds" / "manifest.json").write_text(json.dumps(m))
    for args in (["inspect", tmp_path / "ds"], ["convert", tmp_path / "ds", "--to", "plain", "-o", tmp_path / "o"]):
        r = _cli(*args)
        assert r.returncode == 2 and "schema version 4" in r.stderr and r.stderr.count("\n") == 1


def test_a_part_of_a_layout_this_build_does_not_read(tmp_path):
    pack([SAMPLE], tmp_path / "ds", progress=False)
    part = next((tmp_path / "ds").glob("part-*.parquet"))
    pf = parts.open_part(part)
    t = pf.read().replace_schema_metadata({parts.SCHEMA_KEY: "9"})
    with parts.writer(part, t.schema) as w:
        w.write_table(t)
    r = _cli("inspect", tmp_path / "ds")
    assert r.returncode == 2 and "schema version 9" in r.stderr and r.stderr.count("\n") == 1


# --- the chained dump writers ----------------------------------------------------------------

def _repack(src: Path, fmt: str, tmp_path: Path, name: str) -> tuple[Path, dict]:
    from nnue.pipeline.convert import convert

    out = tmp_path / f"{name}.{fmt}"
    r = convert(src, fmt, out)
    back = tmp_path / f"{name}-{fmt}-back"
    pack([out], back, progress=False, fmt=fmt)
    return back, r


def test_binpack_and_viriformat_round_trips_of_our_selfplay(tmp_path):
    """Our .plain self-play written as binpack and as viriformat, read back by our readers: the
    same positions, moves, scores and results in the same order (binpack keeps no fullmove: ours
    follow ply // 2 + 1 already)."""
    ds = tmp_path / "ds"
    pack([selfplay(f"{CUT}.plain")], ds, progress=False)
    rows = _rows(ds)
    for fmt in ("binpack", "viriformat"):
        back, r = _repack(ds, fmt, tmp_path, "cut")
        assert r["rows"] == rows.num_rows and not r["not_written"] and r["chains"] == 112
        got = _rows(back)
        for col in ("board", "score", "result", "ply", "best_move", "flags", "piece_count", "in_check", "game_id"):
            assert got.column(col).equals(rows.column(col)), (fmt, col)


def test_chess960_to_binpack_and_viriformat(tmp_path):
    """Chess960 games: viriformat holds them whole; binpack (standard castling only) writes the
    positions whose castling rights it can hold and counts the others."""
    ds = tmp_path / "ds"
    pack([selfplay(f"{XFEN960}.plain")], ds, progress=False)
    rows = _rows(ds)
    back, r = _repack(ds, "viriformat", tmp_path, "960")
    assert r["rows"] == rows.num_rows and _rows(back).drop_columns(["game_id"]).equals(rows.drop_columns(["game_id"]))
    back, r = _repack(ds, "binpack", tmp_path, "960")
    skipped = sum(r["not_written"].values())
    assert skipped > 0 and r["rows"] + skipped == rows.num_rows
    def keys(t):  # binpack keeps no fullmove number: the board but its bytes 26-27
        return Counter((b[:26] + b[28:], s) for b, s in zip(t.column("board").to_pylist(), t.column("score").to_pylist()))

    assert keys(_rows(back)) <= keys(rows)


def test_viriformat_matches_its_specification(tmp_path):
    """Each game: a marlinformat header (fullmove non-zero, eval 0, wdl 0..2 the game's result,
    white POV), (move, eval white POV) pairs, 4 zero bytes; the first game's bytes by hand."""
    from nnue.pipeline.board import unpack
    from nnue.pipeline.convert import convert

    ds = tmp_path / "ds"
    pack([SAMPLE], ds, progress=False)
    rows = _rows(ds).to_pydict()
    out = tmp_path / "s.vf"
    convert(ds, "viriformat", out)
    data = out.read_bytes()
    head = unpack(data[:32])
    assert head["fullmove"] >= 1 and head["eval_white"] == 0 and head["wdl"] in (0, 1, 2)
    assert data[:28] == rows["board"][0][:28]
    black = bool(rows["board"][0][24] >> 7)
    assert head["wdl"] == (-rows["result"][0] if black else rows["result"][0]) + 1
    p, i = 32, 0
    while data[p:p + 4] != b"\0\0\0\0":
        move, ev = int.from_bytes(data[p:p + 2], "little"), int.from_bytes(data[p + 2:p + 4], "little", signed=True)
        black = bool(rows["board"][i][24] >> 7)
        assert move == rows["best_move"][i] and ev == (-rows["score"][i] if black else rows["score"][i])
        p, i = p + 4, i + 1
    assert i > 10 and rows["game_id"][i] != rows["game_id"][i - 1]


def test_small_binpack_packed_and_converted_back_is_the_same_file(tmp_path):
    """Stockfish's own small.binpack (434,921 positions): packed (chained) and converted back to
    binpack, byte for byte the file (same chains, blocks, moves, scores and results in order)."""
    src = public("small.binpack")
    ds = tmp_path / "ds"
    pack([src], ds, progress=False)
    n = mf.totals(mf.load(ds))["packed"]
    assert n == 434_921 and _part_bytes(ds) / n <= 2.4
    from nnue.pipeline.convert import convert

    r = convert(ds, "binpack", tmp_path / "out.binpack")
    assert r["rows"] == n and (tmp_path / "out.binpack").read_bytes() == src.read_bytes()


def test_nnue_pytorch_reads_our_binpack(tmp_path):
    """nnue-pytorch's C++ loader reads a .binpack we write to the same positions (its HalfKAv2_hm
    features of both perspectives), scores and results as our rows (multisets: it does not read
    in file order)."""
    lib = npt_loader.find()
    if lib is None:
        pytest.skip(npt_loader.why_absent())
    from nnue.pipeline.board import unpack_fen
    from nnue.pipeline.convert import convert

    ds = tmp_path / "ds"
    pack([selfplay(f"{CUT}.plain")], ds, progress=False)
    out = tmp_path / "cut.binpack"
    convert(ds, "binpack", out)
    t = _rows(ds).to_pydict()
    ours = npt_loader.fen_tuples(lib, [unpack_fen(b) for b in t["board"]], t["score"], t["ply"], t["result"])
    theirs = npt_loader.stream_tuples(lib, out)
    assert len(theirs) == len(ours) == 12_678
    assert Counter(theirs) == Counter(ours)
    assert len({x[3] for x in theirs}) > 500  # the scores are real, not a constant
    np.testing.assert_array_equal(sorted(x[2] for x in theirs), sorted(1.0 - (b[24] >> 7) for b in t["board"]))


@pytest.mark.parametrize("name", [f"{CUT}.plain", f"{XFEN960}.plain", f"{XFEN960}.pgn"])
def test_the_streams_decoder_equals_the_reference(name, tmp_path):
    """The stream's decoder (boards kept as words and updated move by move, castling rights
    patched, only the rows asked for written) gives the boards of the reference decoder, also for
    Chess960 castling; on every row and on a random subset."""
    ds = tmp_path / "ds"
    pack([selfplay(name)], ds, progress=False)
    pf = parts.open_part(next(ds.glob("part-*.parquet")))
    ref = parts._boards(parts.read_group(pf, 0, ["board", "best_move"]).column("board"))
    g = parts.Group(pf, 0, ["score"], with_board=True)
    assert np.array_equal(g.boards(), ref)
    rows = np.sort(np.random.default_rng(5).choice(len(ref), len(ref) // 3, replace=False))
    assert np.array_equal(g.boards(rows), ref[rows])


def test_fast_move_index_equals_the_reference(tmp_path):
    """The hot paths' move index (pawns counted at once) is the reference list's, both ways, for
    every legal move of positions of standard and Chess960 games."""
    import chess

    from nnue.pipeline.board import unpack_fen
    from nnue.pipeline.compiled import chain

    ds = tmp_path / "ds"
    pack([selfplay(f"{CUT}.plain"), selfplay(f"{XFEN960}.plain")], ds, progress=False)
    boards = _rows(ds).column("board").to_pylist()
    arr = np.frombuffer(b"".join(boards), np.uint8).reshape(-1, 32)
    bb, pc, st = np.zeros(16, np.uint64), np.full(64, -1, np.int8), np.zeros(4, np.int64)
    checked = 0
    for r in range(0, len(boards), 13):
        assert chain.load(arr, r, bb, pc, st)
        board = chess.Board(unpack_fen(boards[r]), chess960=True)
        idxs = set()
        for m in board.legal_moves:
            promo = 0 if m.promotion is None else m.promotion - 1
            ref = chain.move_index(bb, pc, int(st[0]), int(st[1]), m.from_square, m.to_square, promo)
            assert ref >= 0 and chain._move_index_fast(bb, pc, int(st[0]), int(st[1]), m.from_square, m.to_square,
                                                       promo) == ref
            idxs.add(ref)
        for i in range(max(idxs) + 2):
            assert tuple(chain._index_fast(bb, pc, int(st[0]), int(st[1]), i)) == \
                tuple(chain.index_move(bb, pc, int(st[0]), int(st[1]), i))
        checked += 1
    assert checked > 1000


_PORTABLE_CHECK = """
import sys
import numpy as np
from nnue.pipeline import parts
from nnue.pipeline.compiled import bits, chain
assert not bits.BMI2 and chain._nth is chain._nth_portable and chain._pawn_pick is chain._pawn_pick_none
pf = parts.open_part(sys.argv[1])
for rg in range(pf.num_row_groups):
    ref = parts._boards(parts.read_group(pf, rg, ["board"]).column("board"))
    g = parts.Group(pf, rg, ["score"], with_board=True)
    assert np.array_equal(g.boards(), ref)
    bb, pc, st = np.zeros(16, np.uint64), np.full(64, -1, np.int8), np.zeros(4, np.int64)
    for r in range(0, len(ref), 7):
        assert chain.load(ref, r, bb, pc, st)
        for i in range(80):
            a = tuple(chain._index_fast(bb, pc, int(st[0]), int(st[1]), i))
            assert a == tuple(chain.index_move(bb, pc, int(st[0]), int(st[1]), i)), (r, i)
            if not a[0]:
                break
print("portable ok")
"""


def test_the_decoder_without_bmi2(tmp_path):
    """Where the CPU has no BMI2 (or ``NNUE_NO_BMI2=1``), the move index is decoded by the portable
    code (no pdep/pext): the same moves as the reference list and the same boards as the
    reference decoder (the hosts with BMI2 take the other path in the tests above)."""
    ds = tmp_path / "ds"
    pack([selfplay(f"{CUT}.plain")], ds, progress=False)
    env = dict(os.environ, NNUE_NO_BMI2="1", NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    r = subprocess.run([sys.executable, "-c", _PORTABLE_CHECK, str(next(ds.glob("part-*.parquet")))],
                       capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0 and "portable ok" in r.stdout, r.stderr[-3000:]
