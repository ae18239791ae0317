"""Issue 15 item 3: a double check no last move can produce is rejected ("impossible check"), in
the python-chess path and the bulk path alike. The oracle is an independent enumeration with
python-chess's own move generator: for a position P, try every position P' one piece placement
away (a piece of the side that moved put back on any empty square, as itself or as a pawn, with
or without a piece of the other side restored on its square, en passant too), and ask whether a
legal move of P' gives P."""
from __future__ import annotations

import random

import chess
import pytest

from nnue.pipeline.pack import RecordError, validate
from nnue.pipeline.formats import Record
from nnue.pipeline.retro import double_check_possible


def forward_possible(p: chess.Board) -> bool:
    """Brute force: is there a P' (see module docstring) with a legal move that gives P?"""
    them = not p.turn
    target = p.board_fen()
    for t in chess.scan_forward(p.occupied_co[them]):
        piece = p.piece_at(t)
        types = {piece.piece_type, chess.PAWN} if piece.piece_type != chess.KING else {chess.KING}
        for f in chess.SQUARES:
            if p.piece_at(f) is not None:
                continue
            for was in types:
                for restored in (None, chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN):
                    for ep_victim in ([None] if restored else [None, t - 8 if them == chess.WHITE else t + 8]):
                        q = p.copy(stack=False)
                        q.remove_piece_at(t)
                        if was == chess.PAWN and chess.square_rank(f) in (0, 7):
                            continue
                        q.set_piece_at(f, chess.Piece(was, them))
                        if restored:
                            if restored == chess.PAWN and chess.square_rank(t) in (0, 7):
                                continue
                            q.set_piece_at(t, chess.Piece(restored, p.turn))
                        if ep_victim is not None:
                            if not 0 <= ep_victim < 64 or q.piece_at(ep_victim) is not None:
                                continue
                            q.set_piece_at(ep_victim, chess.Piece(chess.PAWN, p.turn))
                            q.ep_square = t
                        q.turn = them
                        q.castling_rights = 0
                        if q.is_attacked_by(them, q.king(p.turn)) if q.king(p.turn) is not None else True:
                            continue
                        for m in q.generate_legal_moves(chess.BB_SQUARES[f], chess.BB_SQUARES[t]):
                            q.push(m)
                            if q.board_fen() == target:
                                return True
                            q.pop()
    return False


def _random_double_checks(rng, n, wanted_possible=None):
    """Random positions with exactly two checkers that pass python-chess's status()."""
    out = []
    while len(out) < n:
        b = chess.Board(None)
        b.set_piece_at(rng.randrange(64), chess.Piece(chess.KING, chess.BLACK))
        k = b.king(chess.BLACK)
        while True:
            sq = rng.randrange(64)
            if b.piece_at(sq) is None and chess.square_distance(sq, k) > 1:
                b.set_piece_at(sq, chess.Piece(chess.KING, chess.WHITE))
                break
        for _ in range(rng.randint(2, 6)):
            sq = rng.randrange(64)
            if b.piece_at(sq) is None:
                color = rng.random() < 0.75
                pt = rng.choice([chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN])
                if pt == chess.PAWN and chess.square_rank(sq) in (0, 7):
                    continue
                b.set_piece_at(sq, chess.Piece(pt, color))
        b.turn = chess.BLACK
        wk = b.king(chess.WHITE)
        if chess.square_rank(wk) == 0 and chess.square_file(wk) in (2, 6):
            continue  # castling un-moves are out of scope (accepted by design)
        if chess.popcount(b.checkers_mask()) == 2 and not b.status():
            out.append(b)
    return out


def test_retro_agrees_with_forward_enumeration_on_random_double_checks():
    rng = random.Random(11)
    boards = _random_double_checks(rng, 120)
    got = [(double_check_possible(b), forward_possible(b), b.fen()) for b in boards]
    bad = [(g, f, fen) for g, f, fen in got if g != f]
    assert not bad, bad[:5]
    possible = sum(g for g, _, _ in got)
    assert 5 < possible < len(got) - 5  # both kinds are exercised


def test_every_double_check_reached_by_a_legal_move_is_accepted():
    """Forward from random positions: every double check a legal move gives is possible
    (promotions, en passant and discovered checks included)."""
    rng = random.Random(5)
    seen = set()
    tries = 0
    while len(seen) < 60 and tries < 20000:
        tries += 1
        b = chess.Board(None)
        for color in (chess.WHITE, chess.BLACK):
            while True:
                sq = rng.randrange(64)
                if b.piece_at(sq) is None:
                    b.set_piece_at(sq, chess.Piece(chess.KING, color))
                    break
        for _ in range(rng.randint(3, 10)):
            sq = rng.randrange(64)
            pt = rng.choice([chess.PAWN, chess.PAWN, chess.KNIGHT, chess.BISHOP, chess.ROOK, chess.QUEEN])
            if b.piece_at(sq) is None and not (pt == chess.PAWN and chess.square_rank(sq) in (0, 7)):
                b.set_piece_at(sq, chess.Piece(pt, rng.random() < 0.6))
        b.turn = chess.WHITE
        if rng.random() < 0.3:  # an en-passant chance: a black pawn that just double-pushed
            f = rng.randrange(8)
            if b.piece_at(chess.square(f, 4)) is None and b.piece_at(chess.square(f, 5)) is None:
                b.set_piece_at(chess.square(f, 4), chess.Piece(chess.PAWN, chess.BLACK))
                b.ep_square = chess.square(f, 5)
        if b.status() & ~chess.STATUS_INVALID_EP_SQUARE:
            continue
        for m in b.legal_moves:
            b.push(m)
            if chess.popcount(b.checkers_mask()) == 2 and not b.status():
                assert double_check_possible(b), (b.fen(), m.uci())
                seen.add(b.fen())
            b.pop()
    assert len(seen) >= 60


@pytest.mark.parametrize("fen", [
    "4k3/8/3N1N2/8/8/8/8/4K3 b - - 0 1",      # two knights
    "4k3/3P4/5N2/8/8/8/8/4K3 b - - 0 1",      # a pawn and a knight
    "4k3/8/8/8/8/8/8/R3K2R b - - 0 1".replace("R3K2R", "4K3").replace("4k3", "R3k3").replace("/8/8/8/8/8/8/", "/8/8/8/8/8/4R3/"),
])
def test_known_impossible_double_checks_are_rejected_in_both_paths(tmp_path, fen):
    b = chess.Board(fen)
    assert chess.popcount(b.checkers_mask()) == 2 and not b.status() & chess.STATUS_IMPOSSIBLE_CHECK
    assert not forward_possible(b)
    with pytest.raises(RecordError, match="impossible check"):
        validate(Record(fen=fen, score=None, result=0, ply=None, move=None, location="", game=0))
    from nnue.pipeline.board import pack_fen
    from nnue.pipeline.formats import ReaderOptions
    from nnue.pipeline.pack import pack

    good = "4k3/8/8/8/8/8/8/4K3 b - - 0 1"
    src = tmp_path / "a.marlin"
    src.write_bytes(pack_fen(good) + pack_fen(fen))
    for fast in (True, False):
        s = pack([src], tmp_path / f"ds{fast}", progress=False, options=ReaderOptions(fast=fast))
        assert s["rejected"] == {"impossible check": 1} and s["packed"] == 1
