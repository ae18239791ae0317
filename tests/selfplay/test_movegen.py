"""The compiled move generator of the search's expansions (selfplay/movegen.py) against
python-chess: the same legal moves in the same order and bit-identical "captures" priors on
random games (standard and Chess960) and constructed positions, and whole self-play games and
dumps that are byte for byte those of python-chess's move generation."""
from __future__ import annotations

import random
from collections import Counter

import chess
import chess.variant
import pytest
import torch

from nnue.selfplay import mcts
from nnue.selfplay.generate import selfplay
from nnue.selfplay.mcts import BatchSearch, SearchConfig, Tree, heuristic_priors
from nnue.selfplay.movegen import legal_moves
from nnue.selfplay.play import Adjudication, Game, Player, make_opening, play_games
from tests.netfiles import make_int_net


def _features(b: chess.Board, moves) -> Counter:
    c = Counter()
    if b.is_check():
        c["check"] += 1
        if len(b.checkers()) == 2:
            c["double check"] += 1
    if not moves:
        c["checkmate" if b.is_check() else "stalemate"] += 1
    for m in moves:
        special = []
        if b.is_en_passant(m):
            special.append("en passant")
        if m.promotion:
            special.append("promotion")
        if b.is_castling(m):
            special.append("castling 960" if b.chess960 else "castling")
        c.update(special)
        if special and b.gives_check(m):
            c.update(k + " giving check" for k in special)
    if b.ep_square is not None and not b.has_legal_en_passant() and any(
            b.piece_at(s) == chess.Piece(chess.PAWN, b.turn) for s in chess.SquareSet(
                chess.BB_PAWN_ATTACKS[not b.turn][b.ep_square])):
        c["en passant square, capture illegal"] += 1
    return c


def _same(b: chess.Board) -> list[chess.Move]:
    ref = list(b.legal_moves)
    got, priors = legal_moves(b, "captures")
    assert got == ref, (b.fen(), [m.uci() for m in ref], [m.uci() for m in got])
    assert [m.uci() for m in got] == [m.uci() for m in ref]
    if ref:
        assert priors == heuristic_priors(b, ref), b.fen()  # floats compared exactly
        checks = legal_moves(b, "checks")
        assert checks[0] == ref and checks[1] == heuristic_priors(b, ref, checks=True), b.fen()
    assert legal_moves(b)[1] is None
    return ref


def test_random_games_give_python_chess_moves_in_order_and_the_same_priors():
    """Random games biased towards captures, pawn moves and castling (so that en passant,
    promotions, checks and castling happen often), a third of them Chess960."""
    seen = Counter()
    n = 0
    for g in range(90):
        rng = random.Random(g)
        if g % 3 == 2:
            b = chess.Board.from_chess960_pos(rng.randrange(960))
            b.chess960 = True
        else:
            b = chess.Board()
        while b.ply() < 250:
            moves = _same(b)
            seen += _features(b, moves)
            n += 1
            if not moves or b.is_insufficient_material():
                break
            w = [4 if b.is_capture(m) or m.promotion or b.is_castling(m) or b.piece_type_at(m.from_square) == chess.PAWN
                 else 1 for m in moves]
            b.push(rng.choices(moves, w)[0])
    assert n > 8000
    for k in ("check", "double check", "checkmate", "en passant", "promotion", "castling", "castling 960"):
        assert seen[k] > 0, (k, seen)


FENS = [
    "8/8/8/K2pP2r/8/8/8/7k w - d6 0 1",  # en passant would expose the king along the rank
    "8/8/8/2k5/3Pp3/8/8/4K3 b - d3 0 1",  # in check by the pawn that just moved two: exd3 e.p.
    "8/8/8/8/k2Pp2Q/8/8/3K4 b - d3 0 1",  # en passant square, the capture legal
    "4k3/8/8/2b5/3Pp3/8/8/4K3 b - d3 0 1",
    "r3k2r/8/8/8/8/8/6b1/R3K2R w KQkq - 0 1",  # f1 attacked: no O-O
    "1r2k2r/8/8/8/8/8/8/R3K2R w KQk - 0 1",  # b1 attacked: O-O-O still legal
    "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1",
    "r3k2r/8/8/8/4r3/8/8/R3K2R w KQkq - 0 1",  # in check: no castling
    "4k3/8/8/8/8/8/4r3/R3K2r w Q - 0 1",  # double check: king moves only
    "7k/5Q2/6K1/8/8/8/8/8 b - - 0 1",  # stalemate
    "6rk/5Npp/8/8/8/8/8/6K1 b - - 0 1",  # checkmate (smothered)
    "1n1q1b2/P1P1P1P1/8/8/8/8/7k/K7 w - - 0 1",  # promotions, with and without capture
    "K7/8/8/8/8/8/1p1p1p1p/R1R1R1Rk b - - 0 1",
    "4k3/8/8/8/8/8/8/4K2R w K - 99 80",  # fifty-move rule next ply
    "5k2/8/8/8/8/8/8/4K2R w K - 0 1",  # O-O gives check (the rook)
    "3k4/8/8/8/8/8/8/R3K3 w Q - 0 1",  # O-O-O gives check
    "8/8/8/R2pP2k/8/8/8/K7 w - d6 0 1",  # en passant opens the rank: discovered check
    "3k4/1P6/8/8/8/8/8/K7 w - - 0 1",  # b8=Q and b8=R give check, b8=N b8=B do not
]
FENS_960 = [
    "1r4kr/pppppppp/8/8/8/8/PPPPPPPP/1R4KR w BHbh - 0 1",  # king on g1: O-O is king takes rook
    "rk4r1/8/8/8/8/8/8/RK4R1 w AGag - 0 1",  # king on b1: the a-side rook goes to d1, king to c1
    "2r1kr2/8/8/8/8/8/8/2R1KR2 w CFcf - 0 1",
    "nrbbqkrn/pppppppp/8/8/8/8/PPPPPPPP/NRBBQKRN w GBgb - 0 1",
    "5k2/8/8/8/8/8/8/1R4KR w BH - 0 1",  # Chess960 O-O (king stays on g1) gives check
]


def test_constructed_positions_hold_checks_by_special_moves():
    seen = Counter()
    for fen in FENS + FENS_960:
        b = chess.Board(fen, chess960=fen in FENS_960)
        seen += _features(b, list(b.legal_moves))
    for k in ("castling giving check", "castling 960 giving check", "en passant giving check",
              "promotion giving check", "stalemate", "checkmate", "double check"):
        assert seen[k] > 0, (k, seen)


@pytest.mark.parametrize("fen", FENS + FENS_960)
def test_constructed_positions(fen):
    b = chess.Board(fen, chess960=fen in FENS_960)
    assert b.is_valid(), b.status()
    moves = _same(b)
    # and every position one ply further
    for m in moves:
        b.push(m)
        _same(b)
        b.pop()


def test_stalemate_and_mate_have_no_moves():
    assert legal_moves(chess.Board("7k/5Q2/6K1/8/8/8/8/8 b - - 0 1"), "captures") == ([], [])
    with pytest.raises(ValueError, match="priors"):
        legal_moves(chess.Board(), "uniform")
    assert legal_moves(chess.Board("6rk/5Npp/8/8/8/8/8/6K1 b - - 0 1"))[0] == []


STARTS = [
    None, None, None,  # random openings (6 random plies), standard
    "960", "960",  # random Chess960 starts (4 random plies)
    "8/8/4k3/8/8/3K4/6R1/r7 w - - 88 1",  # close to the fifty-move rule
    "8/P6k/8/8/8/8/p6K/8 w - - 0 1",  # promotion race
    "7k/8/6K1/8/8/8/8/5Q2 w - - 0 1",  # mate or stalemate
    "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3",  # en passant
    "r3k2r/pppq1ppp/2npbn2/2b1p3/2B1P3/2NPBN2/PPPQ1PPP/R3K2R w KQkq - 0 8",  # castling both ways
    "960:1r4kr/pppppppp/8/8/8/8/PPPPPPPP/1R4KR w BHbh - 0 1",
]


def _play(net, priors: str = "captures"):
    cfg = SearchConfig(nodes=16, priors=priors)
    adj = Adjudication(win_plies=0, draw_plies=0, max_ply=160)
    made = [0]

    def new_game():
        if made[0] >= len(STARTS):
            return None
        k = made[0]
        rng = random.Random(500 + k)
        made[0] += 1
        s = STARTS[k]
        if s is None:
            b = make_opening(rng, 6)
        elif s == "960":
            b = make_opening(rng, 4, chess960=True)
        elif s.startswith("960:"):
            b = chess.Board(s[4:], chess960=True)
        else:
            b = chess.Board(s)
        p = Player(net, cfg)
        return Game(b, p, p, adj, tag=k, rng=rng)

    return sorted(play_games(new_game, 4, BatchSearch("auto")), key=lambda g: g.tag)


@pytest.mark.parametrize("priors", ["captures", "checks", "uniform"])
def test_whole_games_equal_python_chess_move_generation(priors, monkeypatch):
    """Every expansion's moves (and priors) are python-chess's (checked in line), and the games
    (PGN, .plain text, result and how they ended) are those of Tree.fast_movegen = False."""
    torch.set_num_threads(1)
    net = make_int_net("chess768", "screlu", hidden=16, buckets=8, seed=21)
    seen = Counter()
    calls = [0]

    def checked(board, want_priors=None):
        moves, pr = legal_moves(board, want_priors)
        assert moves == list(board.legal_moves), board.fen()
        assert want_priors == (None if priors == "uniform" else priors)
        if want_priors:
            assert pr == heuristic_priors(board, moves, checks=want_priors == "checks")
        seen.update(_features(board, moves))
        calls[0] += 1
        return moves, pr

    monkeypatch.setattr(mcts, "legal_moves", checked)
    fast = _play(net, priors)
    monkeypatch.undo()
    monkeypatch.setattr(Tree, "fast_movegen", False)
    monkeypatch.setattr(mcts, "legal_moves", None)  # the python-chess path must not call it
    slow = _play(net, priors)
    assert calls[0] > 300
    assert [g.pgn() for g in fast] == [g.pgn() for g in slow]
    assert [g.plain_text() for g in fast] == [g.plain_text() for g in slow]
    assert [(g.result, g.reason) for g in fast] == [(g.result, g.reason) for g in slow]
    assert any(g.board.chess960 for g in fast)
    for k in ("check", "checkmate", "en passant", "promotion", "castling", "castling 960"):
        assert seen[k] > 0, (k, seen)
    reasons = Counter(g.reason for g in fast)
    assert len(reasons) >= 3, reasons


def test_selfplay_dumps_identical_with_python_chess_move_generation(tmp_path, monkeypatch):
    """``nnue selfplay``'s files, byte for byte (Chess960 too), against python-chess's moves."""
    torch.set_num_threads(1)
    path = tmp_path / "net.safetensors"
    make_int_net("chess768", "screlu", hidden=16, buckets=8, seed=12).save(path)
    for chess960 in (False, True):
        kw = dict(games=4, nodes=12, games_per_file=2, in_flight=2, seed=9, sample_rate=0.05, chess960=chess960,
                  adjudication=Adjudication(max_ply=80), progress=False)
        fast, slow = tmp_path / f"fast{chess960}", tmp_path / f"slow{chess960}"
        s1 = selfplay(path, fast, **kw)
        with monkeypatch.context() as m:
            m.setattr(Tree, "fast_movegen", False)
            s2 = selfplay(path, slow, **kw)
        files = sorted(p.name for p in fast.glob("selfplay-*.plain"))
        assert len(files) == 2 and files == sorted(p.name for p in slow.glob("selfplay-*.plain"))
        for f in files:
            assert (fast / f).read_bytes() == (slow / f).read_bytes()
        assert (s1["games"], s1["positions"], s1["evals"]) == (s2["games"], s2["positions"], s2["evals"])


def test_trees_use_the_compiled_generator_from_valid_roots_only(monkeypatch):
    """A root python-chess calls invalid (here: no white king, where python-chess generates
    pseudo-legal moves) and board subclasses (variants) keep python-chess's generator."""
    from nnue.selfplay.backup import make_backup

    def tree(b):
        return Tree(b, SearchConfig(), make_backup("mean", 1.0, 0.01, None), 400.0)

    assert tree(chess.Board()).movegen
    assert tree(chess.Board("1r4kr/pppppppp/8/8/8/8/PPPPPPPP/1R4KR w BHbh - 0 1", chess960=True)).movegen
    no_king = chess.Board("4k3/8/8/8/8/8/8/7R w - - 0 1")
    assert not tree(no_king).movegen
    assert legal_moves(no_king)[0] != list(no_king.legal_moves)  # why: outside the generator's domain
    assert not tree(chess.variant.AtomicBoard()).movegen
    monkeypatch.setattr(Tree, "fast_movegen", False)
    assert not tree(chess.Board()).movegen
