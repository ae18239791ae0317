"""Pack dumps into a Parquet dataset: validate with python-chess, normalise, write atomically.

``pack(inputs, dataset)`` reads each input with its format's reader, validates every record
(python-chess), and writes one Parquet part file per input plus a JSON-lines rejects file and the
manifest (:mod:`nnue.pipeline.manifest`). Every record read is either packed or rejected with a
reason: ``read == packed + sum(rejected.values())`` per file, always.

An input whose sha256 is already in the manifest is skipped, so packing a folder again only
adds new files. Part and rejects files are written under temporary names and renamed once
complete, and the manifest is replaced last: an interrupted run leaves no file that looks finished.
"""
from __future__ import annotations

import json
import os
import re
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Iterable

import chess
import numpy as np
import pyarrow as pa

from . import manifest as mf
from .board import pack_board
from .chessrules import RecordError, encode_move, validate
from .formats import (FormatError, PackedRows, ReaderOptions, Reject, detect_format, format_from_extension,
                      LATIN1_BYTES, get_format, open_binary, open_text, read_exact, text_errors)
from .parts import read_part
from .ranges import COMPRESSED, Rebase, open_range
from .schema import CHAINED_VERSION, CHAINED_VERSIONS, FLAG_PLY_UNKNOWN, FLAG_SCORE_MATE, FLAG_SCORE_NONE, FLAT_VERSION, SCHEMA

LAYOUTS = {"chained": CHAINED_VERSION, "flat": FLAT_VERSION}  # nnue pack --layout (a new dataset's)

ROW_GROUP = 65536
SCORE_UNITS = ("cp", "sf-internal")
#: what each unit is, for the line ``nnue pack`` prints
UNIT_WORDS = {"cp": "UCI centipawns", "sf-internal": "Stockfish internal units (cp = 100·score/208 when streamed)"}

DEDUP_KEY_BYTES = 25  # occupancy, piece nibbles, stm/ep: the position, not its counters or labels
GAME_ID_POSITIONS = 16  # a game's id hashes the keys of its first this-many valid positions


def _key_hashes(boards: np.ndarray) -> np.ndarray:
    """64-bit hashes of the position keys (bytes 0..24 of each packed board: occupancy, piece
    nibbles, side to move and en passant; not the counters, score or result).
    boards: (n, 32) uint8 -> (n,) uint64."""
    from .compiled.gameid import key_hashes  # numba: one pass, no temporaries

    return key_hashes(np.ascontiguousarray(np.asarray(boards, dtype=np.uint8).reshape(-1, 32)))


class GameIds:
    """Content-derived game ids for one input, fed its valid positions in file order.

    A game's id is a 64-bit hash of the position keys (:func:`_key_hashes`) of its first
    ``GAME_ID_POSITIONS`` valid positions, in order (all of them for a shorter game): the same
    game gets the same id whatever the format, the counters or the scores, so copies of a game
    packed from ``.plain``, bullet text and ``.pgn`` share an id and a side of the
    train/validation split. Games are the reader's runs of one game ordinal (explicit in PGN,
    binpack and viriformat; found from ply and result continuity in ``.plain``, bullet text,
    sfbin and marlinformat); in formats without games (EPD, bulletformat, shuffled dumps) each
    position is its own game, so its id is a hash of the position alone. Positions dropped by
    ``--dedup`` are fed too: an id never depends on what the dataset already holds.

    Usage: :meth:`feed` runs of (ordinal, board) in file order (ordinals non-decreasing);
    :meth:`pending` names the one ordinal not settled yet (the last game, while it has fewer than
    ``positions`` positions: its rows wait); :meth:`lookup` maps settled ordinals to ids;
    :meth:`finish` settles the last game at the end of the file. The hash: each key is hashed
    (SplitMix64 over its words), mixed with its index in the game, the terms are summed mod 2^64
    and the sum is mixed with the count, so that feeding in any run lengths gives the same ids.
    """

    def __init__(self, positions: int = GAME_ID_POSITIONS):
        self.k = positions
        self.last = None  # ordinal of the game fed last, its running sum and count of positions
        self.sum = np.uint64(0)
        self.count = 0
        self.open = False  # whether that game's id is still to be settled
        self.fin_ord: list[np.ndarray] = []
        self.fin_id: list[np.ndarray] = []

    @staticmethod
    def _id(total: np.ndarray, count: np.ndarray) -> np.ndarray:
        from .compiled.gameid import game_ids  # splitmix64(total ^ splitmix64(count)), in numba

        return game_ids(np.asarray(total, np.uint64), np.asarray(count, np.int64))

    def _settle(self) -> None:
        if self.open:
            self.fin_ord.append(np.array([self.last], np.int64))
            self.fin_id.append(self._id(np.array([self.sum], np.uint64), np.array([self.count])))
            self.open = False

    def feed(self, ordinals: np.ndarray, boards: np.ndarray) -> None:
        """Add a run of valid positions in file order: ordinals (n,) int64 game ordinals
        (non-decreasing), boards (n, 32) uint8 packed boards."""
        o = np.asarray(ordinals, np.int64)
        n = len(o)
        if not n:
            return
        if (self.last is not None and o[0] < self.last) or (n > 1 and np.any(o[1:] < o[:-1])):
            raise AssertionError("game ordinals must not decrease within a file")
        new = np.empty(n, bool)
        new[0] = self.last is None or o[0] != self.last
        new[1:] = o[1:] != o[:-1]
        cont = not new[0]  # the first rows continue the game fed last
        if not cont:
            self._settle()
        starts = np.flatnonzero(np.concatenate([[True], new[1:]]))
        nseg = len(starts)
        seg = np.cumsum(np.concatenate([[False], new[1:]]))  # segment of each row
        j = np.arange(n) - starts[seg]  # index of the row in its game
        if cont:
            j[seg == 0] += self.count
        take = j < self.k
        every = bool(take.all())  # no copies when every row counts (short games, one-position games)
        from .compiled.gameid import position_terms  # splitmix64(key hash + j * 0xD6E8FEB86659FD93)

        terms = position_terms(np.ascontiguousarray(boards if every else np.asarray(boards)[take], np.uint8),
                               (j if every else j[take]).astype(np.int64))
        if every and nseg == n:  # one row per game: the sums are the terms
            counts, sums = np.ones(n, np.int64), terms
        else:
            counts = np.bincount(seg if every else seg[take], minlength=nseg)
            # per-segment sums of the taken rows (contiguous, in segment order), wrapping mod 2^64
            csum = np.concatenate([np.zeros(1, np.uint64), np.cumsum(terms, dtype=np.uint64)])
            ends = np.cumsum(counts)
            sums = csum[ends] - csum[ends - counts]
        seg_ord = o[starts]
        first = 0
        if cont:
            with np.errstate(over="ignore"):
                sums[0] += self.sum
            counts[0] += self.count
            if not self.open:  # that game was settled already (it had k positions)
                first = 1
        done = slice(first, nseg - 1)
        if nseg - 1 > first:
            self.fin_ord.append(seg_ord[done])
            self.fin_id.append(self._id(sums[done], counts[done]))
        if nseg > 1 or not cont:
            self.open = True
        self.last, self.sum, self.count = int(seg_ord[-1]), sums[-1], int(counts[-1])
        if self.count >= self.k:
            self._settle()

    def pending(self) -> int | None:
        """The ordinal whose id is not settled yet (the game fed last, while it has fewer than
        ``positions`` positions), or None."""
        return self.last if self.open else None

    def finish(self) -> None:
        """End of the file: settle the last game."""
        self._settle()

    def lookup(self, ordinals: np.ndarray) -> np.ndarray:
        """Ids of settled ordinals: (n,) int64/uint64 -> (n,) uint64. Forgets ordinals below the
        smallest one asked for (they are written). Raises AssertionError for an unsettled one."""
        o = np.asarray(ordinals).astype(np.int64)
        if not len(o):
            return np.zeros(0, np.uint64)
        if len(self.fin_ord) > 1:
            self.fin_ord, self.fin_id = [np.concatenate(self.fin_ord)], [np.concatenate(self.fin_id)]
        fo = self.fin_ord[0] if self.fin_ord else np.zeros(0, np.int64)
        fi = self.fin_id[0] if self.fin_id else np.zeros(0, np.uint64)
        # rows come in runs of one ordinal (a game): look up each run once
        starts = np.flatnonzero(np.concatenate([[True], o[1:] != o[:-1]]))
        runs = o[starts]
        if len(fo) and int(fo[-1]) - int(fo[0]) == len(fo) - 1:  # consecutive ordinals (the usual case)
            at = runs - fo[0]
            at[(at < 0) | (at >= len(fo))] = len(fo)
        else:
            at = np.searchsorted(fo, runs)
        if np.any(at >= len(fo)) or np.any(fo[np.minimum(at, len(fo) - 1)] != runs):
            raise AssertionError("game id asked for before its game was settled")
        ids = np.repeat(fi[at], np.diff(np.append(starts, len(o))))
        lo = int(at.min())
        if lo:
            self.fin_ord, self.fin_id = [fo[lo:]], [fi[lo:]]
        return ids


def _offset_location(first: str, i: int, size: int = 32) -> str:
    """Location of the i-th record of a run whose first record is at ``first`` ("byte N")."""
    return f"byte {int(first.split()[1]) + i * size}"


def _move_columns(rows: PackedRows, pick, m: int) -> dict:
    """best_move / best_move_is_capture of a PackedRows run (null where the record had no move)."""
    if rows.best_move is None:
        return {"best_move": pa.nulls(m, pa.uint16()), "best_move_is_capture": pa.nulls(m, pa.bool_())}
    missing = ~pick(rows.has_move)
    return {"best_move": pa.array(pick(rows.best_move), pa.uint16(), mask=missing),
            "best_move_is_capture": pa.array(pick(rows.best_move_is_capture), pa.bool_(), mask=missing)}


def _table(arrays: dict, n: int, key: str) -> pa.Table:
    arrays = dict(arrays, source=pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([key])))
    return pa.table({name: arrays[name] for name in SCHEMA.names}, schema=SCHEMA)


def _head(path: Path, binary: bool, n: int = 65536, errors: str = "replace") -> str | bytes:
    """The first ``n`` characters (or bytes) of a dump, decompressed (empty for an empty file)."""
    if binary:
        with open_binary(path) as f:
            return read_exact(f, n)
    with open_text(path, errors) as f:
        return f.read(n)


# control characters that no text dump holds (all of C0 but tab, LF, VT, FF, CR): in a PGN, whose
# bytes that are not UTF-8 are read as Latin-1, they tell binary data from Latin-1 text
_CONTROL = re.compile("[\x00-\x08\x0e-\x1f]")


# reader rejects that mean "this record does not decode", as opposed to "decodes to a bad position"
DECODE_REASONS = frozenset({"malformed record", "truncated record", "corrupt chain", "game header cut short"})
NOTHING_DECODES_AFTER = 1024  # a binary file whose first this-many records all fail is not in the format


def _decompress_errors(path: Path) -> tuple:
    """The exceptions a corrupt compressed input raises while it is read."""
    import gzip
    import lzma
    import zlib

    errs: list = [EOFError, zlib.error, lzma.LZMAError, gzip.BadGzipFile]
    try:
        import zstandard

        errs.append(zstandard.ZstdError)
    except ImportError:
        pass
    if path.suffix.lower() == ".bz2":
        errs.append(OSError)  # bz2 reports a corrupt stream as OSError("Invalid data stream")
    return tuple(errs)


def _reraise_with_path(items, path: Path, spec, fmt: str = "", lead: dict | None = None, first: bool = True,
                       rebase=None):
    """Iterate a reader, turning its FormatError (wrong format) into one naming the file; a
    corrupt compressed stream, and a binary file whose first record does not decode (or whose
    first NOTHING_DECODES_AFTER records all fail), are FormatErrors too (issue 15 item 4).

    lead: filled with what the "nothing decodes" check needs across ranges (``rejects``: rejects
    before the first record that decodes, ``first_reject``: (location, reason) of the first,
    ``good``: whether one decodes). first: this is the file's first range (the checks of the
    file's first records run here; a later range only counts). rebase: the range's Rebase (for
    the message of a FormatError a later range's reader raises)."""
    n = good = 0
    first_reject = None
    try:
        for item in items:
            if spec.binary and not good:
                if isinstance(item, Reject):
                    first_reject = first_reject or item
                    if first and n == 0 and item.reason in DECODE_REASONS:
                        raise FormatError(f"{item.location}: the first record does not decode ({item.reason}: "
                                          f"{item.detail})")
                    n += 1
                    if first and n >= NOTHING_DECODES_AFTER:
                        raise FormatError(f"the first {n} records all fail (first at {first_reject.location}: "
                                          f"{first_reject.reason})")
                else:
                    good = 1
            yield item
    except FormatError as e:
        msg = str(e) if rebase is None else rebase.loc(str(e))
        raise FormatError(f"{path}: {msg}; expected {spec.doc}; nothing written for this file") from None
    except _decompress_errors(path) as e:
        raise FormatError(f"{path}: corrupt {path.suffix} stream ({type(e).__name__}: {e}); nothing "
                          f"written for this file") from None
    finally:
        if lead is not None:
            lead.update(rejects=n, good=bool(good),
                        first_reject=None if first_reject is None else (first_reject.location, first_reject.reason))


def _rebased(items, rb):
    """A range reader's items with their locations (and the file offsets in reject details)
    turned into the file's (ranges.Rebase)."""
    from .ranges import RebasedLocations

    for item in items:
        if isinstance(item, PackedRows):
            item.first = rb.loc(item.first)
            if item.locations is not None:
                item.locations = RebasedLocations(item.locations, rb)
        elif isinstance(item, Reject):
            item.location = rb.loc(item.location)
            item.detail = rb.details(item.detail)
        else:
            item.location = rb.loc(item.location)
        yield item


def _looks_like_text(head: bytes) -> bool:
    """Is a binary input's head plain text (a text dump given with --format of a binary format)?"""
    sample = head[:4096]
    if len(sample) < 64 or b"\n" not in sample:
        return False
    printable = sum(32 <= b < 127 or b in (9, 10, 13) for b in sample)
    return printable >= 0.99 * len(sample)


def range_names(key: str, rng) -> tuple[str, str]:
    """Part and rejects file names of one range of the input whose sha256 starts with ``key``:
    ``part-<key>.parquet`` / ``rejects-<key>.jsonl`` for a file of one range, else
    ``part-<key>-<index>.parquet`` / ``rejects-<key>-<index>.jsonl`` (index: 4 digits or more)."""
    if rng.count == 1:
        return f"part-{key}.parquet", f"rejects-{key}.jsonl"
    tag = f"{rng.index:0{max(4, len(str(rng.count - 1)))}d}"
    return f"part-{key}-{tag}.parquet", f"rejects-{key}-{tag}.jsonl"


def _check_file(path: Path, fmt: str, binary: bool) -> str | bytes:
    """The head checks of a file in format ``fmt`` (before anything is written): a corrupt
    compressed stream, text given as a binary format, binary given as text. Returns the head."""
    spec = get_format(fmt)
    latin1 = text_errors(fmt) != "replace"
    try:
        head = _head(path, spec.binary, errors=text_errors(fmt))
    except _decompress_errors(path) as e:
        raise FormatError(f"{path}: corrupt {path.suffix} stream ({type(e).__name__}: {e}); nothing "
                          f"written for this file") from None
    if spec.binary and _looks_like_text(head):
        raise FormatError(f"{path}: byte 0: text, not {fmt} (a binary format); pass the text format "
                          f"or --format auto; nothing written for this file")
    if not spec.binary and ("\x00" in head or "\ufffd" in head or latin1 and _CONTROL.search(head)):
        offset, what = _not_text_at(path, latin1=latin1)
        where = f"byte {offset}" + (" of its decompressed stream" if path.suffix.lower() in COMPRESSED else "")
        raise FormatError(f"{path}: {where}: {what}, not text; expected {spec.doc}; nothing written for this file")
    return head


def _not_text_at(path: Path, n: int = 4 * 65536, latin1: bool = False) -> tuple[int, str]:
    """Where the first of ``n`` bytes (decompressed) that make a text head "not text" is: a NUL,
    bytes that are not UTF-8, or an encoded U+FFFD (the head check of :func:`_check_file` reads
    characters, after newline translation, so its index is not the byte offset)."""
    with open_binary(path) as f:
        raw = read_exact(f, n)
    found = []
    if b"\x00" in raw:
        found.append((raw.index(b"\x00"), "a NUL byte"))
    if b"\xef\xbf\xbd" in raw:
        found.append((raw.index(b"\xef\xbf\xbd"), "U+FFFD (a replaced character)"))
    if latin1:  # PGN: bytes that are not UTF-8 are Latin-1 text; a control character is not text
        m = _CONTROL.search(raw.decode("latin-1"))
        if m is not None:
            found.append((m.start(), f"control byte 0x{raw[m.start()]:02x}"))
        return min(found) if found else (0, "not text")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.end < len(raw) or len(raw) < n:  # not a character cut by the end of what was read
            found.append((e.start, f"byte 0x{raw[e.start]:02x} that is not UTF-8"))
    return min(found) if found else (0, "not UTF-8")


def pack_range(path: Path, fmt: str, dataset: Path, sha: str, options: ReaderOptions, rng,
               progress=None, seen: set | None = None, layout: int = CHAINED_VERSION) -> dict:
    """Pack one byte range (:class:`nnue.pipeline.ranges.Range`) of an input into temporary part
    and rejects files in ``dataset`` (renamed by :func:`finish_file` once every range is done).

    seen: with dedup, the position keys (first 25 packed bytes) already in the dataset; a
    position whose key is in it is rejected as "duplicate position", and new keys are added.
    layout: the part's layout (:mod:`nnue.pipeline.parts`: chained, or flat rows).
    Returns {"range", "tmp_part", "tmp_rejects", "read", "packed", "rejected", "castling",
    "validated", "lead"}. Raises FormatError (the file's first range: not in format ``fmt``);
    its temporary files are removed then.
    """
    spec = get_format(fmt)
    key = sha[:16]
    part_name, rejects_name = range_names(key, rng)
    # temporary names carry the pid: two processes packing the same input never share one
    stem = part_name[len("part-"):-len(".parquet")]
    tmp_part = dataset / f".part-{stem}.{os.getpid()}.parquet.tmp"
    tmp_rej = dataset / f".rejects-{stem}.{os.getpid()}.jsonl.tmp"
    validated = 0  # records validated one by one with python-chess (not in bulk PackedRows runs)
    lead: dict = {}
    cols = {name: [] for name in SCHEMA.names}
    read = packed = 0
    rejected: Counter[str] = Counter()
    castling = [0, 0]  # castling moves written as the king's two-square step, as king takes rook
    rej_file: list = [None]

    def reject(loc, reason, detail, raw):
        rejected[reason] += 1
        rej_file[0].write(json.dumps({"source": str(path), "location": loc, "reason": reason,
                                      "detail": detail, "raw": raw}) + "\n")

    from . import parts

    chained = layout in CHAINED_VERSIONS
    writer = parts.writer(tmp_part, parts.chained_schema(version=layout) if chained else SCHEMA)
    gids = GameIds()  # content-derived game ids; the game_id column holds ordinals until written
    fed_ord: list[int] = []  # valid positions read one by one, not yet fed to gids
    fed_board: list[bytes] = []

    segments: list[pa.Table] = []
    pending = 0

    def seal():
        """Turn the rows gathered one by one into a table segment (feeding gids first)."""
        if fed_ord:
            gids.feed(np.array(fed_ord, np.int64), np.frombuffer(b"".join(fed_board), np.uint8).reshape(-1, 32))
            fed_ord.clear()
            fed_board.clear()
        if not cols["board"]:
            return
        n = len(cols["board"])
        arrays = {name: pa.array(cols[name], SCHEMA.field(name).type) for name in SCHEMA.names if name != "source"}
        segments.append(_table(arrays, n, key))
        for v in cols.values():
            v.clear()

    def flush(force: bool = False):
        """Write whole row groups of ROW_GROUP rows (and, with force, the rest): row groups stay
        full-sized whether rows came one by one or in bulk runs of any length. Rows of the game
        whose id is not settled yet (at most GAME_ID_POSITIONS of them) wait for the next flush."""
        nonlocal pending
        seal()
        if force:
            gids.finish()
        if segments and (force or pending >= ROW_GROUP):
            table = pa.concat_tables(segments)
            ordinal = table.column("game_id").to_numpy().astype(np.int64)
            waiting = gids.pending()
            ready = table.num_rows if waiting is None else int(np.searchsorted(ordinal, waiting, "left"))
            cut = ready if force else ready - ready % ROW_GROUP
            if cut:
                done = table.slice(0, cut)
                done = done.set_column(done.schema.get_field_index("game_id"), "game_id",
                                       pa.array(gids.lookup(ordinal[:cut]), pa.uint64()))
                # cut at multiples of ROW_GROUP (but at the end): each row group starts a chain
                writer.write_table(parts.encode(done, ROW_GROUP, layout) if chained else done, row_group_size=ROW_GROUP)
            segments.clear()
            if cut < table.num_rows:
                segments.append(table.slice(cut))
            pending = table.num_rows - cut

    def add_rows(rows: PackedRows):
        """Append a run of records validated in bulk (see formats.PackedRows)."""
        nonlocal pending, packed
        n = len(rows)
        seal()
        if rows.castling is not None:  # castling moves of the run, by spelling (counted as one by one)
            castling[0] += rows.castling[0]
            castling[1] += rows.castling[1]
        gids.feed(rows.game, rows.board)  # before dedup: an id never depends on the dataset's contents
        keep = None
        if seen is not None:
            keep = np.ones(n, dtype=bool)
            for i, b in enumerate(rows.board):
                position_key = b[:DEDUP_KEY_BYTES].tobytes()
                if position_key in seen:
                    keep[i] = False
                    reject(rows.locations[i] if rows.locations is not None else _offset_location(rows.first, i),
                           "duplicate position",
                           "dedup: position already packed", b.tobytes().hex())
                else:
                    seen.add(position_key)
        pick = (lambda a: a) if keep is None else (lambda a: a[keep])
        board = np.ascontiguousarray(pick(rows.board))
        m = board.shape[0]
        arrays = {
            "board": pa.FixedSizeBinaryArray.from_buffers(pa.binary(32), m, [None, pa.py_buffer(board.tobytes())]),
            "score": pa.array(pick(rows.score), pa.int16()), "result": pa.array(pick(rows.result), pa.int8()),
            "ply": pa.array(pick(rows.ply), pa.uint16()), "piece_count": pa.array(pick(rows.piece_count), pa.uint8()),
            "in_check": pa.array(pick(rows.in_check), pa.bool_()),
            **_move_columns(rows, pick, m),
            "game_id": pa.array(pick(np.asarray(rows.game, np.int64)).astype(np.uint64), pa.uint64()),
            "flags": pa.array(pick(rows.flags), pa.uint8()),
        }
        segments.append(_table(arrays, m, key))
        pending += m
        packed += m
        if pending >= ROW_GROUP:
            flush()

    try:
        whole = rng.count == 1
        errors = text_errors(fmt)
        latin1_before = LATIN1_BYTES[0]
        if spec.binary:
            opened = open_binary(path) if whole else open_range(path, rng, True)
        else:
            opened = open_text(path, errors) if whole else open_range(path, rng, False, errors)
        with opened as stream, open(tmp_rej, "w") as rej:
            rej_file[0] = rej
            items = spec.read(stream, options if not rng.game else replace(options, first_game=rng.game))
            rb = None
            if rng.start or rng.line:
                rb = Rebase(fmt, rng)
                items = _rebased(items, rb)
            for item in _reraise_with_path(items, path, spec, fmt, lead=lead, first=rng.start == 0, rebase=rb):
                if isinstance(item, PackedRows):
                    read += len(item)
                    if progress is not None:
                        progress.update(len(item))
                    add_rows(item)
                    continue
                read += 1
                if progress is not None:
                    progress.update(1)
                if isinstance(item, Reject):
                    reject(item.location, item.reason, item.detail, item.raw)
                    continue
                validated += 1
                try:
                    board, move = validate(item)
                    score = 0 if item.score is None else item.score
                    if not -32767 <= score <= 32767:
                        raise RecordError("score out of int16 range", str(score))
                    if item.result not in (-1, 0, 1):
                        raise RecordError("result out of range", str(item.result))
                    if item.ply is not None and not 0 <= item.ply <= 65535:
                        raise RecordError("ply out of range", str(item.ply))
                    white = board.turn == chess.WHITE
                    best = capture = None
                    if move is not None:
                        if not board.is_legal(move):
                            raise RecordError("illegal move", f"{item.move} in {item.fen}")
                        best = encode_move(board, move)
                        capture = board.is_capture(move) or move.promotion is not None
                        if fmt == "plain" and board.is_castling(move):  # the input's spelling, for write-back
                            written_to = chess.parse_square(item.move[2:4])  # as the input spelled it
                            castling[board.color_at(written_to) == board.turn] += 1
                    packed_board = pack_board(board, eval_white=score if white else -score,
                                              wdl=(item.result if white else -item.result) + 1)
                except RecordError as e:
                    reject(item.location, e.reason, e.detail, item.fen)
                    continue
                fed_ord.append(item.game)
                fed_board.append(packed_board)
                if seen is not None:
                    position_key = packed_board[:DEDUP_KEY_BYTES]
                    if position_key in seen:
                        reject(item.location, "duplicate position", "dedup: position already packed", item.fen)
                        continue
                    seen.add(position_key)
                flags = ((FLAG_SCORE_NONE if item.score is None else 0)
                         | (FLAG_SCORE_MATE if item.score_is_mate else 0)
                         | (FLAG_PLY_UNKNOWN if item.ply is None else 0))
                cols["board"].append(packed_board)
                cols["score"].append(score)
                cols["result"].append(item.result)
                cols["ply"].append(item.ply or 0)
                cols["piece_count"].append(chess.popcount(board.occupied))
                cols["in_check"].append(board.is_check())
                cols["best_move"].append(best)
                cols["best_move_is_capture"].append(capture)
                cols["game_id"].append(item.game)  # the ordinal; its id is set when written
                cols["flags"].append(flags)
                packed += 1
                pending += 1
                if pending >= ROW_GROUP:
                    flush()
            flush(force=True)
        writer.close()
    except BaseException:
        writer.close()
        tmp_part.unlink(missing_ok=True)
        tmp_rej.unlink(missing_ok=True)
        raise
    assert read == packed + sum(rejected.values())
    return {"range": rng, "tmp_part": str(tmp_part), "tmp_rejects": str(tmp_rej), "read": read,
            "packed": packed, "rejected": dict(rejected), "castling": castling, "validated": validated,
            "lead": lead, "pgn_pov": options.pgn_pov, "latin1_bytes": LATIN1_BYTES[0] - latin1_before}


def _castling_text(castling) -> str | None:
    return (None if not any(castling) else "mixed" if all(castling)
            else "king-takes-rook" if castling[1] else "king-two-squares")


def discard(results: list[dict]) -> None:
    """Remove the temporary files of packed ranges (a file that failed or was not finished)."""
    for r in results:
        Path(r["tmp_part"]).unlink(missing_ok=True)
        Path(r["tmp_rejects"]).unlink(missing_ok=True)


def finish_file(path: Path, fmt: str, dataset: Path, sha: str, score_unit: str, head, results: list[dict],
                units: tuple[list[int], int] | None = None) -> dict:
    """Check a file's packed ranges as one file, rename their temporary files into place and
    return the manifest entry (the manifest itself is the caller's). results: pack_range's, in
    range order (may be empty with ``units``). units: with --shard, (the nominal ranges of the
    file this shard holds, the file's number of nominal ranges), when it holds not all of them.
    Raises FormatError (and removes the temporary files) when the file as a whole is not in
    format ``fmt``."""
    spec = get_format(fmt)
    read = sum(r["read"] for r in results)
    packed = sum(r["packed"] for r in results)
    rejected: Counter[str] = Counter()
    for r in results:
        rejected.update(r["rejected"])
    try:
        if spec.binary and units is None:
            # the first NOTHING_DECODES_AFTER records of the file all fail: not this format (the
            # file's first range checks its own; here the count runs on over the ranges)
            lead = 0
            for r in results:
                if r["lead"].get("good"):
                    break
                lead += r["lead"].get("rejects", 0)
                if lead >= NOTHING_DECODES_AFTER:
                    loc, reason = results[0]["lead"]["first_reject"]
                    raise FormatError(f"{path}: the first {lead} records all fail (first at {loc}: {reason}); "
                                      f"expected {spec.doc}; nothing written for this file")
        whole_file = units is None or results and results[0]["range"].start == 0
        if whole_file and read == 0 and (head if spec.binary else head.strip()):
            raise FormatError(f"{path}: no {fmt} record found (line 1); is it really {spec.doc}?")
        if units is None and spec.binary and read and not packed:  # nothing decodes: not this format
            raise FormatError(f"{path}: byte 0: none of its {read} record(s) decodes to a valid position "
                              f"({', '.join(sorted(rejected))}); is it really {spec.doc}? Nothing written")
    except BaseException:
        discard(results)
        raise
    key = sha[:16]
    names = [range_names(key, r["range"]) for r in results]
    for r, (part, rej) in zip(results, names):
        os.replace(r["tmp_part"], dataset / part)
    for r, (part, rej) in zip(results, names):
        os.replace(r["tmp_rejects"], dataset / rej)
    castling = [sum(r["castling"][0] for r in results), sum(r["castling"][1] for r in results)]
    count = units[1] if units is not None else results[0]["range"].count
    entry = {
        "path": str(path), "size": path.stat().st_size, "sha256": sha, "format": fmt,
        "score_unit": score_unit, "score_pov": "side to move",
        "read": read, "packed": packed, "rejected": dict(sorted(rejected.items())),
        # how the input spelled castling moves (UCI): None (none seen), "king-takes-rook" (e1a1,
        # Chess960's spelling, also where the position reads as standard chess), "king-two-squares"
        # (e1c1) or "mixed"; nnue convert --to plain writes them back the same way
        "castling": _castling_text(castling),
        # how this part's game ids were made (GameIds); entries without the key (packed before
        # issue 15 item 5) hold SplitMix64(sha256 prefix + game ordinal)
        "game_ids": f"content:{GAME_ID_POSITIONS}",
        # records python-chess validated one by one (the rest were validated in bulk, compiled)
        "validated_by_python_chess": sum(r["validated"] for r in results),
    }
    note = next((r["range"].note for r in results if r["range"].note), "")
    if note:  # a file that would be split is one range (ranges.Range.note)
        entry["one_range_because"] = note
    if fmt == "pgn" and results:
        # the sign of its evals against the results of its decisive games (issue 20 item 2):
        # nnue pack warns when they disagree far more often than they agree (povcheck.warning)
        from .povcheck import counts

        entry["pgn_pov"] = results[0].get("pgn_pov", "mover")
        entry["pov_check"] = counts(dataset, [n[0] for n in names])
        latin1 = sum(r.get("latin1_bytes", 0) for r in results)
        if latin1:  # bytes that are not UTF-8, read as Latin-1 (ISO 8859-1, PGN's own character set)
            entry["latin1_bytes"] = latin1
    if count == 1 and units is None:
        entry["part"], entry["rejects"] = names[0]
    else:  # a file of several ranges (manifest.entry_parts lists the parts of any entry)
        entry["parts"] = [n[0] for n in names]
        entry["rejects_parts"] = [n[1] for n in names]
        entry["ranges"] = [[r["range"].index, r["range"].start, r["range"].end] for r in results]
        entry["range_count"] = count
        if units is not None:
            entry["shard_units"] = sorted(units[0])
            entry["castling_seen"] = castling  # a merge of the shards needs the counts, not their summary
    return entry


def expand_inputs(inputs: Iterable[str | Path]) -> tuple[list[Path], list[Path]]:
    """Files as given; folders expanded (recursively, sorted) to the files whose extension names
    a dump format (``formats.EXTENSIONS``, compressed or not). Returns (files, ignored files)."""
    out, ignored = [], []
    for p in map(Path, inputs):
        if p.is_dir():
            for q in sorted(q for q in p.rglob("*") if q.is_file() and not q.name.startswith(".")):
                (out if format_from_extension(q) else ignored).append(q)
        elif p.is_file():
            out.append(p)
        else:
            raise FileNotFoundError(f"{p}: no such file or folder")
    return out, ignored


def _add_keys(dataset: Path, m: dict, keys: set, loaded: set) -> None:
    """Add the position keys of every row of the manifest's parts not in ``loaded`` (sha256s
    whose keys are in ``keys`` already) to ``keys`` (for dedup)."""
    for sha, entry in m["files"].items():
        if sha not in loaded:
            if entry["packed"]:
                for name in mf.entry_parts(entry):
                    for b in read_part(dataset / name, ["board"]).column("board").to_pylist():
                        keys.add(b[:DEDUP_KEY_BYTES])
            loaded.add(sha)


def _pack_range_task(args) -> dict:
    """Worker entry for --workers: pack one range of one file, no progress bar."""
    return pack_range(*args)


def default_workers() -> int:
    """The cores this process may run on (``os.sched_getaffinity``), the default of --workers."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def resolve_score_unit(asked: str, files: list[Path], fmt: str, existing: str | None) -> tuple[str, str]:
    """The score unit to pack ``files`` in, and where it came from. ``asked``: ``cp``,
    ``sf-internal`` or ``auto`` (each format's documented unit, :attr:`FormatSpec.score_unit`:
    Stockfish's ``.bin``/``.binpack`` hold its internal units, every other format centipawns).
    ``existing``: the dataset's unit (None for a new one). Raises ValueError, naming a file of
    each unit, when ``auto`` finds inputs of two units, or one unlike the dataset's."""
    if asked != "auto":
        return asked, "--score-unit"
    by: dict[str, list[tuple[Path, str]]] = {}
    for f in files:
        name = detect_format(f) if fmt == "auto" else fmt
        by.setdefault(get_format(name).score_unit, []).append((Path(f), name))
    if not by:
        return existing or "cp", "the dataset" if existing else "the default"
    if len(by) > 1:
        (u1, [(f1, n1), *_]), (u2, [(f2, n2), *_]) = sorted(by.items())[:2]
        raise ValueError(f"the inputs' formats hold scores in two units: {f1} ({n1}) in {u1}, {f2} ({n2}) in {u2}; "
                         f"a dataset has one unit: pack them into two datasets, or give --score-unit")
    unit, [(f, name), *_] = next(iter(by.items()))
    if existing not in (None, unit):
        raise ValueError(f"the dataset holds scores in {existing}, and {f} ({name}) holds {unit} by its format; "
                         f"give --score-unit {existing} if its scores are {UNIT_WORDS[existing].split(' (')[0]}, "
                         f"else pack it into another dataset")
    return unit, f"the format's unit ({', '.join(sorted({n for _, n in by[unit]}))})"


def pack(inputs: Iterable[str | Path], dataset: str | Path, fmt: str = "auto",
         score_unit: str = "auto", options: ReaderOptions = ReaderOptions(),
         progress: bool = True, workers: int = 1, dedup: bool = False,
         range_mb: float | None = None, units: dict | None = None, layout: str | None = None) -> dict:
    """Pack inputs into ``dataset`` (created if needed) and return a summary.

    layout: the part layout of a new dataset, ``"chained"`` (default: move chains, about 2.3 bytes
    a position) or ``"flat"`` (a 32-byte board per row, what nnue-forge wrote before chains); an
    existing dataset's parts take its own layout (its manifest's ``schema_version``), and asking
    for another is a ValueError (``nnue convert DATASET --to chained`` upgrades a flat one).

    workers: processes that pack byte ranges (:mod:`nnue.pipeline.ranges`) of the files in
    parallel: a large uncompressed file is split into ranges of ``range_mb`` MiB (default
    ``ranges.DEFAULT_RANGE_MB``) at record or game boundaries, and every range of every file is
    one task; the output does not depend on ``workers`` (the split is a function of the file's
    bytes and ``range_mb`` only), and the manifest is updated by this process as each file's
    ranges are all done. dedup: reject positions already in the dataset or earlier in this
    run, as "duplicate position" (compares occupancy, pieces, side to move and en passant; runs
    the ranges one after another in this process, since the set of seen positions is shared).
    units: {path: nominal range indices} to pack only those ranges of those files (``--shard``,
    :func:`nnue.pipeline.shard.shard_units`); a file none of whose ranges are listed is skipped.

    score_unit: ``auto`` (each format's documented unit: :func:`resolve_score_unit`), ``cp`` or
    ``sf-internal``.

    Returns {"read", "packed", "rejected": {reason: count}, "validated_by_python_chess",
    "files": [...], "skipped": [...] (already in the dataset), "ignored": [...] (files in
    input folders with no dump extension), "score_unit", "score_unit_from"} for this run. Raises FormatError (bad format),
    ManifestError (unreadable dataset) or ValueError (mixed score units in one dataset, bad
    workers or range size).
    """
    from .ranges import DEFAULT_RANGE_MB, range_bytes

    if score_unit not in SCORE_UNITS + ("auto",):
        raise ValueError(f"score unit {score_unit!r} not one of auto, {', '.join(SCORE_UNITS)}")
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    rbytes = range_bytes(DEFAULT_RANGE_MB if range_mb is None else range_mb)
    dataset = Path(dataset)
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"layout {layout!r} not one of {', '.join(LAYOUTS)}")
    have = mf.layout(dataset)  # ManifestError for an unreadable manifest
    if layout is not None and (dataset / mf.MANIFEST).exists() and \
            (LAYOUTS[layout] in CHAINED_VERSIONS) != (have in CHAINED_VERSIONS):
        raise ValueError(f"{dataset} holds {'chained' if have in CHAINED_VERSIONS else 'flat'} parts; its new parts "
                         f"take that layout (--layout {layout} is for a new dataset; 'nnue convert {dataset} --to "
                         f"chained' upgrades a flat one)")
    version = have if (dataset / mf.MANIFEST).exists() else LAYOUTS[layout or "chained"]
    files, ignored = expand_inputs(inputs)
    if units is not None:
        files = [f for f in files if units.get(str(f))]
    created = not dataset.exists()
    dataset.mkdir(parents=True, exist_ok=True)
    try:
        return _pack_into(dataset, files, ignored, fmt, score_unit, options, progress, workers, dedup,
                          rbytes, units, version)
    except BaseException:
        if created and all(p.name == mf.LOCK for p in dataset.iterdir()):
            # a run that failed before writing anything leaves no empty folder (nor its lock file)
            (dataset / mf.LOCK).unlink(missing_ok=True)
            dataset.rmdir()
        raise


def _pack_into(dataset, files, ignored, fmt, score_unit, options, progress, workers, dedup, rbytes,
               units=None, version=CHAINED_VERSION) -> dict:
    from .ranges import plan

    m = mf.load(dataset) if (dataset / mf.MANIFEST).exists() else mf.new(version)
    score_unit, unit_from = resolve_score_unit(score_unit, files, fmt, m["score_unit"])
    if m["score_unit"] not in (None, score_unit):
        raise ValueError(f"{dataset} holds scores in {m['score_unit']}, not {score_unit}")
    m["score_unit"] = score_unit
    summary = {"read": 0, "packed": 0, "rejected": Counter(), "validated_by_python_chess": 0, "files": [],
               "skipped": [], "ignored": [str(p) for p in ignored], "score_unit": score_unit,
               "score_unit_from": unit_from}
    todo = []
    appends: dict[str, dict] = {}  # sha256 of a grown input -> {"prev": its earlier entry}
    summary["warnings"] = []
    for path in files:
        sha = mf.sha256_file(path)
        if sha in m["files"] or any(sha == t[3] for t in todo):
            summary["skipped"].append(str(path))
            continue
        f = detect_format(path) if fmt == "auto" else fmt
        grown = _grown(path, f, m, summary["warnings"]) if units is None else None
        if grown is not None:
            appends[sha] = grown
        todo.append((path, f, dataset, sha, score_unit, options, version))

    def record(entry: dict, lock: bool = True) -> None:
        # after each file (a crash keeps the finished ones), under the dataset's writer lock and
        # merged into the manifest as it is on disk now: concurrent packs never drop each other's files
        summary["read"] += entry["read"]  # this run's: of a grown input, its new bytes only
        summary["packed"] += entry["packed"]
        summary["rejected"].update(entry["rejected"])
        summary["validated_by_python_chess"] += entry.get("validated_by_python_chess", 0)
        if entry["sha256"] in appends:
            entry = append_entry(appends[entry["sha256"]]["prev"], entry)
        mf.merge(dataset, [entry], score_unit, lock=lock, version=version)
        summary["files"].append(entry)

    def ranges_of(t) -> tuple[list, tuple | None]:
        """The ranges of a todo file to pack here, and (its shard units, its number of nominal
        ranges) when this shard holds not all of them, else None. A grown input: the range of its
        new bytes (and ([1], 2): a range of a file, not the whole file)."""
        if t[3] in appends:
            return [appends[t[3]]["range"]], ([1], 2)
        rs = plan(t[0], t[1], rbytes)
        if units is None:
            return rs, None
        mine = set(units[str(t[0])])
        if mine >= set(range(rs[0].count)):
            return rs, None
        return [r for r in rs if r.index in mine], (sorted(mine), rs[0].count)

    bar = None
    if progress:
        from tqdm import tqdm
        # disable=None: no bar when stderr is not a terminal (logs stay readable)
        bar = tqdm(unit=" pos", unit_scale=True, file=sys.stderr, desc="pack", dynamic_ncols=True, disable=None)
    try:
        parallel = workers > 1 and not dedup and todo
        if parallel:
            heads = [_check_file(t[0], t[1], get_format(t[1]).binary) for t in todo]
            plans = [ranges_of(t) for t in todo]
            parallel = sum(len(rs) for rs, _ in plans) > 1
        if parallel:
            _pack_parallel(todo, heads, plans, workers, record, bar)
        elif dedup:
            # each file is packed under the dataset's writer lock, against the keys of every part
            # in the manifest as it is then: two concurrent `pack --dedup` never both add a position
            # (issue 10); other writers wait for one file at a time, never for the whole run
            seen: set = set()
            loaded: set = set()  # sha256s whose keys are in seen
            for t in todo:
                if bar is not None:
                    bar.set_postfix_str(t[0].name)
                with mf.locked(dataset):
                    now = mf.load(dataset) if (dataset / mf.MANIFEST).exists() else mf.new(version)
                    if t[3] in now["files"]:  # packed by another writer meanwhile
                        summary["skipped"].append(str(t[0]))
                        continue
                    _add_keys(dataset, now, seen, loaded)
                    head = _check_file(t[0], t[1], get_format(t[1]).binary)
                    record(_pack_sequential(t, head, *ranges_of(t), bar, seen), lock=False)
                    loaded.add(t[3])
        else:
            for t in todo:
                if bar is not None:
                    bar.set_postfix_str(t[0].name)
                head = _check_file(t[0], t[1], get_format(t[1]).binary)
                record(_pack_sequential(t, head, *ranges_of(t), bar))
    finally:
        if bar is not None:
            bar.close()
    if not (dataset / mf.MANIFEST).exists():
        mf.merge(dataset, [], score_unit, version=version)
    summary["rejected"] = dict(sorted(summary["rejected"].items()))
    return summary


def _grown(path: Path, fmt: str, m: dict, warnings: list) -> dict | None:
    """An input packed before under the same path whose bytes then grew (a match runner appends
    each finished game, issue 20 item 3): {"prev": its entry, "range": the range of its new bytes}
    when its first ``prev["size"]`` bytes are those packed (sha256), else None (a new file; a
    warning in ``warnings`` when a file of that path was packed and its earlier bytes changed)."""
    from .ranges import COMPRESSED as _COMPRESSED
    from .ranges import append_range

    size = path.stat().st_size
    prevs = [e for e in m["files"].values() if e["path"] == str(path) and "shard_units" not in e]
    if not prevs:
        return None
    prev = max(prevs, key=lambda e: e["size"])
    same = (prev["format"] == fmt and prev["size"] < size and path.suffix.lower() not in _COMPRESSED
            and mf.sha256_prefix(path, prev["size"]) == prev["sha256"])
    if not same:
        why = ("its format differs" if prev["format"] != fmt else "it is compressed (a grown compressed file "
               "cannot be entered where its earlier version ended)" if path.suffix.lower() in _COMPRESSED
               else f"its first {min(prev['size'], size):,} bytes differ from those packed")
        warnings.append(f"{path}: packed before ({prev['size']:,} bytes, sha256 {prev['sha256'][:16]}…), and {why}: "
                        f"packed whole as a new file; the rows of the earlier version stay in the dataset")
        return None
    rng, boundary = append_range(path, fmt, prev.get("packed_to", prev["size"]))
    if not boundary:
        warnings.append(f"{path}: grew from {prev['size']:,} bytes, and its new bytes continue a game of the earlier "
                        f"ones: they are packed from byte {rng.start:,} as a game of their own")
    return {"prev": prev, "range": rng}


def append_entry(prev: dict, new: dict) -> dict:
    """The manifest entry of a grown input: ``prev`` (its earlier version's entry) plus ``new``
    (the entry of the range of its new bytes, :func:`finish_file`): parts and counts of both,
    ``packed_to`` (the byte offset the next pack of a longer version starts at), ``appended``
    (each growth: from which byte, the earlier sha256) and ``replaces`` (the earlier sha256,
    dropped from the manifest by ``manifest.merge``). Game ids are those of the rows as packed."""
    e = {k: v for k, v in new.items() if k not in ("shard_units", "castling_seen", "ranges", "range_count", "part",
                                                     "rejects", "parts", "rejects_parts")}
    e["parts"] = mf.entry_parts(prev) + mf.entry_parts(new)
    e["rejects_parts"] = mf.entry_rejects(prev) + mf.entry_rejects(new)
    for k in ("read", "packed", "validated_by_python_chess", "latin1_bytes"):
        if k in prev or k in new:
            e[k] = prev.get(k, 0) + new.get(k, 0)
    rej = Counter(prev["rejected"])
    rej.update(new["rejected"])
    e["rejected"] = dict(sorted(rej.items()))
    a, b = prev.get("castling"), new.get("castling")
    e["castling"] = a if b is None else b if a is None or a == b else "mixed"
    if "pov_check" in prev and "pov_check" in new:
        e["pov_check"] = {k: prev["pov_check"][k] + new["pov_check"][k] for k in prev["pov_check"]}
    e["packed_to"] = new["size"]
    e["appended"] = prev.get("appended", []) + [{"from_byte": prev.get("packed_to", prev["size"]),
                                                  "sha256_before": prev["sha256"]}]
    e["replaces"] = prev["sha256"]
    return e


def _pack_sequential(t, head, rs, mine, bar, seen=None) -> dict:
    """The ranges of one todo file, one after another in this process; its manifest entry."""
    path, fmt, dataset, sha, score_unit, options, layout = t
    results: list[dict] = []
    try:
        for rng in rs:
            results.append(pack_range(path, fmt, dataset, sha, options, rng, progress=bar, seen=seen, layout=layout))
    except BaseException:
        discard(results)
        raise
    return finish_file(path, fmt, dataset, sha, score_unit, head, results, mine)


def _pack_parallel(todo, heads, plans, workers, record, bar) -> None:
    """Every range of every todo file as one task of a process pool; each file is finished
    (checked, renamed, recorded) in this process as soon as its ranges are all done."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    done: dict[int, dict] = {}   # file index -> {range position: result}
    finished: set[int] = set()
    pool = ProcessPoolExecutor(max_workers=min(workers, sum(len(rs) for rs, _ in plans)))
    try:
        futures = {}
        # large ranges first would balance better, but file order keeps the first files finishing first
        for fi, (t, (rs, _)) in enumerate(zip(todo, plans)):
            path, fmt, dataset, sha, _unit, options, layout = t
            for k, rng in enumerate(rs):
                futures[pool.submit(_pack_range_task, (path, fmt, dataset, sha, options, rng, None, None,
                                                       layout))] = (fi, k)
        for fi, (t, (rs, mine)) in enumerate(zip(todo, plans)):
            if not rs:  # a shard's units of this file are all empty ranges: an entry with no parts
                finished.add(fi)
                record(finish_file(t[0], t[1], t[2], t[3], t[4], heads[fi], [], mine))
        pending = set(futures)
        while pending:
            ready, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in ready:
                fi, k = futures[fut]
                res = fut.result()
                done.setdefault(fi, {})[k] = res
                if bar is not None:
                    bar.update(res["read"])
                rs, mine = plans[fi]
                if len(done[fi]) == len(rs):
                    t = todo[fi]
                    results = [done[fi][j] for j in range(len(rs))]
                    finished.add(fi)
                    entry = finish_file(t[0], t[1], t[2], t[3], t[4], heads[fi], results, mine)
                    record(entry)
                    if bar is not None:
                        bar.set_postfix_str(t[0].name)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        for fut, (fi, k) in futures.items():
            if fi not in finished and fut.done() and not fut.cancelled() and fut.exception() is None:
                discard([fut.result()])
        raise
    pool.shutdown(wait=True)
