"""Packed board codec (marlinformat PackedBoard): FEN round trips against python-chess, en-passant
normalisation, Chess960 castling rights, and rejection of malformed input."""
from __future__ import annotations

import struct
from pathlib import Path

import chess
import pytest

from nnue.pipeline.board import (NO_EP, PACKED_SIZE, pack_board, pack_fen, pack_position, unpack,
                                 unpack_fen)

from tests.samples import SAMPLE, selfplay


def plain_fens(path: Path, limit: int | None = None) -> list[str]:
    out = []
    with open(path) as f:
        for line in f:
            if line.startswith("fen "):
                out.append(line[4:].strip())
                if limit is not None and len(out) >= limit:
                    break
    return out


# ------------------------------------------------------------------------ round trips on real data
@pytest.mark.parametrize("path,chess960,limit,min_count", [
    (lambda: selfplay("sf15-960-xfen-s2.plain"), True, None, 4586),  # every position of the Chess960 set
    (lambda: SAMPLE, False, 3000, 3000),  # a few thousand of the bundled sample
], ids=["960-xfen-all", "sample-3000"])
def test_fen_round_trip_matches_python_chess(path, chess960, limit, min_count):
    fens = plain_fens(path(), limit)
    assert len(fens) == min_count
    mismatches = []
    for fen in fens:
        board = chess.Board(fen, chess960=chess960)
        want = board.fen()
        packed = pack_fen(fen)
        assert len(packed) == PACKED_SIZE
        got = unpack_fen(packed)
        if got != want:
            mismatches.append((fen, got, want))
        # the validated-board path must agree byte for byte with the FEN path
        if pack_board(board) != pack_fen(want):
            mismatches.append((fen, "pack_board != pack_fen", want))
        # and what comes back must describe the same position to python-chess
        back = chess.Board(got, chess960=chess960)
        if back.clean_castling_rights() != board.clean_castling_rights() or back.ep_square != (
                board.ep_square if board.has_legal_en_passant() else None):
            mismatches.append((fen, got, "castling/ep differ"))
    assert not mismatches, mismatches[:5]


def test_960_set_really_exercises_castling_and_ep():
    """Guard that the data-driven test above is not vacuous."""
    fens = plain_fens(selfplay("sf15-960-xfen-s2.plain"))
    with_rights = [f for f in fens if f.split()[2] != "-"]
    non_standard = [f for f in with_rights
                    if chess.Board(f, chess960=True).clean_castling_rights()
                    & ~(chess.BB_A1 | chess.BB_H1 | chess.BB_A8 | chess.BB_H8)]
    assert len(with_rights) > 1000
    assert len(non_standard) > 100
    assert any(f.split()[3] != "-" for f in fens)


# ----------------------------------------------------------------------------------- en passant
def _after(fen: str, uci: str) -> chess.Board:
    b = chess.Board(fen)
    b.push_uci(uci)
    return b


def test_ep_not_written_without_adjacent_enemy_pawn():
    b = _after("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1", "e2e4")
    assert b.ep_square == chess.E3  # python-chess remembers every double push
    d = unpack(pack_board(b))
    assert d["ep_square"] is None
    assert pack_board(b)[24] == 0x80 | NO_EP
    assert unpack_fen(pack_board(b)) == "4k3/8/8/8/4P3/8/8/4K3 b - - 0 1"


def test_ep_written_when_capture_is_legal():
    b = _after("4k3/8/8/8/3p4/8/4P3/4K3 w - - 0 1", "e2e4")
    packed = pack_board(b)
    assert unpack(packed)["ep_square"] == chess.E3
    assert packed[24] == 0x80 | chess.E3
    assert unpack_fen(packed) == "4k3/8/8/8/3pP3/8/8/4K3 b - e3 0 1"
    assert packed == pack_fen(b.fen())
    assert chess.Board(unpack_fen(packed)).has_legal_en_passant()


def test_ep_written_for_white_capturer():
    b = _after("4k3/3p4/8/4P3/8/8/8/4K3 b - - 0 1", "d7d5")
    packed = pack_board(b)
    assert unpack(packed)["ep_square"] == chess.D6
    assert packed[24] == chess.D6  # white to move: bit 7 clear
    assert unpack_fen(packed) == "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2"


@pytest.mark.parametrize("fen", [
    # horizontal pin: dxe3 e.p. clears both pawns from rank 4 and exposes the a4 king to the h4 rook
    "8/8/8/8/k2p3R/8/4P3/4K3 w - - 0 1",
    # diagonal pin: the d4 pawn is pinned to the e5 king by the b2 bishop
    "8/8/8/4k3/3p4/8/1B2P3/4K3 w - - 0 1",
], ids=["horizontal-pin", "diagonal-pin"])
def test_ep_not_written_when_capturing_pawn_is_pinned(fen):
    b = _after(fen, "e2e4")
    assert b.ep_square == chess.E3
    assert any(b.is_en_passant(m) for m in b.generate_pseudo_legal_moves())  # pseudo-legal only
    assert not b.has_legal_en_passant()
    packed = pack_board(b)
    assert unpack(packed)["ep_square"] is None
    assert unpack_fen(packed) == b.fen()
    assert unpack_fen(packed).split()[3] == "-"


# ------------------------------------------------------------------------------------- castling
def test_standard_castling_rooks_use_code_6():
    b = chess.Board("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1")
    packed = pack_board(b)
    d = unpack(packed)
    assert d["castling_rooks"] == chess.BB_A1 | chess.BB_H1 | chess.BB_A8 | chess.BB_H8
    # nibbles in ascending square order: a1 R*, e1 K, h1 R*, a8 r*, e8 k, h8 r*
    nib = packed[8:24]
    codes = [(nib[i >> 1] >> (4 * (i & 1))) & 15 for i in range(6)]
    assert codes == [6, 5, 6, 14, 13, 14]
    assert unpack_fen(packed) == b.fen()
    # rights dropped on one side only
    b2 = chess.Board("r3k2r/8/8/8/8/8/8/R3K2R w Kq - 0 1")
    assert unpack(pack_board(b2))["castling_rooks"] == chess.BB_H1 | chess.BB_A8
    assert unpack_fen(pack_board(b2)) == b2.fen()


@pytest.mark.parametrize("fen,rooks,castling", [
    # outer rook carries the right: X-FEN letter
    ("rr3k2/8/8/8/8/8/8/RR3K2 w Qq - 0 1", chess.BB_A1 | chess.BB_A8, "Qq"),
    # inner rook carries the right, outer one does not: Shredder file letter
    ("rr3k2/8/8/8/8/8/8/RR3K2 w Bb - 0 1", chess.BB_B1 | chess.BB_B8, "Bb"),
    # both rooks on one side, both with rights (as after a rook reached the outer file in 960)
    ("1k3rr1/8/8/8/8/8/8/1K3RR1 w Ff - 0 1", chess.BB_F1 | chess.BB_F8, "Ff"),
    ("1k3rr1/8/8/8/8/8/8/1K3RR1 w Gf - 0 1", chess.BB_G1 | chess.BB_F8, "Kf"),
    # a 960 start position: king b1, rooks a1 and d1
    ("rkr5/8/8/8/8/8/8/RKR5 w KQkq - 0 1", chess.BB_A1 | chess.BB_C1 | chess.BB_A8 | chess.BB_C8,
     "KQkq"),
    # king between an inner and an outer rook on the king side
    ("4k3/8/8/8/8/8/8/1RK2R1R w FB - 0 1", chess.BB_B1 | chess.BB_F1, "FQ"),
], ids=["outer-Q", "inner-B", "inner-F", "outer-G-is-K", "960-start", "mixed"])
def test_chess960_castling_rights_survive(fen, rooks, castling):
    board = chess.Board(fen, chess960=True)
    assert board.clean_castling_rights() == rooks  # the test's premise
    packed = pack_board(board)
    assert unpack(packed)["castling_rooks"] == rooks
    out = unpack_fen(packed)
    assert out.split()[2] == castling
    assert out == board.fen()
    assert pack_fen(board.fen()) == packed
    assert pack_fen(board.fen(shredder=True)) == packed  # Shredder-FEN input too
    assert chess.Board(out, chess960=True).clean_castling_rights() == rooks


# ------------------------------------------------------------------------------- other fields
def test_counters_side_eval_and_wdl():
    fen = "4k3/8/8/8/8/8/8/4K3 b - - 37 112"
    packed = pack_fen(fen, eval_white=-1234, wdl=2)
    occ, _nib, stm_ep, half, full, ev, wdl, extra = struct.unpack("<Q16sBBHhBB", packed)
    assert occ == chess.BB_E1 | chess.BB_E8
    assert stm_ep == 0x80 | 64 and half == 37 and full == 112
    assert ev == -1234 and wdl == 2 and extra == 0
    d = unpack(packed)
    assert d["black_to_move"] and d["eval_white"] == -1234 and d["wdl"] == 2
    assert unpack_fen(packed) == fen


def test_four_field_fen_defaults_counters():
    assert unpack_fen(pack_fen("4k3/8/8/8/8/8/8/4K3 w - -")) == "4k3/8/8/8/8/8/8/4K3 w - - 0 1"


def test_thirty_two_pieces_fit():
    b = chess.Board()
    assert unpack_fen(pack_board(b)) == chess.STARTING_FEN


# --------------------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize("fen", [
    "",
    "rnbqkbnr",
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP w KQkq - 0 1",  # 7 ranks
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR/8 w KQkq - 0 1",  # 9 ranks
    "rnbqkbnr/pppppppp/9/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",  # 9 files
    "rnbqkbnr/ppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",  # 7 files
    "rnbqkbnrp/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",  # piece past the h-file
    "rnbqkbnr/ppppxppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",  # bad piece letter
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR x KQkq - 0 1",  # bad side to move
    "4k3/8/8/8/8/8/8/4K3 w K - 0 1",  # castling right without a rook
    "4k3/8/8/8/8/8/8/4K3 w A - 0 1",  # Shredder letter on an empty file
    "r3k2r/8/8/8/8/8/8/R3K2R w KQZq - 0 1",  # bad castling letter
    "4k3/8/8/8/8/8/8/4K3 w - e9 0 1",  # bad en-passant square
    "4k3/8/8/8/8/8/8/4K3 w - z3 0 1",
    "4k3/8/8/8/8/8/8/4K3 w - - x 1",  # non-numeric counters
    "4k3/8/8/8/8/8/8/4K3 w - - 0 y",
    "PPPPPPPP/PPPPPPPP/PPPPPPPP/PPPPPPPP/PPPPPPPP/8/8/8 w - - 0 1",  # 40 pieces do not fit
])
def test_bad_fen_raises_value_error(fen):
    with pytest.raises(ValueError):
        pack_fen(fen)


def test_pack_position_rejects_bad_fields():
    with pytest.raises(ValueError):
        pack_fen(chess.STARTING_FEN, eval_white=40000)
    with pytest.raises(ValueError):
        pack_fen(chess.STARTING_FEN, eval_white=-40000)
    with pytest.raises(ValueError):  # castling flag on a square that holds a king, not a rook
        pack_position({chess.E1: 5, chess.E8: 13}, False, castling_rooks=chess.BB_E1)
    assert unpack(pack_fen(chess.STARTING_FEN, eval_white=-32768))["eval_white"] == -32768


@pytest.mark.parametrize("kw", [dict(ep_square=200), dict(wdl=7)], ids=["ep200", "wdl7"])
def test_pack_position_rejects_out_of_range_ep_and_wdl(kw):
    with pytest.raises(ValueError):
        pack_position({chess.E1: 5, chess.E8: 13}, False, **kw)


@pytest.mark.parametrize("n", [0, 31, 33, 64])
def test_unpack_rejects_wrong_length(n):
    with pytest.raises(ValueError):
        unpack(bytes(n))
    with pytest.raises(ValueError):
        unpack_fen(bytes(n))


def _with_code(code: int) -> bytes:
    """Two-king board whose second piece (e8) gets nibble ``code``."""
    packed = bytearray(pack_fen("4k3/8/8/8/8/8/8/4K3 w - - 0 1"))
    packed[8] = (packed[8] & 0x0F) | (code << 4)
    return bytes(packed)


@pytest.mark.parametrize("code", [7, 15])
def test_unpack_rejects_bad_piece_codes(code):
    with pytest.raises(ValueError):
        unpack(_with_code(code))
    with pytest.raises(ValueError):
        unpack_fen(_with_code(code))


def test_unpack_accepts_every_valid_piece_code():
    for code in (0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13):
        assert unpack(_with_code(code))["pieces"][chess.E8] == code
    d = unpack(_with_code(14))  # black rook with a castling right
    assert d["pieces"][chess.E8] == 11 and d["castling_rooks"] == chess.BB_E8


@pytest.mark.parametrize("stm_ep", [65, 100, 127, 0x80 | 65, 0xFF])
def test_unpack_rejects_bad_ep_byte(stm_ep):
    packed = bytearray(pack_fen("4k3/8/8/8/8/8/8/4K3 w - - 0 1"))
    packed[24] = stm_ep
    with pytest.raises(ValueError):
        unpack(bytes(packed))


def test_unpack_rejects_occupancy_with_more_than_32_squares():
    packed = bytearray(pack_fen(chess.STARTING_FEN))
    packed[0:8] = struct.pack("<Q", (1 << 33) - 1)  # 33 occupied squares
    with pytest.raises(ValueError):
        unpack(bytes(packed))
