"""Repetition in self-play and matches: the position key holds the en-passant square only when
an en-passant capture is legal (FIDE 9.2.3, as python-chess's ``is_repetition`` keys it)."""
from __future__ import annotations

import chess

from nnue.selfplay.mcts import SearchConfig, position_key, terminal_value
from nnue.selfplay.play import Adjudication, Game, Player

THREEFOLD = "e4 e5 Nf3 Nf6 Ng1 Ng8 Nf3 Nf6 Ng1 Ng8".split()


def _game(board: chess.Board) -> Game:
    p = Player(None, SearchConfig(nodes=1), "x")
    return Game(board, p, p, Adjudication(0, 0, 0, 0, 0, 0))


def test_threefold_with_an_unusable_en_passant_square_ends_the_game():
    """1.e4 e5 2.Nf3 Nf6 3.Ng1 Ng8 4.Nf3 Nf6 5.Ng1 Ng8: the position after 1...e5 (e6 set, no
    pawn can take) occurs for the third time; the game is a draw there and not one ply earlier."""
    g = _game(chess.Board())
    ref = chess.Board()
    for i, san in enumerate(THREEFOLD):
        move = g.board.parse_san(san)
        ref.push(move)
        assert not g.over, (i, g.reason)
        g.push(move)
        assert g.over == ref.is_repetition(3), (i, san)
    assert g.over and g.reason == "threefold repetition" and g.result == 0 and g.board.ply() == 10


def test_position_key_matches_python_chess_transpositions():
    b = chess.Board()
    b.push_san("e4")
    b.push_san("e5")
    with_raw_ep = position_key(b)
    for san in ("Nf3", "Nf6", "Ng1", "Ng8"):
        b.push_san(san)
    assert position_key(b) == with_raw_ep  # e6 is not a capture anyone can make
    # a usable en-passant square stays in the key: the same pieces without it are another position
    usable = chess.Board("rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3")
    assert usable.has_legal_en_passant()
    assert position_key(usable) != position_key(chess.Board(usable.fen().replace(" f6 ", " - ")))
    # the search sees the repetition too: the root after 5.Ng1 Ng8 is in the game's history
    assert terminal_value(b, list(b.legal_moves), {with_raw_ep}) == 0.0


def test_contempt_makes_a_draw_cost_the_side_to_move_at_the_root():
    """White (Kb6, Qc1 against Ka8) can stalemate with Qc7. Without contempt that child is an exact
    0; with contempt C it is worth -C to White (the root's side), +C to Black to move there."""
    import torch
    from tests.netfiles import make_int_net

    from nnue.selfplay.mcts import BatchSearch, make_tree

    torch.set_num_threads(1)
    net = make_int_net("chess768", hidden=16, seed=3)
    board = chess.Board("k7/8/1K6/8/8/8/8/2Q5 w - - 0 1")
    stalemate = chess.Move.from_uci("c1c7")
    for contempt in (0.0, 0.1, 0.3):
        tree = make_tree(board, SearchConfig(nodes=200, priors="uniform", contempt=contempt), net)
        BatchSearch().run([(tree, net)])
        i = tree.root.moves.index(stalemate)
        child = tree.root.children[i]
        assert child is not None and child.terminal and child.n >= 1
        assert child.q == contempt  # Black to move in the stalemate: +C for Black, -C for White
    import pytest

    with pytest.raises(ValueError, match="contempt"):
        SearchConfig(contempt=1.0)
