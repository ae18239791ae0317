"""Write a dataset back out as a dump for other trainers, in any format whose spec has a writer.

Rows are written in dataset order (parts in manifest order). Each format's writer is its
``SPEC.write`` (:mod:`nnue.pipeline.formats`: plain, bullet-text, bulletformat, marlinformat
today, :func:`nnue.pipeline.formats.writer_names`); points of view and units follow each
format's facts (FORMATS.md) and are described in its module; scores are written in the dataset's
score unit. With ``fast`` a format's ``SPEC.write_block`` writes whole row groups (compiled
kernels, :mod:`nnue.pipeline.compiled.dump`) and hands the rows it does not settle back to
``SPEC.write``.

The output is written to a temporary file and renamed when complete.
"""
from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Iterator

import numpy as np

from . import manifest as mf
from .atomic import atomic_writer
from .board import boards_from_bytes
from .formats import get_format, writer_names
from .schema import FLAG_PLY_UNKNOWN, FLAG_SCORE_NONE

# the writers of the built-in formats, as imported (a format registered later is written all the same)
TARGETS = tuple(writer_names())
_COLS = ["board", "score", "result", "ply", "best_move", "flags"]


def _row(cols: dict, i: int, castling) -> dict:
    """Row ``i`` of a row group's columns as a writer's row (``FormatSpec.write``)."""
    r = {c: cols[c][i] for c in _COLS}
    r["score_none"] = bool(r["flags"] & FLAG_SCORE_NONE)
    r["castling"] = castling
    return r


def rows(dataset: str | Path) -> Iterator[dict]:
    """Every row of a dataset as a writer's row (``FormatSpec.write``: the columns in ``_COLS``,
    ``score_none`` and ``castling``), in dataset order."""
    d = Path(dataset)
    for table, entry in _row_groups(d):
        t = table.to_pydict()
        for i in range(len(t["board"])):
            yield _row(t, i, entry.get("castling"))


class Columns:
    """One row group's columns as NumPy arrays, each made when a block writer first asks for it
    (``FormatSpec.write_block``). n: rows. boards: (n, 32) uint8 C-contiguous packed boards;
    score, result, ply: (n,) int64 (stm POV); best: (n,) int64 packed move, -1 when none; none:
    (n,) bool, no score; king_takes_rook: bool, the input spelled castling king-takes-rook."""

    def __init__(self, table, entry: dict):
        self.table, self.n = table, table.num_rows
        self.king_takes_rook = entry.get("castling") == "king-takes-rook"

    @cached_property
    def boards(self):
        return np.ascontiguousarray(boards_from_bytes(self.table.column("board")))

    @cached_property
    def score(self):
        return self.table.column("score").to_numpy().astype(np.int64)

    @cached_property
    def result(self):
        return self.table.column("result").to_numpy().astype(np.int64)

    @cached_property
    def ply(self):
        return self.table.column("ply").to_numpy().astype(np.int64)

    @cached_property
    def none(self):
        return (self.table.column("flags").to_numpy() & FLAG_SCORE_NONE) != 0

    @cached_property
    def best(self):
        col = self.table.column("best_move")
        best = col.fill_null(0xFFFF).to_numpy().astype(np.int64)
        best[col.is_null().to_numpy(zero_copy_only=False)] = -1
        return best


def _row_groups(dataset: Path, columns=_COLS):
    """(arrow table of ``columns``, manifest entry) per row group, in dataset order (either
    layout: :mod:`nnue.pipeline.parts`)."""
    from .parts import open_part, read_group

    m = mf.load(dataset)
    for entry in sorted(m["files"].values(), key=mf.entry_key):
        if not entry["packed"]:
            continue
        for name in mf.entry_parts(entry):
            pf = open_part(dataset / name)
            for rg in range(pf.metadata.num_row_groups):
                yield read_group(pf, rg, columns), entry


def _compiled_chunk(table, entry: dict, spec) -> tuple[bytes | memoryview, int]:
    """One row group in format ``spec`` through its ``write_block`` (rows it leaves to
    python-chess, ``fallback``, are written by ``spec.write``, in place). Returns (bytes, fallback
    rows)."""
    out, ends, fallback = spec.write_block(Columns(table, entry))
    n = table.num_rows
    if ends is None:  # fixed-size records, every row settled
        return out.tobytes(), 0
    nfb = int(np.count_nonzero(fallback)) if fallback is not None else 0
    if not nfb:
        return memoryview(out)[:int(ends[-1]) if n else 0], 0
    cols = table.to_pydict()
    pieces, start = [], 0
    for i in np.flatnonzero(fallback):
        pieces.append(out[start:ends[i]].tobytes())
        pieces.append(spec.write(_row(cols, i, entry.get("castling"))))
        start = ends[i]
    pieces.append(out[start:ends[-1]].tobytes())
    return b"".join(pieces), nfb


def _bar(dataset: Path, to: str):
    """A tqdm bar of the dataset's positions on stderr (none when stderr is not a terminal)."""
    import sys

    from tqdm import tqdm

    total = sum(e["packed"] for e in mf.load(dataset)["files"].values())
    return tqdm(total=total, unit=" pos", unit_scale=True, file=sys.stderr, desc=f"convert to {to}",
                dynamic_ncols=True, disable=None)


def convert(dataset: str | Path, to: str, out: str | Path, progress: bool = False, fast: bool = True) -> dict:
    """Write every row of ``dataset`` to ``out`` in format ``to``, in dataset order.

    fast: row groups go through the format's block writer (``SPEC.write_block``; compiled,
    :mod:`nnue.pipeline.compiled.dump`), which hands the rows it does not settle exactly (castling
    rights python-chess reads as Chess960) to the python-chess writer ``SPEC.write``; False, or a
    format without a block writer: every row through ``SPEC.write`` (the test oracle; the output
    is identical, tested). progress: a tqdm bar on stderr (positions, rate,
    ETA; none when stderr is not a terminal).

    Returns {"rows", "format", "path", "ply_unknown", "python_chess_rows"} (rows whose ply was
    unknown are written with ply 0; ``python_chess_rows``: rows written by the python-chess
    writers). Raises ValueError for an unknown target, ManifestError for a folder that is not a
    dataset.
    """
    spec = get_format(to) if to in writer_names() else None
    if spec is None:
        raise ValueError(f"cannot write {to!r}; targets: {', '.join(writer_names())}")
    if spec.write_stream is not None:
        return _convert_chained(Path(dataset), spec, Path(out), progress)
    dataset = Path(dataset)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    bar = _bar(dataset, to) if progress else None
    n = unknown = slow = 0
    try:
        with atomic_writer(out) as f:
            for table, entry in _row_groups(dataset):
                rows_here = table.num_rows
                unknown += int(((table.column("flags").to_numpy() & FLAG_PLY_UNKNOWN) != 0).sum())
                if fast and spec.write_block is not None:
                    data, nfb = _compiled_chunk(table, entry, spec)
                    f.write(data)
                    slow += nfb
                else:
                    cols = table.to_pydict()
                    castling = entry.get("castling")
                    for i in range(rows_here):
                        f.write(spec.write(_row(cols, i, castling)))
                    slow += rows_here
                n += rows_here
                if bar is not None:
                    bar.update(rows_here)
    finally:
        if bar is not None:
            bar.close()
    return {"rows": n, "format": to, "path": str(out), "ply_unknown": unknown, "python_chess_rows": slow}


def _convert_chained(dataset: Path, spec, out: Path, progress: bool) -> dict:
    """:func:`convert` to a format that chains a game's positions (``spec.write_stream``:
    binpack, viriformat). Returns {"rows" (written), "format", "path", "chains", "not_written":
    {reason: rows}, "notes": {what: rows}, "ply_unknown"}."""
    out.parent.mkdir(parents=True, exist_ok=True)
    bar = _bar(dataset, spec.name) if progress else None
    w = spec.write_stream()
    unknown = 0
    try:
        with atomic_writer(out) as f:
            for table, entry in _row_groups(dataset):
                unknown += int(((table.column("flags").to_numpy() & FLAG_PLY_UNKNOWN) != 0).sum())
                f.write(w.rows(Columns(table, entry)))
                if bar is not None:
                    bar.update(table.num_rows)
            f.write(w.finish())
    finally:
        if bar is not None:
            bar.close()
    return {"rows": w.written, "format": spec.name, "path": str(out), "chains": w.chain_count,
            "not_written": dict(w.not_written), "notes": dict(w.notes), "ply_unknown": unknown}
