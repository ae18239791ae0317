"""Upgrade a flat dataset (schema 1), or a chained one of schema 2, to the chained layout of schema 3 in place: part by part, atomically, every row checked.

``nnue convert DATASET --to chained`` (:func:`upgrade`). Under the dataset's writer lock (so
``nnue pack``, ``pack --watch`` and ``nnue annotate`` wait), each flat part (or chained part of
schema 2, read through :func:`nnue.pipeline.parts.read_group`) is rewritten row
group by row group into a temporary file of the chained layout (:func:`nnue.pipeline.parts.encode`:
the same rows in the same order, the same row groups, the part's annotation columns and their
metadata kept), read back and compared with the flat part row for row, column for column, then
renamed over the part. The part keeps its name, so the manifest's entries, a registry's fixed
gate set and a stream that has the part open (it reads the old file until it opens it again,
and then the same row groups) are unaffected. When every part is chained, the manifest's
``schema_version`` becomes 3 (with an ``upgraded`` record). Counts are checked before anything
is renamed: each part's rows equal to its row groups' rows, each entry's parts to its ``packed``.

An interrupted upgrade leaves every part whole, of its old schema or of the new one (readers
read all three), the manifest at its old version, and at most one temporary file (of a run
killed outright); a rerun removes it (:func:`nnue.pipeline.manifest.remove_orphans`), skips the
parts already chained and finishes.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

from . import manifest as mf
from . import parts
from .schema import ANNOTATION_COLUMNS, CHAINED_VERSION, FLAT_VERSION, SCHEMA_KEY


def _tmp_name(part: Path) -> Path:
    stem = part.name[len("part-"):-len(".parquet")]
    return part.with_name(f".part-{stem}.{os.getpid()}.parquet.tmp")  # remove_orphans' pattern


def upgrade_part(part: Path) -> dict:
    """Rewrite one flat part (or chained part of schema 2) as chained of schema 3 (see the module). Returns {"part", "rows", "bytes_before",
    "bytes_after"}; a part already of schema 3 is left as it is (``"skipped": True``). Raises
    PartError (a page that does not read, columns not of its schema; ChainError: a chain that
    does not decode) naming the file, or ValueError (a row that does not come back, counts that
    differ), with the temporary file removed and the part untouched."""
    pf = parts.open_part(part)
    before = part.stat().st_size
    was = parts.checked_layout(pf)
    if was == CHAINED_VERSION:
        return {"part": part.name, "rows": pf.metadata.num_rows, "bytes_before": before, "bytes_after": before,
                "skipped": True}
    schema = pf.schema_arrow
    extra = [f for f in schema if f.name in ANNOTATION_COLUMNS]
    names = parts.names(pf)
    if was == FLAT_VERSION:
        def rows(rg):  # a page that does not read: PartError naming the file and row group
            return parts.read_row_group(pf, rg, None)

        def logical(rg):
            return parts.read_row_group(pf, rg, names)
    else:  # chained of schema 2: its logical rows, re-chained in schema 3
        def rows(rg):
            return parts.read_group(pf, rg, names)
        logical = rows
    meta = {k: v for k, v in (schema.metadata or {}).items() if k != SCHEMA_KEY.encode()}
    out_schema = parts.chained_schema(extra, meta)
    tmp = _tmp_name(part)
    groups = [pf.metadata.row_group(rg).num_rows for rg in range(pf.metadata.num_row_groups)]
    try:
        with parts.writer(tmp, out_schema) as w:
            for rg, n in enumerate(groups):
                t = rows(rg)
                try:
                    c = parts.encode(t, max(n, 1))
                except ValueError as e:  # a value schema 3 cannot hold (parts._status_of): name where
                    raise ValueError(f"{part}: row group {rg}, {e}; not upgraded") from e
                w.write_table(c.replace_schema_metadata(out_schema.metadata), row_group_size=max(n, 1))
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        new = parts.open_part(tmp)
        got = [new.metadata.row_group(rg).num_rows for rg in range(new.metadata.num_row_groups)]
        if got != groups:
            raise ValueError(f"{part}: the chained copy has row groups of {got} rows, the part {groups}; not upgraded")
        for rg in range(len(groups)):
            a = logical(rg)
            b = parts.read_group(new, rg, names)
            for c in names:
                if not a.column(c).combine_chunks().equals(b.column(c).combine_chunks()):
                    raise ValueError(f"{part}: row group {rg}: column {c} does not come back from the chained "
                                     f"copy; not upgraded")
        os.replace(tmp, part)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return {"part": part.name, "rows": sum(groups), "bytes_before": before, "bytes_after": part.stat().st_size}


def upgrade(dataset: str | Path, progress=None) -> dict:
    """Upgrade ``dataset`` to the chained layout in place (module docstring). progress:
    ``(rows) -> None`` called after each part. Returns {"dataset", "parts", "parts_upgraded",
    "positions", "bytes_before", "bytes_after", "bytes_per_position_before",
    "bytes_per_position_after", "schema_version"}. Raises ManifestError (not a dataset),
    ChainError / ValueError (a part that does not upgrade: it and the parts after it stay flat)."""
    d = Path(dataset)
    mf.load(d)  # one line for a folder that is not a dataset, before the lock file is made
    mf.remove_orphans(d)  # a killed run's temporary file (it takes the lock itself: not under ours)
    with mf.locked(d):
        m = mf.load(d)
        entries = sorted((e for e in m["files"].values() if e["packed"]), key=mf.entry_key)
        for e in entries:  # counts first: a dataset whose parts do not hold its rows is not touched
            rows = sum(parts.num_rows(d / name) for name in mf.entry_parts(e))
            if rows != e["packed"]:
                raise ValueError(f"{d}: the parts of {e['path']} hold {rows:,} rows, its manifest entry says "
                                 f"{e['packed']:,} packed; not upgraded")
        done = []
        t0 = time.perf_counter()
        for e in entries:
            for name in mf.entry_parts(e):
                r = upgrade_part(d / name)
                done.append(r)
                if progress is not None:
                    progress(r["rows"])
        before = sum(r["bytes_before"] for r in done)
        after = sum(r["bytes_after"] for r in done)
        rows = sum(r["rows"] for r in done)
        was = m["schema_version"]
        if was != CHAINED_VERSION:
            m["schema_version"] = CHAINED_VERSION
            m.setdefault("upgraded", []).append({
                "from": was, "to": CHAINED_VERSION, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "parts": len(done), "positions": rows, "bytes_before": before, "bytes_after": after,
                # fewer than "parts" where a killed run had upgraded some (bytes_before counts them after)
                "parts_upgraded": sum(not r.get("skipped") for r in done)})
            mf.save(d, m)
    return {"dataset": str(d), "parts": len(done), "parts_upgraded": sum(not r.get("skipped") for r in done),
            "positions": rows, "bytes_before": before, "bytes_after": after,
            "bytes_per_position_before": round(before / rows, 3) if rows else None,
            "bytes_per_position_after": round(after / rows, 3) if rows else None,
            "seconds": round(time.perf_counter() - t0, 2), "schema_version": CHAINED_VERSION, "was": was}
