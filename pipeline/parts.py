"""Read and write a dataset's part files in either layout: flat rows (schema 1) or move chains (schemas 2 and 3).

Every reader of a dataset goes through here and sees the same *logical* columns whatever the
layout: those of :data:`nnue.pipeline.schema.SCHEMA` (``board``, ``score``, ``result``, ``ply``,
``piece_count``, ``in_check``, ``best_move``, ``best_move_is_capture``, ``game_id``, ``source``,
``flags``) plus the annotation columns (``base_eval``, ``teacher_eval``) where the part has them.

**Flat** (schema 1): one row per position, the logical columns as they are.

**Chained** (schema 3, :data:`nnue.pipeline.schema.CHAINED_SCHEMA`; schema 2,
``CHAINED_SCHEMA_V2``, still read, and written into datasets of that schema): the positions of a game that
follow each other by one move are a chain; only a chain's first row stores its 32-byte board.
The physical columns and how each logical one comes back (``start``: the row begins a chain, i.e.
its ``stem`` is not null; the row before is the one above in the same row group):

=====================  ==========================================  =====================================
physical column        stored                                      logical column
=====================  ==========================================  =====================================
``stem``               binary(32), the board at a chain start,     ``board``: decoded (moves played,
                       null elsewhere                              :mod:`nnue.pipeline.compiled.chain`)
``move``               uint16, the move's index among the          ``best_move``: decoded from it,
                       position's candidate moves (chain module),  or ``move_raw``; null when both are
                       null: no move or kept whole                 null
``move_raw``           uint16, a packed move kept whole, else null
``score_delta``        uint32, zigzag of the score at a start,     ``score``: ``delta - score above``
                       of ``score + score above`` after
``ply_reset``          uint16, null where the ply is the one       ``ply``
                       above plus one
``piece_count_reset``  uint8, null where the piece count is the    ``piece_count``
                       one above, less one when its move captured
``status`` (schema 3)  uint16: ``flags`` (bits 0–3), ``in_check``  ``flags``, ``in_check``,
                       (bit 4; bit 5: null), the capture (bit 6;   ``best_move_is_capture``,
                       bit 7: null), ``result`` + 1 (bits 8–9;     ``result``
                       bit 10: null)
``game_id``, ``source``, annotation columns; schema 2: ``result``,  as they are
``in_check``, ``best_move_is_capture``, ``flags``
=====================  ==========================================  =====================================

Every row group starts a chain (a chain never crosses row groups), so any row group is read
alone. Encodings (chosen by measurement, ``bench/results/chained_cpu.json``): ``score_delta``,
``move`` and ``status`` BYTE_STREAM_SPLIT (their high bytes are nearly all zero), ``source`` (and
schema 2's ``flags``) dictionary, ``game_id`` (and schema 2's ``result``) plain (zstd finds their
runs), everything zstd; ``score_delta`` and ``status`` required (every row has one: no definition
levels to read). Schema 3 stores the small columns the stream's default filters read as one
``status`` value because pyarrow reads a column at a cost of a few ns a row whatever its size:
the four took 19.6 ns a row, ``status`` 4–6 (0.02–0.04 bytes a position more). A part whose
columns are not its schema's (one missing, of another type, nullable where schema 3 requires it)
raises :class:`PartError` naming the file and column (:func:`checked_layout`); a chain that does
not decode (a move index that is no move, a move that leaves its own king in check, a
continuation with no move above it, a score delta that is null or overflows int16, a status or
piece count no writer makes, a chain that crosses row groups) raises :class:`ChainError` naming
the file, row group and row.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .schema import (ANNOTATION_COLUMNS, CHAINED_SCHEMA, CHAINED_SCHEMA_V2, CHAINED_V2, CHAINED_VERSION,
                     CHAINED_VERSIONS, FLAT_VERSION, SCHEMA, SCHEMA_KEY, STATS_OFF, STATUS_CAPTURE,
                     STATUS_CAPTURE_NULL, STATUS_CHECK, STATUS_CHECK_NULL, STATUS_FLAGS, STATUS_RESULT_NULL,
                     STATUS_RESULT_SHIFT)

FLAT, CHAINED = FLAT_VERSION, CHAINED_VERSION
LAYOUT_NAMES = {FLAT: "flat", CHAINED_V2: "chained", CHAINED: "chained"}
# the physical columns each logical column of a chained part is made from (besides "stem")
_NEEDS_V2 = {"board": ("move", "score_delta", "result"), "best_move": ("move", "move_raw", "score_delta", "result"),
             "score": ("score_delta",), "ply": ("ply_reset",),
             "piece_count": ("piece_count_reset", "best_move_is_capture")}
_STATUS = ("flags", "in_check", "best_move_is_capture", "result")  # schema 3: one ``status`` column
_NEEDS = {**{c: ("status",) for c in _STATUS}, "board": ("move", "score_delta", "status"),
          "best_move": ("move", "move_raw", "score_delta", "status"), "score": ("score_delta",), "ply": ("ply_reset",),
          "piece_count": ("piece_count_reset", "status")}
_CHAIN_CONTEXT = ("board", "best_move", "score", "ply", "piece_count")  # decoded with the chains


def is_chained(version: int) -> bool:
    """A layout version (:func:`layout`) of move chains (2 or 3)."""
    return version in CHAINED_VERSIONS


def _needs(version: int) -> dict:
    return _NEEDS if version == CHAINED else _NEEDS_V2


class PartError(ValueError):
    """A part that cannot be read: a file that is missing or not Parquet, a page that does not
    decode or fails its checksum, or (:class:`ChainError`) a chain that does not decode. The
    message names the file and, where known, the row group and row."""


class ChainError(PartError):
    """A chained part whose chains do not decode: the message names the file, row group and row."""


# what pyarrow raises on a damaged file (ArrowInvalid is a ValueError, the I/O errors OSErrors)
_ARROW_ERRORS = (OSError, pa.ArrowException)


def layout(pf: pq.ParquetFile) -> int:
    """A part's layout (:data:`FLAT` or :data:`CHAINED`) from its schema metadata. Raises
    ValueError for a version this build does not read."""
    meta = pf.schema_arrow.metadata or {}
    raw = meta.get(SCHEMA_KEY.encode(), b"1")
    try:
        v = int(raw)
    except ValueError:
        v = None
    if v not in LAYOUT_NAMES:
        raise ValueError(f"{getattr(pf, '_nnue_path', 'part')}: dataset part of schema version {raw.decode(errors='replace')}; "
                         f"this build reads {', '.join(map(str, LAYOUT_NAMES))}")
    return v


def checked_layout(pf: pq.ParquetFile) -> int:
    """:func:`layout`, with the part's columns checked against what that layout writes (once per
    opened file): every column of its schema (:data:`~nnue.pipeline.schema.SCHEMA`,
    ``CHAINED_SCHEMA_V2`` or ``CHAINED_SCHEMA``) there once and of its type, the columns schema 3
    requires (``score_delta``, ``status``) not nullable, annotation columns int16. The readers
    take a column's values buffer as that type (a wider one would read as other values in
    silence). Raises ValueError (a version this build does not read) and PartError naming the
    file and the column (a damaged part, or one this build did not write)."""
    v = getattr(pf, "_nnue_layout", None)
    if v is not None:
        return v
    v = layout(pf)
    expect = {FLAT: SCHEMA, CHAINED_V2: CHAINED_SCHEMA_V2, CHAINED: CHAINED_SCHEMA}[v]
    got = pf.schema_arrow
    fields = list(expect) + [pa.field(c, pa.int16()) for c in ANNOTATION_COLUMNS if c in got.names]
    for f in fields:
        at = got.get_all_field_indices(f.name)
        if len(at) != 1:
            why = f"{'no' if not at else 'more than one'} {f.name} column (a part of schema {v} has one"
        elif got.field(at[0]).type != f.type or (got.field(at[0]).nullable and not f.nullable):
            why = (f"its {f.name} column is {_type_name(got.field(at[0]), f)} (a part of schema {v} stores "
                   f"{_type_name(f, f)}")
        else:
            continue
        raise PartError(f"{getattr(pf, '_nnue_path', 'part')}: {why}: a damaged part, or one this build did not write)")
    pf._nnue_layout = v
    return v


def _type_name(f: pa.Field, want: pa.Field) -> str:
    return f"{f.type}" if want.nullable else f"{'nullable' if f.nullable else 'required'} {f.type}"


def open_part(path: str | Path) -> pq.ParquetFile:
    """The Parquet file of a part, with its path kept for messages; pages that carry a checksum
    (parts written by :func:`writer`) are checked as they are read. Raises PartError (a missing
    file, a file that is not Parquet)."""
    try:
        pf = pq.ParquetFile(path, page_checksum_verification=True)
    except _ARROW_ERRORS as e:
        raise PartError(f"{path}: not a readable Parquet part ({_reason(e)})") from e
    pf._nnue_path = str(path)
    return pf


def _reason(e: BaseException) -> str:
    return " ".join(str(getattr(e, "strerror", None) or e).split()) or type(e).__name__


def read_row_group(pf: pq.ParquetFile, rg: int, columns: Sequence[str] | None) -> pa.Table:
    """``pf.read_row_group(rg, columns)`` on one thread. Raises PartError naming the file and row
    group where pyarrow cannot read it (a damaged page, a checksum that fails)."""
    try:
        return pf.read_row_group(rg, columns=columns, use_threads=False)
    except _ARROW_ERRORS as e:
        raise PartError(f"{_where(pf, rg)}: unreadable ({_reason(e)})") from e


def names(pf: pq.ParquetFile) -> list[str]:
    """The logical columns a part holds (SCHEMA's, then its annotation columns)."""
    have = set(pf.schema_arrow.names)
    return list(SCHEMA.names) + [c for c in ANNOTATION_COLUMNS if c in have]


def _where(pf, rg: int, row: int | None = None) -> str:
    at = f"row group {rg}" + ("" if row is None else f", row {row}")
    return f"{getattr(pf, '_nnue_path', 'part')}: {at}"


# ------------------------------------------------------------------------------ writing
def writer(path: str | Path, schema: pa.Schema = CHAINED_SCHEMA) -> pq.ParquetWriter:
    """A ParquetWriter for a part of ``schema`` (flat or chained, with any annotation columns),
    with the layout's encodings (module docstring) and a CRC32 checksum in every page header,
    which :func:`open_part` has pyarrow check as it reads (a damaged page is an error, never
    rows read in silence; about 1 % of the stream's read time)."""
    names_ = schema.names
    if schema.metadata and schema.metadata.get(SCHEMA_KEY.encode()) in (str(v).encode() for v in CHAINED_VERSIONS):
        enc = {c: "BYTE_STREAM_SPLIT" for c in ("score_delta", "move", "status") if c in names_}
        return pq.ParquetWriter(path, schema, compression="zstd",
                                use_dictionary=[c for c in ("source", "flags") if c in names_],
                                column_encoding=enc, write_statistics=[c for c in names_ if c not in STATS_OFF],
                                write_page_checksum=True)
    # flat: board and game_id are high-entropy (dictionary-encoding them costs read time and space);
    # no min/max statistics for board (32 opaque bytes: a fifth of the write time, never used)
    return pq.ParquetWriter(path, schema, compression="zstd", use_dictionary=[c for c in ("source", "flags") if c in names_],
                            write_statistics=[c for c in names_ if c != "board"], write_page_checksum=True)


def _boards(col) -> np.ndarray:
    from .board import boards_from_bytes

    return np.ascontiguousarray(boards_from_bytes(col))


def encode(table: pa.Table, group: int, version: int = CHAINED) -> pa.Table:
    """Flat rows (SCHEMA's columns, annotation columns after them) as a chained table of schema
    ``version`` (3, or 2 for a dataset of that layout): rows in the same order, a chain start at
    least every ``group`` rows (write it in row groups of ``group``). The columns are made in one
    compiled pass (:func:`nnue.pipeline.compiled.chain.encode`). Raises ValueError for schema 3
    and a ``flags`` value that is null or above 15 (no such flag is defined), or a result outside
    −1..1 (:func:`_status_of`)."""
    from .compiled import chain

    n = table.num_rows
    boards = _boards(table.column("board"))
    bm = table.column("best_move").combine_chunks()
    best = _values(bm, np.uint16) if bm.buffers()[1] is not None else np.zeros(n, np.uint16)
    best_valid = _valid(bm)
    cap = _bools(table.column("best_move_is_capture").combine_chunks())
    start, move_valid, raw_valid, ply_keep, pc_keep = (np.empty(n, np.bool_) for _ in range(5))
    move = np.empty(n, np.uint16)
    delta = np.empty(n, np.uint32)
    ply = _values(table.column("ply").combine_chunks(), np.uint16)
    pcount = _values(table.column("piece_count").combine_chunks(), np.uint8)
    chain.encode(boards, best, best_valid, _values(table.column("score").combine_chunks(), np.int16),
                 _values(table.column("result").combine_chunks(), np.int8), ply, pcount, cap, group,
                 start, move, move_valid, raw_valid, delta, ply_keep, pc_keep)
    stem_buf = np.zeros((n, 32), np.uint8)
    stem_buf[start] = boards[start]
    cols = {
        "stem": pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), n, [_mask_buffer(start), pa.py_buffer(stem_buf)]),
        "move": _nullable(move, move_valid, pa.uint16()),
        "move_raw": _nullable(best, raw_valid, pa.uint16()),
        "score_delta": pa.Array.from_buffers(pa.uint32(), n, [None, pa.py_buffer(delta)]),
        "ply_reset": _nullable(ply, ply_keep, pa.uint16()),
        "piece_count_reset": _nullable(pcount, pc_keep, pa.uint8()),
    }
    if version == CHAINED:
        cols["status"] = pa.array(_status_of(table), pa.uint16())
        kept = ("game_id", "source")
    else:
        kept = ("result", "in_check", "best_move_is_capture", "game_id", "source", "flags")
    for c in kept:
        cols[c] = table.column(c)
    extra = [f for f in table.schema if f.name in ANNOTATION_COLUMNS]
    schema = chained_schema(extra, version=version)
    for f in extra:
        cols[f.name] = table.column(f.name)
    return pa.table([cols[name] for name in schema.names], schema=schema)


def _status_of(table: pa.Table) -> np.ndarray:
    """The ``status`` column (schema 3) of flat rows: flags, in_check, best_move_is_capture,
    result and their nulls, (n,) uint16 (:data:`nnue.pipeline.schema.STATUS_FLAGS` and the bits
    after it; the result as result + 1 in bits 8–9, from its values buffer even under a null, which
    is what the chain encoder compares). Raises ValueError for a flags value that is null or above
    15, or a result outside −1..1."""
    n = table.num_rows
    fl = table.column("flags").combine_chunks()
    flags = _values(fl, np.uint8) if n else np.zeros(0, np.uint8)
    bad = np.flatnonzero(~_valid(fl) | (flags > STATUS_FLAGS))
    if len(bad):
        raise ValueError(f"row {int(bad[0])}: a flags value that is null or above 15 (no such flag is defined) has "
                         f"no place in a chained part")
    res = table.column("result").combine_chunks()
    rv = _values(res, np.int8) if n and res.buffers()[1] is not None else np.zeros(n, np.int8)
    bad = np.flatnonzero((rv < -1) | (rv > 1))
    if len(bad):
        raise ValueError(f"row {int(bad[0])}: a result outside -1..1 has no place in a chained part")
    st = flags.astype(np.uint16)
    st |= (rv + 1).astype(np.uint16) << np.uint16(STATUS_RESULT_SHIFT)
    st |= np.where(_valid(res), np.uint16(0), np.uint16(STATUS_RESULT_NULL))
    for c, bit, null in (("in_check", STATUS_CHECK, STATUS_CHECK_NULL),
                         ("best_move_is_capture", STATUS_CAPTURE, STATUS_CAPTURE_NULL)):
        col = table.column(c).combine_chunks()
        st |= np.where(_bools(col), np.uint16(bit), np.uint16(0))
        st |= np.where(_valid(col), np.uint16(0), np.uint16(null))
    return st


def _from_status(st: np.ndarray, c: str) -> np.ndarray:
    """Logical column ``c`` (flags, in_check, best_move_is_capture, result) from ``status`` values
    (n,) uint16, as the stream reads it (flags uint8; result int8, its values buffer where null;
    the others bool, null as False)."""
    if c == "flags":
        return (st & np.uint16(STATUS_FLAGS)).astype(np.uint8)
    if c == "result":
        return ((st >> np.uint16(STATUS_RESULT_SHIFT)) & np.uint16(3)).astype(np.int8) - np.int8(1)
    return (st & np.uint16(STATUS_CHECK if c == "in_check" else STATUS_CAPTURE)) != 0


def _results(t: pa.Table, status: np.ndarray | None) -> np.ndarray:
    """(n,) int8 results, stm POV, of a chained row group's physical table: from ``status``
    (schema 3) or the ``result`` column (schema 2)."""
    return _from_status(status, "result") if status is not None else t.column("result").to_numpy()


def _status_array(st: np.ndarray, c: str) -> pa.Array:
    """:func:`_from_status` as an Arrow array of SCHEMA's type, with its nulls."""
    if c == "flags":
        return pa.array(_from_status(st, c), pa.uint8())
    bit = {"in_check": STATUS_CHECK_NULL, "best_move_is_capture": STATUS_CAPTURE_NULL, "result": STATUS_RESULT_NULL}[c]
    null = (st & np.uint16(bit)) != 0
    return pa.array(_from_status(st, c), SCHEMA.field(c).type, mask=null if null.any() else None)


def _nullable(values: np.ndarray, valid: np.ndarray, type_: pa.DataType) -> pa.Array:
    """A nullable Arrow array of ``values`` (whatever sits under the nulls) where ``valid``."""
    return pa.Array.from_buffers(type_, len(values), [_mask_buffer(valid), pa.py_buffer(np.ascontiguousarray(values))],
                                 null_count=int(len(valid) - np.count_nonzero(valid)))


def _mask_buffer(valid: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def chained_schema(extra: Sequence[pa.Field] = (), metadata: dict | None = None, version: int = CHAINED) -> pa.Schema:
    """CHAINED_SCHEMA (or schema 2's) with annotation fields after it (and more metadata)."""
    base = CHAINED_SCHEMA if version == CHAINED else CHAINED_SCHEMA_V2
    meta = dict(base.metadata)
    meta.update(metadata or {})
    return pa.schema(list(base) + list(extra), metadata=meta)


def flat_schema(extra: Sequence[pa.Field] = (), metadata: dict | None = None) -> pa.Schema:
    """SCHEMA with annotation fields after it (and more metadata)."""
    meta = dict(SCHEMA.metadata)
    meta.update(metadata or {})
    return pa.schema(list(SCHEMA) + list(extra), metadata=meta)


# ------------------------------------------------------------------------------ reading
def _physical(want: Iterable[str], version: int = CHAINED) -> list[str]:
    out = ["stem"]
    needs = _needs(version)
    for c in want:
        for p in needs.get(c, (c,)):
            if p not in out:
                out.append(p)
    return out


def _valid(col) -> np.ndarray:
    """(n,) bool: the rows where ``col`` is not null (its validity bitmap unpacked: a tenth of
    ``is_valid().to_numpy()``'s time)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    n = len(col)
    if col.null_count == 0:
        return np.ones(n, np.bool_)
    bits = np.frombuffer(col.buffers()[0], np.uint8)
    return np.unpackbits(bits, count=n + col.offset, bitorder="little")[col.offset:].view(np.bool_)


def _values(col, dtype) -> np.ndarray:
    """A nullable column's values buffer (whatever sits under nulls), as ``dtype``."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    return np.frombuffer(col.buffers()[1], dtype=dtype, count=len(col), offset=col.offset * np.dtype(dtype).itemsize)


def _decode(pf, rg: int, t: pa.Table, want: Sequence[str], stem: pa.Array | None = None,
            start: np.ndarray | None = None, status: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The logical columns ``want`` that need chain context, from a chained row group's physical
    table (``stem`` its stem column and ``start`` that column's validity, when the caller has
    them; ``status`` the status column's values, schema 3): {"board": (n, 32) uint8, "best_move":
    (n,) int64 (−1 none), "score": (n,) int16, "ply": (n,) uint16, "piece_count": (n,) uint8}.
    Raises ChainError."""
    from .compiled import chain

    n = t.num_rows
    if stem is None:
        stem = t.column("stem").combine_chunks()
        start = _valid(stem)
    if status is None:
        status = _status_values(pf, rg, t)
    if n and not start[0]:
        raise ChainError(f"{_where(pf, rg, 0)}: a chain crosses row groups (the row group's first row continues one)")
    out: dict[str, np.ndarray] = {}
    need_score = any(c in want for c in ("score", "board", "best_move"))
    if need_score:
        score = out["score"] = _scores(pf, rg, start, t.column("score_delta"))
    if "ply" in want:
        col = t.column("ply_reset").combine_chunks()
        out["ply"] = chain.fill_ply(_valid(col), _values(col, np.uint16))
    if "piece_count" in want:
        col = t.column("piece_count_reset").combine_chunks()
        if status is not None:
            capv = _from_status(status, "best_move_is_capture")
        else:
            cap = t.column("best_move_is_capture").combine_chunks()
            capv = _valid(cap) & _bools(cap)
        pcount = out["piece_count"] = chain.fill_piece_count(_valid(col), _values(col, np.uint8), capv)
        bad = np.flatnonzero(pcount > 32)  # a packed board holds 32 pieces at most (below 0: 255)
        if len(bad):
            raise ChainError(f"{_where(pf, rg, int(bad[0]))}: a piece count of {int(pcount[bad[0]])}, more than a "
                             f"board holds (a damaged part)")
    if "board" in want or "best_move" in want:
        stems = _stems(stem)
        mv = t.column("move").combine_chunks()
        index = _values(mv, np.uint16)
        has = _valid(mv)
        result = _results(t, status)
        boards = np.empty((n, 32), np.uint8)
        if "best_move" in want:
            raw = t.column("move_raw").combine_chunks()
            raw_values, raw_valid = _values(raw, np.uint16), _valid(raw)
            both = np.flatnonzero(has & raw_valid)
            if len(both):  # the writer keeps a move as one or the other
                raise ChainError(f"{_where(pf, rg, int(both[0]))}: both a move index and a move kept whole "
                                 f"(never written: a damaged part)")
            best = np.empty(n, np.int64)
            out["best_move"] = best
        else:
            raw_values, raw_valid, best = index, has, np.zeros(0, np.int64)
        bad, why = chain.decode(start, stems, index, has, raw_values, raw_valid, score, result, _ALL,
                                boards.view(np.uint64), best)
        if bad >= 0:
            raise ChainError(f"{_where(pf, rg, bad)}: {chain.WHY[why]}")
        out["board"] = boards
    return out


_ALL = np.zeros(0, np.bool_)  # decode's ``keep`` for every row


def _scores(pf, rg: int, start: np.ndarray, delta) -> np.ndarray:
    """Scores (n,) int16 of a chained row group from its ``score_delta`` column and ``start``.
    Raises ChainError naming the row: a null (never written), a score outside int16."""
    from .compiled import chain

    delta = delta.combine_chunks() if isinstance(delta, pa.ChunkedArray) else delta
    if delta.null_count:
        raise ChainError(f"{_where(pf, rg, int(np.flatnonzero(~_valid(delta))[0]))}: a score delta that is null "
                         f"(never written: a damaged part)")
    score = np.empty(len(delta), np.int16)
    bad = chain.undelta_scores(start, _values(delta, np.uint32), score)
    if bad >= 0:
        raise ChainError(f"{_where(pf, rg, bad)}: score delta overflows int16")
    return score


def _stems(stem: pa.Array) -> np.ndarray:
    """The ``stem`` column's values as (n, 32) uint8, row by row (whatever the nulls hold)."""
    n = len(stem)
    buf = stem.buffers()[1]
    if buf is None or n == 0:
        return np.zeros((n, 32), np.uint8)
    return np.frombuffer(buf, np.uint8, count=32 * n, offset=32 * stem.offset).reshape(n, 32)


# status values no writer makes (_status_of): a pair of bits both set, where one is the other's null
# (in_check bits 4-5, the capture's 6-7; result + 1 in bits 8-9 is never 3), or any bit above 10;
# ``st & (st >> 1) & _PAIRS`` is nonzero when a pair is both set (0.32 ns a row, the two tests before 0.29)
_PAIRS = np.uint16(STATUS_CHECK | STATUS_CAPTURE | (1 << STATUS_RESULT_SHIFT))
assert STATUS_CHECK_NULL == STATUS_CHECK << 1 and STATUS_CAPTURE_NULL == STATUS_CAPTURE << 1


def _status_values(pf, rg: int, t: pa.Table) -> np.ndarray | None:
    """The ``status`` column's values (n,) uint16 of a physical table that has it (schema 3).
    Raises ChainError naming the row where it holds a null or a value no writer makes."""
    if "status" not in t.column_names:
        return None
    col = t.column("status").combine_chunks()
    if col.null_count:
        raise ChainError(f"{_where(pf, rg, int(np.flatnonzero(~_valid(col))[0]))}: a status that is null (never "
                         f"written: a damaged part)")
    st = _values(col, np.uint16)
    bad = np.flatnonzero((st & (st >> np.uint16(1)) & _PAIRS) | (st >> np.uint16(11)))
    if len(bad):
        raise ChainError(f"{_where(pf, rg, int(bad[0]))}: a status of {int(st[bad[0]]):#x}, which no writer makes "
                         f"(a damaged part)")
    return st


def _bools(col: pa.Array) -> np.ndarray:
    return pc.fill_null(col, False).to_numpy(zero_copy_only=False)


def read_group(pf: pq.ParquetFile, rg: int, columns: Sequence[str] | None = None) -> pa.Table:
    """Row group ``rg`` of a part as a table of logical columns (``columns``, default all the
    part has), in that order, with SCHEMA's types (annotation columns int16). Raises
    PartError (a page that does not read; ChainError: a chained part that does not decode),
    KeyError (a column the part lacks)."""
    cols = list(columns) if columns is not None else names(pf)
    version = checked_layout(pf)
    if version == FLAT:
        return read_row_group(pf, rg, cols)
    have = set(pf.schema_arrow.names)
    needs = _needs(version)
    for c in cols:
        if c not in needs and c not in have:
            raise KeyError(f"{getattr(pf, '_nnue_path', 'part')}: no {c} column")
    t = read_row_group(pf, rg, _physical(cols, version))
    status = _status_values(pf, rg, t)
    dec = _decode(pf, rg, t, [c for c in cols if c in _CHAIN_CONTEXT], status=status)
    arrays = []
    for c in cols:
        if c == "board":
            b = dec["board"]
            arrays.append(pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), len(b), [None, pa.py_buffer(b)]))
        elif c == "best_move":
            best = dec["best_move"]
            arrays.append(pa.array(np.where(best >= 0, best, 0).astype(np.uint16), pa.uint16(), mask=best < 0))
        elif c in dec:
            arrays.append(pa.array(dec[c], SCHEMA.field(c).type))
        elif status is not None and c in _STATUS:
            arrays.append(_status_array(status, c))
        else:
            arrays.append(t.column(c).combine_chunks())
    fields = [SCHEMA.field(c) if c in SCHEMA.names else pf.schema_arrow.field(c) for c in cols]
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


class Group:
    """One row group of a part as NumPy arrays, for the stream: ``g[c]`` a logical column (not
    ``board``): ``in_check`` / ``best_move_is_capture`` bool (null as False), annotation columns
    float32 (null as NaN), the rest as stored (SCHEMA's dtypes); :meth:`boards` the packed boards
    of the rows asked for, decoded from the chains only then (a chained part decodes every row,
    but writes only those). ``with_board``: the boards will be asked for. Raises PartError
    (here: a page that does not read) and ChainError (here or in :meth:`boards`)."""

    def __init__(self, pf: pq.ParquetFile, rg: int, columns: Sequence[str], with_board: bool = False):
        self.pf, self.rg = pf, rg
        version = checked_layout(pf)
        self.chained = is_chained(version)
        cols = [c for c in columns if c != "board"]
        want = cols + (["board"] if with_board else [])
        t = read_row_group(pf, rg, _physical(want, version) if self.chained else want)
        self.n = t.num_rows
        self.t = t
        self.cols: dict[str, np.ndarray] = {}
        if self.chained:
            self._stem = t.column("stem").combine_chunks()
            self._start = _valid(self._stem)
            status = self._status = _status_values(pf, rg, t)
            self.cols.update(_decode(pf, rg, t, [c for c in cols if c in _CHAIN_CONTEXT], self._stem, self._start,
                                     status))
            if status is not None:  # schema 3: flags, in_check, capture from one column
                self.cols.update({c: _from_status(status, c) for c in cols if c in _STATUS})
        for c in cols:
            if c in self.cols:
                continue
            col = t.column(c)
            if c in ("in_check", "best_move_is_capture"):
                self.cols[c] = pc.fill_null(col, False).to_numpy(zero_copy_only=False)
            elif c in ANNOTATION_COLUMNS:
                self.cols[c] = col.cast("float32").to_numpy(zero_copy_only=False).astype(np.float32)
            else:
                self.cols[c] = col.to_numpy()

    def __getitem__(self, c: str) -> np.ndarray:
        return self.cols[c]

    def boards(self, rows: np.ndarray | None = None) -> np.ndarray:
        """(k, 32) uint8 packed boards of ``rows`` (increasing row indices, or an (n,) bool mask;
        None: every row)."""
        if rows is not None and rows.dtype == np.bool_:
            mask = rows
        elif rows is not None:
            mask = np.zeros(self.n, np.bool_)
            mask[rows] = True
        else:
            mask = None
        if not self.chained:
            b = _boards(self.t.column("board"))
            return b if mask is None else np.take(b, np.flatnonzero(mask) if rows.dtype == np.bool_ else rows, axis=0)
        from .compiled import chain

        t = self.t
        stem, start = self._stem, self._start
        mv = t.column("move").combine_chunks()
        score = self.cols.get("score")
        if score is None:
            score = _scores(self.pf, self.rg, start, t.column("score_delta"))
        out = np.empty((self.n if mask is None else int(np.count_nonzero(mask)), 32), np.uint8)
        index, has = _values(mv, np.uint16), _valid(mv)
        result = self.cols["result"] if "result" in self.cols else _results(t, self._status)
        bad, why = chain.decode(start, _stems(stem), index, has, index, has, score, result,
                                _ALL if mask is None else mask, out.view(np.uint64), np.zeros(0, np.int64))
        if bad >= 0:
            raise ChainError(f"{_where(self.pf, self.rg, bad)}: {chain.WHY[why]}")
        return out


def read_arrays(pf: pq.ParquetFile, rg: int, columns: Sequence[str]) -> dict[str, np.ndarray]:
    """Row group ``rg`` as NumPy arrays (:class:`Group`'s dtypes; ``board`` (n, 32) uint8).
    Raises ChainError."""
    g = Group(pf, rg, columns, with_board="board" in columns)
    return {c: g.boards() if c == "board" else g[c] for c in columns}


def row_group_boards(pf: pq.ParquetFile, rg: int, t: pa.Table) -> np.ndarray:
    """The packed boards (n, 32) uint8 of row group ``rg``, from ``t``: that row group as read
    with its physical columns (the flat layout's ``board``, or the chained layout's columns
    that :func:`_decode` needs). Raises ChainError."""
    if checked_layout(pf) == FLAT:
        return _boards(t.column("board"))
    return _decode(pf, rg, t, ["board"])["board"]


def row_groups(path: str | Path, columns: Sequence[str] | None = None) -> Iterator[pa.Table]:
    """Each row group of a part, as :func:`read_group` gives it."""
    pf = open_part(path)
    for rg in range(pf.metadata.num_row_groups):
        yield read_group(pf, rg, columns)


def read_part(path: str | Path, columns: Sequence[str] | None = None) -> pa.Table:
    """A whole part as one table of logical columns (:func:`read_group`)."""
    pf = open_part(path)
    tables = [read_group(pf, rg, columns) for rg in range(pf.metadata.num_row_groups)]
    if not tables:
        cols = list(columns) if columns is not None else names(pf)
        return pa.table({c: pa.array([], SCHEMA.field(c).type if c in SCHEMA.names else pa.int16()) for c in cols})
    return pa.concat_tables(tables)


def num_rows(path: str | Path) -> int:
    return pq.ParquetFile(path).metadata.num_rows
