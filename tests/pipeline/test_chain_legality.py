"""The chained layout's decoder against python-chess: decoded chains are python-chess games (castling,
en passant, promotions, Chess960), a move of the list is played exactly when python-chess calls it
legal, and a chain's castling that python-chess refuses (through, out of or into check, across a
piece) is refused like any illegal move, in one line naming the file, row group and row."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import chess
import numpy as np
import pyarrow as pa
import pytest

from nnue.pipeline import parts
from nnue.pipeline.board import unpack_fen
from nnue.pipeline.compiled import chain
from nnue.pipeline.pack import pack
from tests.samples import CUT, XFEN960, selfplay

# a position (FEN) and two moves to row 2, where the side to move holds a castling right whose
# castling python-chess refuses; the king takes its own rook on ``rook``
CASTLES = {
    "through check": ("4k3/8/8/8/2b5/8/P7/4K2R w K - 0 1", ["a2a3", "e8d7"], chess.H1),
    "out of check": ("4k3/8/3b4/8/8/8/P7/4K2R w K - 0 1", ["a2a3", "d6b4"], chess.H1),
    "across a piece": ("4k3/8/8/8/8/8/P7/4KB1R w K - 0 1", ["a2a3", "e8d7"], chess.H1),
    "into check": ("4k1r1/8/8/8/8/8/P7/4K2R w K - 0 1", ["a2a3", "e8d7"], chess.H1),
    "Chess960, through check": ("3rk3/8/8/8/8/8/P7/1K5R w H - 0 1", ["a2a3", "e8f8"], chess.H1),
    "Chess960, queen side, across a piece": ("4k3/8/8/8/8/8/P7/RN2K3 w A - 0 1", ["a2a3", "e8d8"], chess.A1),
}


def _state(boards: np.ndarray, r: int):
    """The decoder's state of packed board r: bb, pc, side to move, ep, counters, its three words."""
    bb, pc, st = np.zeros(16, np.uint64), np.full(64, -1, np.int8), np.zeros(4, np.int64)
    assert chain.load(boards, r, bb, pc, st)
    occ, lo, hi = (np.uint64(w) for w in boards[r].view(np.uint64)[:3])
    return bb, pc, int(st[0]), int(st[1]), int(st[2]), int(st[3]), occ, lo, hi


def _move(f: int, t: int, promo: int) -> chess.Move:
    """Our (from, to, promo 0 / 1..4 = N B R Q) as python-chess's move (Chess960 mode: castling
    is the king taking its rook)."""
    return chess.Move(f, t, promotion=promo + 1 if promo else None)


def _list(bb, pc, us, ep):
    """Every (from, to, promo) of the move list, in order."""
    out, i = [], 0
    while True:
        ok, f, t, p = chain._index_fast(bb, pc, us, ep, i)
        if not ok:
            return out
        out.append((f, t, p))
        i += 1


def _packed(tmp_path: Path, name: str):
    ds = tmp_path / name.replace(".", "-")
    pack([selfplay(name)], ds, progress=False)
    t = parts.read_part(next(ds.glob("part-*.parquet")), ["board", "best_move"])
    stem = pa.concat_arrays([pf.column("stem").combine_chunks() for pf in
                             [parts.open_part(next(ds.glob("part-*.parquet"))).read(columns=["stem"])]])
    return parts._boards(t.column("board")), t.column("best_move").to_pylist(), parts._valid(stem)


@pytest.mark.parametrize("name", [f"{CUT}.plain", f"{XFEN960}.plain"])
def test_decoded_chains_are_python_chess_games(name, tmp_path):
    """Each row that continues a chain is python-chess's position after the row above's decoded
    move (a legal move there): pieces, side to move, castling rights, legal en-passant square,
    counters; castling, en passant and promotions all occur."""
    boards, best, start = _packed(tmp_path, name)
    seen = {"castling": 0, "en passant": 0, "promotion": 0}
    checked = 0
    for r in range(1, len(boards)):
        if start[r]:
            continue
        board = chess.Board(unpack_fen(bytes(boards[r - 1])), chess960=True)
        b = best[r - 1]
        move = _move(b & 63, (b >> 6) & 63, ((b >> 12) & 3) + 1 if b >> 14 == 3 else 0)
        assert move in board.legal_moves, (r, board.fen(), move)
        seen["castling"] += board.is_castling(move)
        seen["en passant"] += board.is_en_passant(move)
        seen["promotion"] += move.promotion is not None
        board.push(move)
        got = chess.Board(unpack_fen(bytes(boards[r])), chess960=True)
        assert got.epd(en_passant="legal") == board.epd(en_passant="legal"), r
        assert (got.halfmove_clock, got.fullmove_number) == (board.halfmove_clock, board.fullmove_number), r
        checked += 1
    assert checked > 4000 and min(seen.values()) > 0, seen


@pytest.mark.parametrize("name", [f"{CUT}.plain", f"{XFEN960}.plain"])
def test_the_decoder_plays_exactly_the_legal_moves(name, tmp_path):
    """For every entry of the move list of positions of real games, the decoder's step (the one
    the encoder uses too) accepts the move exactly when python-chess calls it legal, and the list
    holds every legal move once."""
    boards, _best, _start = _packed(tmp_path, name)
    rows = list(range(0, len(boards), 29))
    refused = 0
    for r in rows:
        bb, pc, us, ep, half, full, occ, lo, hi = _state(boards, r)
        board = chess.Board(unpack_fen(bytes(boards[r])), chess960=True)
        entries = _list(bb, pc, us, ep)
        legal = set()
        for f, t, p in entries:
            b2, p2 = bb.copy(), pc.copy()
            ok = chain._step(b2, us, ep, half, full, occ, lo, hi, f, t, p)[0]
            assert ok == board.is_legal(_move(f, t, p)), (board.fen(), f, t, p)
            if ok:
                legal.add(_move(f, t, p))
            refused += not ok
        assert legal == set(board.legal_moves) and len(entries) == len(set(entries)), board.fen()
    assert refused > 50  # pins, checks: the list holds pseudo-legal moves the step refuses


@pytest.mark.parametrize("name", [f"{CUT}.plain", f"{XFEN960}.plain"])
def test_the_steps_en_passant_test_equals_the_reference(name, tmp_path):
    """The step's en-passant test, from the bitboards alone (``legal_ep_words``), equals
    chesscore's ``legal_ep`` (python-chess's ``has_legal_en_passant``) for both sides and every
    square of the third and sixth ranks on positions of real games, pins and checks included;
    its legal answers occur."""
    from nnue.pipeline.compiled.chesscore import legal_ep

    boards, _best, _start = _packed(tmp_path, name)
    found = 0
    for r in range(0, len(boards), 7):
        bb, pc, *_ = _state(boards, r)
        for us in (0, 1):
            for ep in range(16, 24) if us == 1 else range(40, 48):
                want = legal_ep(bb, pc, us, ep)
                assert chain.legal_ep_words(bb, us, ep) == want, (r, us, ep)
                found += want >= 0
    assert found > 100


def _plain(path: Path, fen: str, moves: list[str]) -> None:
    """A .plain of four positions: ``fen``, the two positions after ``moves``, and one more after
    a legal move (row 2's own move: a king's or rook's only when there is no other)."""
    board = chess.Board(fen, chess960=True)
    rows = []
    for ply in range(4):
        if ply < 2:
            m = chess.Move.from_uci(moves[ply])
        else:
            m = min(board.legal_moves, key=lambda x: board.piece_type_at(x.from_square) in (chess.KING, chess.ROOK))
        rows.append(f"fen {board.fen()}\nmove {board.uci(m, chess960=False)}\nscore 0\nply {ply}\nresult 0\ne\n")
        board.push(m)
    path.write_text("".join(rows))


def _set_move(part: Path, row: int, index: int) -> None:
    pf = parts.open_part(part)
    t = pf.read_row_group(0)
    col = t.column("move").to_pylist()
    col[row] = index
    t = t.set_column(t.schema.get_field_index("move"), "move", pa.array(col, pa.uint16()))
    with parts.writer(part, pf.schema_arrow) as w:
        w.write_table(t, row_group_size=t.num_rows)


@pytest.mark.parametrize("case", list(CASTLES))
def test_a_chains_castling_that_python_chess_refuses_is_illegal(case, tmp_path):
    """Row 2's move index changed to a castling of the list that python-chess refuses (the king
    through, out of or into check, or across a piece; standard and Chess960): one line naming the
    file, row group 0 and row 2, status 2, like any illegal move (before, only the king's landing
    square was checked)."""
    fen, moves, rook = CASTLES[case]
    src = tmp_path / "in.plain"
    _plain(src, fen, moves)
    ds = tmp_path / "ds"
    pack([src], ds, progress=False)
    part = next(ds.glob("part-*.parquet"))
    assert [v.is_valid for v in parts.open_part(part).read(columns=["stem"]).column("stem")] == \
        [True, False, False, False]  # one chain
    boards = parts._boards(parts.read_part(part, ["board"]).column("board"))
    bb, pc, us, ep, *_ = _state(boards, 2)
    board = chess.Board(unpack_fen(bytes(boards[2])), chess960=True)
    king = board.king(board.turn)
    index = chain.move_index(bb, pc, us, ep, king, rook, 0)
    assert index >= 0 and board.has_castling_rights(board.turn)
    assert not board.is_legal(chess.Move(king, rook))
    _set_move(part, 2, index)
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "inspect", str(ds)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{part}: row group 0, row 2: its move is illegal in its position" in r.stderr
    with pytest.raises(parts.ChainError, match="row group 0, row 2: its move is illegal"):
        parts.read_part(part)
