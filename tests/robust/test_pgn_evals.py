"""Issue 15 item 2: PGN eval annotations. ``[%eval ...]`` is read by the grammar python-chess's
own reader accepts (python-chess is the oracle here: every comment is also parsed by
``chess.pgn`` and the two must agree), cutechess/fastchess comments as before, and a comment
that looks like an eval but does not parse is a counted reject, never a silent "no score"."""
from __future__ import annotations

import io
import json
import subprocess
import sys

import chess
import chess.engine
import chess.pgn
import pytest

from nnue.pipeline.formats import ReaderOptions, Record, Reject, get_format
from nnue.pipeline.parts import read_part

BAD_EVAL = "eval comment not understood"


def _read(text, pov="mover"):
    return list(get_format("pgn").read(io.StringIO(text), ReaderOptions(pgn_pov=pov, fast=False)))


def _game(comment_after_e4: str) -> str:
    return f'[Event "x"]\n[Result "1/2-1/2"]\n\n1. e4 {{ {comment_after_e4} }} e5 2. Nf3 1/2-1/2\n'


def _python_chess_eval(comment: str):
    """What python-chess reads from the comment: the white-POV eval after 1. e4, or None."""
    game = chess.pgn.read_game(io.StringIO(_game(comment)))
    return game.next().eval()


def _stm_cp(pov_score: chess.engine.PovScore, turn: chess.Color) -> tuple[int, bool]:
    s = pov_score.pov(turn)
    if s.is_mate():
        m = s.mate()
        # our convention (Stockfish's): ±(32000 − plies); python-chess counts moves
        plies = 2 * m - 1 if m > 0 else 2 * -m
        return (32000 - plies) if m > 0 else -(32000 - plies), True
    return s.score(), False


LICHESS_COMMENTS = [
    "[%eval 0.20]", "[%eval -1.5]", "[%eval 0.20,15]", "[%eval -3.05,22]", "[%eval .5]", "[%eval 12.]",
    "[%eval +0.33]", "[%eval 7]", "[%eval #3]", "[%eval #-3]", "[%eval #+2,30]", "[%eval #-1,5]",
    "[%eval 0.20] [%clk 0:03:00]", "[%clk 0:03:00] [%eval -0.07,9]",
    # python-chess refuses these: they must be counted rejects, not "no score"
    "[%eval abc]", "[%eval 0.123]", "[%eval 0.20,]", "[%eval 0.20,x]", "[%eval  0.2]", "[%eval #]",
    "[%eval 1e3]", "[%eval 0.20, 15]",
]


@pytest.mark.parametrize("comment", LICHESS_COMMENTS)
def test_eval_grammar_matches_python_chess(comment):
    ref = _python_chess_eval(comment)
    items = _read(_game(comment))
    after_e4 = items[1]  # the position after 1. e4 is the one the comment scores
    assert isinstance(items[0], Record) and items[0].score is None
    if ref is None:
        assert isinstance(after_e4, Reject) and after_e4.reason == BAD_EVAL, comment
        assert comment.split("]")[0].strip("[") in after_e4.detail
    else:
        assert isinstance(after_e4, Record), comment
        assert (after_e4.score, after_e4.score_is_mate) == _stm_cp(ref, chess.BLACK), comment
    assert isinstance(items[2], Record) and items[2].score is None  # 1... e5 has no comment


def test_python_chess_written_evals_round_trip():
    """A game annotated by python-chess's own writer (set_eval with depth: ``[%eval x,d]``)."""
    import random

    rnd = random.Random(7)
    board = chess.Board()
    game = chess.pgn.Game()
    game.headers["Result"] = "1/2-1/2"
    node, expected = game, []
    for _ in range(24):
        move = rnd.choice(list(board.legal_moves))
        board.push(move)
        node = node.add_variation(move)
        if rnd.random() < 0.2:
            score = chess.engine.Mate(rnd.choice([1, 2, 5, -1, -4]))
        else:
            score = chess.engine.Cp(rnd.randint(-900, 900))
        pov = chess.engine.PovScore(score, rnd.choice([chess.WHITE, chess.BLACK]))
        node.set_eval(pov, depth=rnd.choice([None, 12, 30]))
        expected.append(_stm_cp(pov, board.turn))
    text = str(game)
    assert ",12]" in text or ",30]" in text  # the writer's comma-separated depth is exercised
    recs = _read(text + "\n")
    assert all(isinstance(r, Record) for r in recs)
    assert [(r.score, r.score_is_mate) for r in recs[1:]] == expected[:-1]


CUTECHESS_OK = [("+0.35/12 0.5s", 35), ("-1.20/9 0.1s", -120), ("0.00/0 0s", 0), ("+0.35/12", 35),
                ("+0.35/12 0.500s, n=1234, sd=20, ...", 35), ("-M4/20 0.01s", -(32000 - 4)),
                ("+M1/1 0s", 32000 - 1)]
CUTECHESS_BAD = ["+0.35", "+0.3x/12 0.1s", "-M/20 0.1s", "+.35/12", "M3", "-0.50 (depth 12)", "M2.5/1",
                 "+M2.0/3"]


@pytest.mark.parametrize("comment,cp", CUTECHESS_OK)
def test_cutechess_variants_still_read(comment, cp):
    rec = _read(_game("x").replace("{ x }", "").replace("1. e4", f"1. e4 {{{comment}}}"))[0]
    assert isinstance(rec, Record) and rec.score == cp


@pytest.mark.parametrize("comment", CUTECHESS_BAD)
def test_cutechess_lookalikes_are_counted(comment):
    rec = _read(_game("x").replace("{ x }", "").replace("1. e4", f"1. e4 {{{comment}}}"))[0]
    assert isinstance(rec, Reject) and rec.reason == BAD_EVAL and comment[:4] in rec.detail


@pytest.mark.parametrize("comment", ["book", "White resigns", "2 pawns up, says the GUI", "",
                                     "Nf3 was better", "[%clk 0:01:00]"])
def test_comments_that_are_no_eval_stay_no_score(comment):
    rec = _read(_game("x").replace("{ x }", "").replace("1. e4", f"1. e4 {{{comment}}}"))[0]
    assert isinstance(rec, Record) and rec.score is None


def test_bad_eval_counted_in_pack_json_and_inspect(tmp_path):
    src = tmp_path / "a.pgn"
    src.write_text(_game("[%eval 0.123]") + "\n" + _game("[%eval 0.25,18]"))
    ds = tmp_path / "ds"
    nnue = [sys.executable, "-m", "nnue.cli"]
    out = subprocess.run([*nnue, "pack", str(src), "-o", str(ds), "--json", "--no-progress"],
                         capture_output=True, text=True, check=True)
    s = json.loads(out.stdout)
    assert s["read"] == 6 and s["packed"] == 5 and s["rejected"] == {BAD_EVAL: 1}
    out = subprocess.run([*nnue, "inspect", str(ds), "--json"], capture_output=True, text=True, check=True)
    r = json.loads(out.stdout)
    assert r["rejected"] == {BAD_EVAL: 1} and r["score_none"] == 4


# ------------------------------------------------------------------ issue 20 item 1: c-chess-cli's dialect
AMBIGUOUS = "ambiguous eval comment"


def _moves(*comments: str) -> str:
    """A game whose first plies carry ``comments`` (1. e4 {c0} e5 {c1} 2. Nf3 {c2} Nc6 {c3} ...)."""
    sans = ["e4", "e5", "Nf3", "Nc6", "Bb5", "a6", "Ba4", "Nf6"]
    out = []
    for i, (san, c) in enumerate(zip(sans, comments)):
        out.append((f"{i // 2 + 1}. " if i % 2 == 0 else "") + san + (f" {{{c}}}" if c is not None else ""))
    return '[Event "x"]\n[Result "1/2-1/2"]\n\n' + " ".join(out) + " 1/2-1/2\n"


# (comments in game order, expected per position: (score, is_mate), or a reject reason)
C_CHESS_CLI = [
    # integer centipawns, the mover's POV, with or without c-chess-cli's time (verbosity 3)
    (["38/21", "-24/20 15ms", "0/1", "350/19"], [(38, False), (-24, False), (0, False), (350, False)]),
    # M<n>: the mover mates in n moves (2n - 1 plies); -M<n>: is mated in n moves (2n plies)
    (["M2/30", "-M1/30"], [(32000 - 3, True), (-(32000 - 2), True)]),
    # -M<n> after c-chess-cli evals is read as moves, after cutechess ones as plies
    (["38/21", "-M3/30"], [(38, False), (-(32000 - 6), True)]),
    (["+0.38/21", "-M3/30"], [(38, False), (-(32000 - 3), True)]),
    # without an earlier eval (or after both dialects) -M<n> is ambiguous: rejected, not guessed
    (["-M3/30", "+M5/3"], [AMBIGUOUS, (32000 - 5, True)]),
    # ... unless its own time names the runner: seconds (cutechess, fastchess), ms (c-chess-cli)
    (["-M3/30 0.01s", "-M3/30 15ms", "-M2/3"], [(-(32000 - 3), True), (-(32000 - 6), True), AMBIGUOUS]),
    (["0.10/3", "12/3", "-M3/30"], [(10, False), (12, False), AMBIGUOUS]),
    # neither runner writes an integer with a '+' sign
    (["+38/21", "38/21"], [AMBIGUOUS, (38, False)]),
]


@pytest.mark.parametrize("comments,expected", C_CHESS_CLI)
def test_c_chess_cli_dialect(comments, expected):
    """c-chess-cli's ``{cp/depth}`` is read as centipawns (it was read as pawns: ×100, and
    ``{350/19}`` became an out-of-range reject); its ``M<n>`` counts moves; what reads differently
    in the two dialects is a counted reject with its reason."""
    items = _read(_moves(*comments))
    for item, want in zip(items, expected):
        if isinstance(want, str):
            assert isinstance(item, Reject) and item.reason == want, item
            assert "cutechess" in item.detail and "c-chess-cli" in item.detail
        else:
            assert isinstance(item, Record) and (item.score, item.score_is_mate) == want, (comments, item)
    # white's point of view: black's scores are negated, the dialect rules are the same
    white = _read(_moves(*comments), pov="white")
    for i, (a, b) in enumerate(zip(items, white)):
        if isinstance(a, Record):
            assert b.score == (a.score if i % 2 == 0 else -a.score)
        else:
            assert isinstance(b, Reject) and b.reason == a.reason


def test_c_chess_cli_file_packs_in_range(tmp_path):
    """The issue's example: a c-chess-cli PGN packed whole, every score as written (no ×100)."""
    from nnue.pipeline.pack import pack

    src = tmp_path / "c.pgn"
    src.write_text(_moves("38/21", "-24/20", "350/19", "-M2/18"))
    s = pack([src], tmp_path / "ds", fmt="pgn", progress=False)
    assert s["rejected"] == {} and s["packed"] == 4
    
    (part,) = (tmp_path / "ds").glob("part-*.parquet")
    assert read_part(part).column("score").to_pylist() == [38, -24, 350, -(32000 - 4)]
