"""Edge cases named by the ingest issue, each its own test."""
from __future__ import annotations

import json

import chess

from nnue.pipeline import manifest as mf
from nnue.pipeline.board import unpack_fen
from nnue.pipeline.formats.binpack import decode_stem
from nnue.pipeline.pack import pack
from nnue.pipeline.parts import read_part


def _pack_plain(tmp_path, records: list[tuple[str, str, int, int, int]]):
    text = "".join(f"fen {f}\nmove {m}\nscore {s}\nply {p}\nresult {r}\ne\n" for f, m, s, p, r in records)
    src = tmp_path / "edge.plain"
    src.write_text(text)
    s = pack([src], tmp_path / "ds", progress=False)
    entry = next(iter(mf.load(tmp_path / "ds")["files"].values()))
    table = read_part(tmp_path / "ds" / entry["part"]) if entry["packed"] else None
    rejects = [json.loads(x) for x in (tmp_path / "ds" / entry["rejects"]).read_text().splitlines()]
    return s, table, rejects


def test_rook_move_onto_the_en_passant_square_is_an_ordinary_move(tmp_path):
    # white just played e2e4 (ep target e3); the black rook a3 moves to e3: legal, not en passant
    fen = "4k3/8/8/8/4P3/r7/8/4K3 b - e3 0 1"
    s, t, rejects = _pack_plain(tmp_path, [(fen, "a3e3", 10, 1, 0)])
    assert s["packed"] == 1 and not rejects
    move = t["best_move"][0].as_py()
    assert move & 63 == chess.A3 and (move >> 6) & 63 == chess.E3 and move >> 14 == 0  # no ep flag
    assert t["best_move_is_capture"][0].as_py() is False
    # no black pawn can take on e3, so the (illegal) ep square is normalised away
    assert unpack_fen(t["board"][0].as_py()).split()[3] == "-"


def test_pawn_en_passant_capture_is_flagged_and_a_capture(tmp_path):
    fen = "4k3/8/8/8/3pP3/8/8/4K3 b - e3 0 1"
    s, t, _ = _pack_plain(tmp_path, [(fen, "d4e3", 10, 1, 0)])
    move = t["best_move"][0].as_py()
    assert move >> 14 == 1 and t["best_move_is_capture"][0].as_py() is True
    assert unpack_fen(t["board"][0].as_py()).split()[3] == "e3"  # legal ep kept


def test_binpack_fullmove_is_ply_over_two_plus_one():
    stem = bytearray(32)
    board = chess.Board("4k3/8/8/8/8/8/8/4K3 b - - 3 1")
    occ = board.occupied
    stem[:8] = occ.to_bytes(8, "big")
    codes = []
    for sq in chess.scan_forward(occ):
        p = board.piece_at(sq)
        code = 2 * (p.piece_type - 1) + (p.color == chess.BLACK)
        codes.append(15 if p.piece_type == chess.KING and p.color == chess.BLACK else code)  # black to move
    for i, c in enumerate(codes):
        stem[8 + i // 2] |= c << (4 * (i % 2))
    for ply in (0, 1, 68, 69, 401):
        stem[28:30] = ply.to_bytes(2, "big")
        b, _move, _score, got_ply, result = decode_stem(bytes(stem))
        assert got_ply == ply and b.fullmove_number == ply // 2 + 1 and result == 0
        assert b.turn == chess.BLACK
