"""Issue 20 item 5: one FEN grammar. Every text format (.plain, bullet text, EPD, a PGN's FEN tag)
and ``nnue eval`` accept and reject the same FENs, on one shared table, on both reader paths;
the ply of an accepted FEN is the same everywhere (a full-move number 0 reads as 1, as
python-chess reads it: it was "ply out of range -2" from bullet text and EPD)."""
from __future__ import annotations

import chess
import pytest

from nnue.pipeline.formats import ReaderOptions
from nnue.pipeline.pack import pack
from nnue.pipeline.positions import PositionError, parse_position
from nnue.pipeline.parts import read_part

START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR"
KK = "4k3/8/8/8/8/8/8/4K3"
# (FEN with its six fields, accepted?)
FENS = [
    (f"{START} w KQkq - 0 1", True),
    (f"{START} w KQkq - 0 0", True),          # full-move 0 (several tools write it): read as 1
    (f"{START} b KQkq - 0 0", True),
    (f"{START} w KQkq - 3 17", True),
    (f"{START} b KQkq - 99 200", True),
    (f"{KK} w - - 0 1", True),
    (f"{KK} b - - 12 40", True),
    ("r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1", True),
    ("rnbqkbnr/ppp1pppp/8/3pP3/8/8/PPPP1PPP/RNBQKBNR w KQkq d6 0 3", True),
    (f"{START} w - e3 0 1", True),               # an en-passant square no pawn can use: dropped
    ("4k3/8/8/8/8/8/8/4K2R w Kkq - 0 1", False),  # castling rights without their rooks
    (f"{KK} w - - 0 -1", False),                 # negative full-move number
    (f"{KK} w - - -1 1", False),                 # negative half-move clock
    ("4k3/8/8/8/8/8/8/4KK2 w - - 0 1", False),   # two white kings
    ("4k3/8/8/8/8/8/8/8 w - - 0 1", False),      # no white king
    ("4k2P/8/8/8/8/8/8/4K3 w - - 0 1", False),   # a pawn on the last rank
    ("4k3/8/8/8/8/8/8/4K2r b - - 0 1", False),   # the side not to move in check
    ("4k3/8/8/8/8/8/8/4K3/8 w - - 0 1", False),  # nine ranks
    ("4k3/8/8/8/8/8/8/4K3 x - - 0 1", False),    # no side to move
]


def _move(fen: str) -> chess.Move:
    return next(iter(chess.Board(fen).legal_moves))


def _text(fmt: str, fen: str) -> str:
    if fmt == "plain":
        return f"fen {fen}\nmove {_move(fen).uci() if _ok(fen) else 'e2e4'}\nscore 10\nply 0\nresult 0\ne\n"
    if fmt == "bullet-text":
        return f"{fen} | 10 | 0.5\n"
    if fmt == "epd":
        return f"{fen} [0.5] 10\n"
    san = chess.Board(fen).san(_move(fen)) if _ok(fen) else "e4"
    return f'[Event "t"]\n[FEN "{fen}"]\n[SetUp "1"]\n[Result "1/2-1/2"]\n\n{san} 1/2-1/2\n\n'


def _ok(fen: str) -> bool:
    try:
        return chess.Board(fen).is_valid() and any(chess.Board(fen).legal_moves)
    except ValueError:
        return False


EXT = {"plain": "plain", "bullet-text": "txt", "epd": "epd", "pgn": "pgn"}


@pytest.mark.parametrize("fast", [True, False], ids=["compiled", "python-chess"])
@pytest.mark.parametrize("fmt", list(EXT))
def test_every_text_format_reads_the_fen_table_alike(tmp_path, fmt, fast):
    for i, (fen, ok) in enumerate(FENS):
        src = tmp_path / f"{i}.{EXT[fmt]}"
        src.write_text(_text(fmt, fen))
        ds = tmp_path / f"ds{i}"
        try:
            s = pack([src], ds, fmt=fmt, options=ReaderOptions(fast=fast), progress=False)
        except Exception as e:  # noqa: BLE001 - a refusal of the whole file counts as a reject here
            s = {"packed": 0, "rejected": {type(e).__name__: 1}}
        assert (s["packed"] == 1) == ok, (fmt, fen, s)
        if ok:
            (part,) = ds.glob("part-*.parquet")
            ply = read_part(part).column("ply").to_pylist()[0]
            board = chess.Board(fen)
            want = board.ply() if fmt != "plain" else 0  # .plain's ply is its own field
            assert ply == want, (fmt, fen, ply, want)


def test_nnue_eval_reads_the_fen_table_alike():
    for fen, ok in FENS:
        try:
            parse_position(fen)
            got = True
        except PositionError:
            got = False
        assert got == ok, fen
