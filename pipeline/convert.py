"""Write a dataset back out as a dump for other trainers: plain, bullet-text, bulletformat, marlinformat.

Rows are written in dataset order (parts in manifest order). Points of view and units follow
each format's facts (FORMATS.md); scores are written in the dataset's score unit.

* ``plain``: ``fen``/``move``/``score``/``ply``/``result``/``e``; a row with no score is written
  with VALUE_NONE (32002); a row with no recorded move gets ``move 0000``; castling is written
  e1g1-style in standard chess and king-takes-rook in Chess960, as Stockfish does, and
  king-takes-rook wherever the input spelled it so (the manifest's ``castling`` of its input), so
  a Chess960 ``.plain`` round trips to the same text.
* ``bullet-text``: ``FEN | score | result``, white POV, result 1.0/0.5/0.0.
* ``bulletformat``: 32-byte records seen from the side to move (flipped when black is to move,
  bit 3 = opponent), score and result (0/1/2) stm POV, own king, opponent king ^ 56.
* ``marlinformat``: the board column as it is, eval white POV (VALUE_NONE when no score).

The output is written to a temporary file and renamed when complete.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Iterator

import chess
import pyarrow.parquet as pq

from . import manifest as mf
from .atomic import atomic_writer
from .board import unpack, unpack_fen
from .chessrules import decode_move, read_board
from .constants import VALUE_NONE
from .schema import FLAG_PLY_UNKNOWN, FLAG_SCORE_NONE

TARGETS = ("plain", "bullet-text", "bulletformat", "marlinformat")
_COLS = ["board", "score", "result", "ply", "best_move", "flags"]


def rows(dataset: str | Path) -> Iterator[dict]:
    """Every row of a dataset as a dict of the columns in ``_COLS``, in dataset order."""
    d = Path(dataset)
    for table, entry in _row_groups(d):
        t = table.to_pydict()
        for i in range(len(t["board"])):
            yield {**{c: t[c][i] for c in _COLS}, "castling": entry.get("castling")}


def _board(packed: bytes) -> chess.Board:
    return read_board(unpack_fen(packed))


def _move_uci(board: chess.Board, packed_move: int | None, castling: str | None = None) -> str:
    """UCI of a packed move. Castling (stored king takes rook): king takes rook in Chess960 or
    when the input spelled castling so (``castling``, the manifest's record of the input),
    else the king's two-square step (e1g1)."""
    if packed_move is None:
        return "0000"
    move = decode_move(packed_move)
    if packed_move >> 14 == 2 and not board.chess960 and castling != "king-takes-rook":
        move = board._from_chess960(board.chess960, move.from_square, move.to_square)  # king takes rook -> e1g1
    return move.uci()


def _plain(r: dict) -> bytes:
    b = _board(r["board"])
    score = VALUE_NONE if r["flags"] & FLAG_SCORE_NONE else r["score"]
    return (f"fen {b.fen()}\nmove {_move_uci(b, r['best_move'], r.get('castling'))}\nscore {score}\n"
            f"ply {r['ply']}\nresult {r['result']}\ne\n").encode()


def _bullet_text(r: dict) -> bytes:
    d = unpack(r["board"])
    sign = -1 if d["black_to_move"] else 1
    score = VALUE_NONE if r["flags"] & FLAG_SCORE_NONE else r["score"] * sign
    result = {1: "1.0", 0: "0.5", -1: "0.0"}[r["result"] * sign]
    return f"{_board(r['board']).fen()} | {score} | {result}\n".encode()


_BF_TAIL = struct.Struct("<hBBB3x")


def _bulletformat(r: dict) -> bytes:
    d = unpack(r["board"])
    black = d["black_to_move"]
    pieces = {}
    kings = {}
    for sq, code in d["pieces"].items():
        own = (code >> 3) == (1 if black else 0)
        rel = sq ^ 56 if black else sq
        pieces[rel] = (code & 7) | (0 if own else 8)
        if code & 7 == 5:
            kings[own] = rel
    occ = 0
    nib = bytearray(16)
    for i, sq in enumerate(sorted(pieces)):
        occ |= 1 << sq
        nib[i >> 1] |= pieces[sq] << (4 * (i & 1))
    score = VALUE_NONE if r["flags"] & FLAG_SCORE_NONE else r["score"]
    return occ.to_bytes(8, "little") + bytes(nib) + _BF_TAIL.pack(score, r["result"] + 1, kings[True],
                                                                   kings[False] ^ 56)


def _marlinformat(r: dict) -> bytes:
    b = bytearray(r["board"])
    if r["flags"] & FLAG_SCORE_NONE:
        b[28:30] = struct.pack("<h", VALUE_NONE)
    return bytes(b)


_WRITERS = {"plain": _plain, "bullet-text": _bullet_text, "bulletformat": _bulletformat,
            "marlinformat": _marlinformat}


def _row_groups(dataset: Path):
    """(arrow table of ``_COLS``, manifest entry) per row group, in dataset order."""
    m = mf.load(dataset)
    for entry in sorted(m["files"].values(), key=mf.entry_key):
        if not entry["packed"]:
            continue
        for name in mf.entry_parts(entry):
            pf = pq.ParquetFile(dataset / name)
            for rg in range(pf.metadata.num_row_groups):
                yield pf.read_row_group(rg, columns=_COLS), entry


def _compiled_chunk(table, entry: dict, to: str) -> tuple[bytes | memoryview, int]:
    """One row group in format ``to`` through :mod:`.compiled.dump` (rows the kernels leave to
    python-chess are written by the python writers, in place). Returns (bytes, fallback rows)."""
    import numpy as np

    from .board import boards_from_bytes
    from .compiled import dump

    n = table.num_rows
    boards = np.ascontiguousarray(boards_from_bytes(table.column("board")))
    score = table.column("score").to_numpy().astype(np.int64)
    result = table.column("result").to_numpy().astype(np.int64)
    none = (table.column("flags").to_numpy() & FLAG_SCORE_NONE) != 0
    if to == "marlinformat":
        out = boards.copy()
        out[none, 28] = VALUE_NONE & 255
        out[none, 29] = VALUE_NONE >> 8
        return out.tobytes(), 0
    if to == "bulletformat":
        out = np.zeros((n, 32), np.uint8)
        dump.write_bulletformat(boards, score, result, none, out)
        return out.tobytes(), 0
    out = np.empty(dump.ROW_BYTES * n, np.uint8)
    ends = np.zeros(n, np.int64)
    fallback = np.zeros(n, np.uint8)
    if to == "plain":
        best = table.column("best_move").fill_null(0xFFFF).to_numpy().astype(np.int64)
        best[table.column("best_move").is_null().to_numpy(zero_copy_only=False)] = -1
        ply = table.column("ply").to_numpy().astype(np.int64)
        nfb = dump.write_plain(boards, score, result, ply, best, none,
                               entry.get("castling") == "king-takes-rook", out, ends, fallback)
    else:
        nfb = dump.write_bullet_text(boards, score, result, none, out, ends, fallback)
    if not nfb:
        return memoryview(out)[:int(ends[-1]) if n else 0], 0
    write = _WRITERS[to]
    cols = table.to_pydict()
    pieces, start = [], 0
    for i in np.flatnonzero(fallback):
        pieces.append(out[start:ends[i]].tobytes())
        pieces.append(write({**{c: cols[c][i] for c in _COLS}, "castling": entry.get("castling")}))
        start = ends[i]
    pieces.append(out[start:ends[-1]].tobytes())
    return b"".join(pieces), nfb


def convert(dataset: str | Path, to: str, out: str | Path, progress: bool = False, fast: bool = True) -> dict:
    """Write every row of ``dataset`` to ``out`` in format ``to``, in dataset order.

    fast: row groups go through the compiled writers (:mod:`nnue.pipeline.compiled.dump`), which
    hand the rows they do not settle exactly (castling rights python-chess reads as Chess960) to
    the python-chess writers; False: every row through the python-chess writers (the test
    oracle; the output is identical, tested). progress: a tqdm bar on stderr (positions, rate,
    ETA; none when stderr is not a terminal).

    Returns {"rows", "format", "path", "ply_unknown", "python_chess_rows"} (rows whose ply was
    unknown are written with ply 0; ``python_chess_rows``: rows written by the python-chess
    writers). Raises ValueError for an unknown target, ManifestError for a folder that is not a
    dataset.
    """
    if to not in _WRITERS:
        raise ValueError(f"cannot write {to!r}; targets: {', '.join(TARGETS)}")
    dataset = Path(dataset)
    write = _WRITERS[to]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    bar = None
    if progress:
        import sys

        from tqdm import tqdm

        total = sum(e["packed"] for e in mf.load(dataset)["files"].values())
        bar = tqdm(total=total, unit=" pos", unit_scale=True, file=sys.stderr, desc=f"convert to {to}",
                   dynamic_ncols=True, disable=None)
    n = unknown = slow = 0
    try:
        with atomic_writer(out) as f:
            for table, entry in _row_groups(dataset):
                rows_here = table.num_rows
                unknown += int(((table.column("flags").to_numpy() & FLAG_PLY_UNKNOWN) != 0).sum())
                if fast:
                    data, nfb = _compiled_chunk(table, entry, to)
                    f.write(data)
                    slow += nfb
                else:
                    cols = table.to_pydict()
                    castling = entry.get("castling")
                    for i in range(rows_here):
                        f.write(write({**{c: cols[c][i] for c in _COLS}, "castling": castling}))
                    slow += rows_here
                n += rows_here
                if bar is not None:
                    bar.update(rows_here)
    finally:
        if bar is not None:
            bar.close()
    return {"rows": n, "format": to, "path": str(out), "ply_unknown": unknown, "python_chess_rows": slow}
