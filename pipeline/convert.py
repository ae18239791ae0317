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
from .formats import VALUE_NONE
from .schema import FLAG_PLY_UNKNOWN, FLAG_SCORE_NONE

TARGETS = ("plain", "bullet-text", "bulletformat", "marlinformat")
_COLS = ["board", "score", "result", "ply", "best_move", "flags"]


def rows(dataset: str | Path) -> Iterator[dict]:
    """Every row of a dataset as a dict of the columns in ``_COLS``, in dataset order."""
    d = Path(dataset)
    m = mf.load(d)
    for entry in sorted(m["files"].values(), key=lambda e: e["part"]):
        if not entry["packed"]:
            continue
        pf = pq.ParquetFile(d / entry["part"])
        for rg in range(pf.metadata.num_row_groups):
            t = pf.read_row_group(rg, columns=_COLS).to_pydict()
            for i in range(len(t["board"])):
                yield {**{c: t[c][i] for c in _COLS}, "castling": entry.get("castling")}


def _board(packed: bytes) -> chess.Board:
    fen = unpack_fen(packed)
    b = chess.Board(fen)
    if b.status() & chess.STATUS_BAD_CASTLING_RIGHTS:
        b = chess.Board(fen, chess960=True)
    return b


def _move_uci(board: chess.Board, packed_move: int | None, castling: str | None = None) -> str:
    """UCI of a packed move. Castling (stored king takes rook): king takes rook in Chess960 or
    when the input spelled castling so (``castling``, the manifest's record of the input),
    else the king's two-square step (e1g1)."""
    if packed_move is None:
        return "0000"
    frm, to, promo, flag = packed_move & 63, (packed_move >> 6) & 63, (packed_move >> 12) & 3, packed_move >> 14
    move = chess.Move(frm, to, promotion=promo + chess.KNIGHT if flag == 3 else None)
    if flag == 2 and not board.chess960 and castling != "king-takes-rook":
        move = board._from_chess960(board.chess960, frm, to)  # king takes rook -> e1g1
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


def convert(dataset: str | Path, to: str, out: str | Path) -> dict:
    """Write every row of ``dataset`` to ``out`` in format ``to``. Returns {"rows", "format",
    "path", "ply_unknown"} (rows whose ply was unknown are written with ply 0). Raises
    ValueError for an unknown target, ManifestError for a folder that is not a dataset."""
    if to not in _WRITERS:
        raise ValueError(f"cannot write {to!r}; targets: {', '.join(TARGETS)}")
    write = _WRITERS[to]
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    n = unknown = 0
    with atomic_writer(out) as f:
        for r in rows(dataset):
            f.write(write(r))
            n += 1
            unknown += bool(r["flags"] & FLAG_PLY_UNKNOWN)
    return {"rows": n, "format": to, "path": str(out), "ply_unknown": unknown}
