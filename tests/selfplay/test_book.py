"""The opening book matches use by default (selfplay/books/balanced.txt): legal, distinct,
balanced lines, and the match's default openings come from it."""
from __future__ import annotations

import random

import chess
import pytest

from nnue.selfplay.book import book_path, read_book
from nnue.selfplay.match import make_openings, opening_settings
from nnue.selfplay.mcts import position_key

from tests.selfplay.test_selfplay_cmd import nets, nnue  # noqa: F401  (nets: the module fixture)
from tests.selfplay.test_uci_engines import STOCKFISH, needs_sf


def _final(moves):
    b = chess.Board()
    for u in moves:
        b.push_uci(u)
    return b


def test_the_shipped_book_is_legal_distinct_and_balanced():
    book = read_book()
    assert len(book) >= 200
    keys = set()
    for moves, cp in book:
        assert len(moves) == 8 and abs(cp) <= 40
        b = _final(moves)
        assert not b.is_game_over()
        keys.add(position_key(b))
    assert len(keys) == len(book)  # no position twice
    first = {m[0] for m, _ in book}
    assert len(first) >= 4  # not one opening move only
    header = [ln for ln in book_path().read_text().splitlines() if ln.startswith("#")]
    assert any("python -m nnue.selfplay.book" in ln for ln in header)


@needs_sf
def test_stockfish_agrees_the_lines_are_balanced():
    """Eight lines drawn at random, searched again from a cleared hash to depth 12 by Stockfish
    15.1 (Threads=1, Hash=16, as the book's recheck did): the scores the book records, within
    ±40 cp of equality."""
    import chess.engine

    picks = random.Random(7).sample(read_book(), 8)
    with chess.engine.SimpleEngine.popen_uci(STOCKFISH) as eng:
        eng.configure({"Threads": 1, "Hash": 16})
        for moves, cp in picks:
            info = eng.analyse(_final(moves), chess.engine.Limit(depth=12), game=object())
            got = info["score"].white().score(mate_score=100_000)
            assert abs(got - cp) <= 10 and abs(got) <= 45, (moves, cp, got)


def test_matches_open_from_the_book_by_default():
    book = {tuple(m) for m, _ in read_book()}
    ops = make_openings(40, seed=3)
    assert all(fen == chess.STARTING_FEN and tuple(moves) in book and not c960 for fen, moves, c960 in ops)
    assert len({tuple(m) for _, m, _ in ops}) == 40  # no line twice while the book lasts
    assert [m for _, m, _ in make_openings(40, seed=3)] == [m for _, m, _ in ops]  # seeded
    assert [m for _, m, _ in make_openings(40, seed=4)] != [m for _, m, _ in ops]
    assert opening_settings(None, None, None, False)["book"] == "shipped:balanced.txt"
    # the other sources still work, and exclude each other
    assert all(len(m) == 6 for _, m, _ in make_openings(3, random_plies=6))
    with pytest.raises(ValueError, match="exclude each other"):
        make_openings(2, random_plies=4, book=book_path())


def test_a_bad_book_is_one_line(nets, tmp_path):  # noqa: F811
    bad = tmp_path / "book.txt"
    bad.write_text("# header\ne2e4 e7e5 ; cp +10\ne2e4 e2e5 ; cp 0\n")
    with pytest.raises(ValueError, match="line 3"):
        read_book(bad)
    rc, _, se = nnue("match", "--net", nets[0], "--net", nets[1], "--book", bad, "--nodes", "1", "-o", tmp_path / "m")
    assert rc == 2 and se.count("\n") == 1 and "line 3" in se, se
    assert not (tmp_path / "m").exists()
