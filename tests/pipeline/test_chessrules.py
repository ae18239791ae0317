"""The pipeline's chess rules (nnue.pipeline.chessrules): the packed move round-trips every legal
move, FENs are read as standard chess or Chess960 as pack reads them, and the self-play book
reader refuses what pack rejects, with pack's reason."""
from __future__ import annotations

import chess
import pytest

from nnue.pipeline.chessrules import RecordError, check_board, decode_move, encode_move, read_board

POSITIONS = [
    chess.STARTING_FEN,
    "r3k2r/pppq1ppp/2n2n2/3pp3/1b1PP1b1/2N2N2/PPPQ1PPP/R3K2R w KQkq d6 0 9",  # castling both ways, en passant
    "8/1P4k1/8/8/8/8/5p2/4K3 w - - 0 1",                                     # promotions
    "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 2",                                     # en passant capture
]
CHESS960 = "bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w GEge - 0 1"


@pytest.mark.parametrize("fen", POSITIONS + [CHESS960])
def test_move_round_trip(fen):
    """decode_move(encode_move(m)) is m for every legal move (castling as king takes rook, the
    stored spelling), and the flag bits say castling / en passant / promotion."""
    board = read_board(fen)
    seen = set()
    for move in board.legal_moves:
        m = encode_move(board, move)
        assert 0 <= m < 1 << 16
        back = decode_move(m)
        flag = m >> 14
        if board.is_castling(move):
            assert flag == 2 and back == board._to_chess960(move)
        else:
            assert back == move
            assert flag == (3 if move.promotion else 1 if board.is_en_passant(move) else 0)
        seen.add(m)
    assert len(seen) == board.legal_moves.count() > 0


def test_read_board_chess960():
    """X-FEN/Shredder-FEN castling rights that only make sense in Chess960 give a Chess960 board;
    standard FENs stay standard; a malformed FEN raises ValueError."""
    assert read_board(CHESS960).chess960
    assert not read_board(chess.STARTING_FEN).chess960
    assert read_board(chess.STARTING_FEN, chess960=True).chess960
    with pytest.raises(ValueError):
        read_board("not a fen")


@pytest.mark.parametrize("fen, reason", [
    ("4k3/8/8/8/8/8/8/4K2K w - - 0 1", "a side does not have exactly one king"),
    ("P3k3/8/8/8/8/8/8/4K3 w - - 0 1", "pawn on first or last rank"),
    ("4k3/8/8/8/8/8/8/4KR2 w - - 0 1", None),
    ("4k3/4R3/8/8/8/8/8/4K3 w - - 0 1", "side not to move is in check"),
])
def test_check_board_reasons(fen, reason):
    board = read_board(fen)
    if reason is None:
        check_board(board, fen)
        return
    with pytest.raises(RecordError) as e:
        check_board(board, fen)
    assert e.value.reason == reason


def test_check_board_normalises_en_passant():
    """An en-passant square with no legal en-passant capture is dropped, not rejected."""
    board = read_board("4k3/8/8/8/3P4/8/8/4K3 b - d3 0 1")
    check_board(board)
    assert board.ep_square is None


def test_book_reader_uses_pack_rules(tmp_path):
    """selfplay's opening book refuses a position pack rejects, naming pack's reason, and reads a
    Chess960 X-FEN line as Chess960."""
    from nnue.selfplay.play import read_openings

    bad = tmp_path / "bad.epd"
    bad.write_text("# a comment\n4k3/4R3/8/8/8/8/8/4K3 w - -\n")
    with pytest.raises(ValueError, match="line 2: illegal position .*side not to move is in check"):
        read_openings(bad)
    good = tmp_path / "good.epd"
    good.write_text(f"{CHESS960}\n")
    assert read_openings(good) == [read_board(CHESS960).fen()]
