"""Dump-format readers: Stockfish .plain, bullet text and engine-match PGN.

Readers only parse syntax and normalise POV (FORMATS.md); legality is pack's job, so these tests
drive the readers directly on in-memory streams and on the shared sample files."""
from __future__ import annotations

import io
import re
from pathlib import Path

import chess
import chess.pgn
import pytest

from nnue.pipeline.formats import (MATE_BOUND, FormatError, ReaderOptions, Record, Reject,
                                   detect_format, get_format, parse_result_token)
from tests.samples import PUBLIC, public, selfplay

ANNOTATED = PUBLIC / "sample_with_annotations.pgn"  # third party: read in place, skipped without it

START = chess.STARTING_FEN


def _need(path: Path) -> Path:
    return public(path.name) if path.parent == PUBLIC else path


def read_text(fmt: str, text: str, **opts) -> list[Record | Reject]:
    """The reader's records one by one (fast=False: the bulk path has its own identity tests in
    tests/formats/test_fastcheck.py)."""
    return list(get_format(fmt).read(io.StringIO(text), ReaderOptions(**{"fast": False, **opts})))


def read_file(fmt: str, path: Path, **opts) -> list[Record | Reject]:
    with open(_need(path)) as f:
        return list(get_format(fmt).read(f, ReaderOptions(**{"fast": False, **opts})))


def plain_block(fen, move="e2e4", score=0, ply=0, result=0) -> str:
    return f"fen {fen}\nmove {move}\nscore {score}\nply {ply}\nresult {result}\ne\n"


# ============================================================================ Stockfish .plain
def test_plain_reads_960_set_completely():
    items = read_file("plain", selfplay("sf15-960-xfen-s2.plain"))
    assert len(items) == 4586
    assert all(isinstance(i, Record) for i in items)
    games = [r.game for r in items]
    assert games[0] == 0 and games == sorted(games)
    assert len(set(games)) == 40  # the README: 40 games
    assert set(games) == set(range(40))
    first = items[0]
    assert first.fen == "brqkr1nb/1p1ppppp/2p5/p7/5n1N/3P3P/PPP1PPP1/BRQKRN1B w KQkq - 1 5"
    assert (first.move, first.score, first.ply, first.result, first.location) == (
        "c1f4", 528, 8, 1, "line 1")
    assert items[1].location == "line 7" and items[1].score == -500 and items[1].result == -1
    mates = [r for r in items if r.score_is_mate]
    assert mates and all(abs(r.score) >= MATE_BOUND for r in mates)
    assert all(abs(r.score) < MATE_BOUND for r in items if not r.score_is_mate)


def test_plain_value_none_and_mate():
    text = (plain_block(START, score=32002, ply=0, result=0)
            + plain_block(START, score=31990, ply=0, result=1)
            + plain_block(START, score=-31990, ply=0, result=-1)
            + plain_block(START, score=-32002, ply=0, result=0)
            + plain_block(START, score=31753, ply=0, result=0))
    a, b, c, d, e = read_text("plain", text)
    assert a.score is None and not a.score_is_mate
    assert b.score == 31990 and b.score_is_mate
    assert c.score == -31990 and c.score_is_mate
    assert d.score == -32002 and d.score_is_mate  # only +32002 is VALUE_NONE
    assert e.score == 31753 and not e.score_is_mate


def test_plain_nan_score_is_rejected_with_line_number():
    text = plain_block(START, score=5) + plain_block(START, score="nan") + plain_block(START, score=7)
    items = read_text("plain", text)
    assert [type(i) for i in items] == [Record, Reject, Record]
    rej = items[1]
    assert rej.location == "line 7"
    assert rej.reason == "number not an integer"
    assert "nan" in rej.raw
    assert items[2].location == "line 13" and items[2].score == 7


@pytest.mark.parametrize("field,value,reason", [
    ("ply", "3.5", "number not an integer"),
    ("result", "x", "number not an integer"),
    ("result", "2", "result out of range"),
    ("result", "-2", "result out of range"),
])
def test_plain_bad_numbers(field, value, reason):
    text = plain_block(START).replace(f"\n{field} 0\n", f"\n{field} {value}\n")
    (rej,) = read_text("plain", text)
    assert isinstance(rej, Reject) and rej.reason == reason and rej.location == "line 1"


def test_plain_truncated_last_record_is_rejected():
    text = plain_block(START, score=1) + "fen " + START + "\nmove e2e4\nscore 3\n"
    items = read_text("plain", text)
    assert isinstance(items[0], Record)
    assert isinstance(items[1], Reject)
    assert items[1].reason == "truncated record" and items[1].location == "line 7"
    assert len(items) == 2


def test_plain_record_without_e_before_next_fen():
    text = "fen " + START + "\nmove e2e4\nscore 3\n" + plain_block(START, score=9)
    items = read_text("plain", text)
    assert [type(i) for i in items] == [Reject, Record]
    assert items[0].location == "line 1" and items[0].reason == "malformed record"
    assert items[1].location == "line 4" and items[1].score == 9


def test_plain_missing_field():
    text = f"fen {START}\nscore 3\nply 0\nresult 0\ne\n"
    (rej,) = read_text("plain", text)
    assert isinstance(rej, Reject) and rej.reason == "missing field" and "move" in rej.detail
    assert rej.location == "line 1"


def test_plain_unknown_key_line_is_rejected():
    text = (plain_block(START, score=1)
            + f"fen {START}\nmove e2e4\nbogus 17\nscore 3\nply 0\nresult 0\ne\n"
            + plain_block(START, score=2))
    items = read_text("plain", text)
    rejects = [i for i in items if isinstance(i, Reject)]
    records = [i for i in items if isinstance(i, Record)]
    assert [r.score for r in records] == [1, 2]  # the good neighbours survive
    # one reject for the block, located at its first line; the detail names the bogus line
    assert len(rejects) == 1 and rejects[0].location == "line 7" and "line 9" in rejects[0].detail
    assert rejects[0].reason == "malformed record" and "bogus" in rejects[0].detail


def test_plain_unknown_key_line_counts_one_record():
    text = (plain_block(START, score=1)
            + f"fen {START}\nmove e2e4\nbogus 17\nscore 3\nply 0\nresult 0\ne\n"
            + plain_block(START, score=2))
    items = read_text("plain", text)
    assert len(items) == text.count("\ne\n")  # one Record or Reject per block, as documented


def test_plain_game_boundaries():
    text = (plain_block(START, ply=10, result=1)   # game 0
            + plain_block(START, ply=11, result=-1)  # continues: ply + 1, result flips
            + plain_block(START, ply=12, result=1)
            + plain_block(START, ply=0, result=1)    # ply restarts: game 1
            + plain_block(START, ply=1, result=1)    # result does not flip: game 2
            + plain_block(START, ply=2, result=-1)   # continues game 2
            + plain_block(START, ply=7, result=0)    # ply jumps: game 3
            + plain_block(START, ply=8, result=0))   # draw: -0 == 0, continues game 3
    games = [r.game for r in read_text("plain", text)]
    assert games == [0, 0, 0, 1, 2, 2, 3, 3]


def test_plain_tolerates_blank_lines_and_crlf():
    text = ("\n" + plain_block(START, score=4) + "\n\n" + plain_block(START, score=5)).replace(
        "\n", "\r\n")
    stream = io.TextIOWrapper(io.BytesIO(text.encode()), newline=None)
    items = list(get_format("plain").read(stream, ReaderOptions(fast=False)))
    assert [(type(i), i.score, i.location) for i in items] == [
        (Record, 4, "line 2"), (Record, 5, "line 10")]
    assert items[0].fen == START and items[0].move == "e2e4"


# ================================================================================ bullet text
def test_bullet_black_to_move_line_by_hand():
    # second line of sf15-960-xfen-s2.txt, checked by hand against its .plain twin:
    # white POV +500 / 1.0 -> black to move: -500 / -1, fullmove 5 black -> ply 9
    line = "brqkr1nb/1p1ppppp/2p5/p7/5Q1N/3P3P/PPP1PPP1/BR1KRN1B b KQkq - 0 5 | 500 | 1.0"
    (rec,) = read_text("bullet-text", line + "\n")
    assert isinstance(rec, Record)
    assert rec.score == -500 and rec.result == -1 and rec.ply == 9
    assert rec.move is None and rec.location == "line 1" and not rec.score_is_mate
    assert rec.fen == line.split(" | ")[0]
    (rec_w,) = read_text("bullet-text", line.replace(" b ", " w ") + "\n")
    assert rec_w.score == 500 and rec_w.result == 1 and rec_w.ply == 8


def test_bullet_agrees_with_plain_twin_on_960_set():
    plain = read_file("plain", selfplay("sf15-960-xfen-s2.plain"))
    bullet = read_file("bullet-text", selfplay("sf15-960-xfen-s2.txt"))
    assert len(plain) == len(bullet) == 4586
    assert all(isinstance(b, Record) for b in bullet)
    blacks = 0
    for p, b in zip(plain, bullet):
        assert (b.fen, b.score, b.result, b.ply, b.score_is_mate) == (
            p.fen, p.score, p.result, p.ply, p.score_is_mate), b.location
        blacks += " b " in b.fen
    assert 2000 < blacks < 2600
    # same game partition as the .plain reader
    assert [b.game for b in bullet] == [p.game for p in plain]


@pytest.mark.parametrize("token,white_result", [
    ("1.0", 1), ("0.5", 0), ("0.0", -1), ("1", 1), ("1/2", 0), ("0", -1),
    ("[1.0]", 1), ("[0.5]", 0), ("[0.0]", -1), ("1-0", 1), ("0-1", -1), ("1/2-1/2", 0),
])
@pytest.mark.parametrize("side", ["w", "b"])
def test_bullet_result_tokens(token, white_result, side):
    fen = f"4k3/8/8/8/8/8/4P3/4K3 {side} - - 0 30"
    (rec,) = read_text("bullet-text", f"{fen} | 120 | {token}\n")
    assert isinstance(rec, Record)
    sign = 1 if side == "w" else -1
    assert rec.result == white_result * sign
    assert rec.score == 120 * sign
    assert rec.ply == 58 + (side == "b")


def test_parse_result_token_rejects_garbage():
    for t in ("2", "0.7", "-1", "", "win", "1.5", "[2.0]"):
        assert parse_result_token(t) is None, t


@pytest.mark.parametrize("line,reason", [
    ("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1 | 35", "malformed record"),
    ("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1 | 35 | 1.0 | extra", "malformed record"),
    ("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1", "malformed record"),
    ("4k3/8/8/8/8/8/4P3/4K3 w | 35 | 1.0", "bad FEN"),
    ("4k3/8/8/8/8/8/4P3/4K3 w - - 0 x | 35 | 1.0", "bad FEN"),
    ("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1 | abc | 1.0", "score not a finite integer"),
    ("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1 | nan | 1.0", "score not a finite integer"),
    ("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1 | inf | 1.0", "score not a finite integer"),
    ("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1 | 35.5 | 1.0", "score not a finite integer"),
    ("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1 | 35 | 2.0", "result out of range"),
    ("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1 | 35 | draw", "result out of range"),
])
def test_bullet_malformed_lines_are_rejected(line, reason):
    good = "4k3/8/8/8/8/8/4P3/4K3 w - - 0 1 | 10 | 0.5"
    items = read_text("bullet-text", f"{good}\n{line}\n\n{good}\n")
    assert [type(i) for i in items] == [Record, Reject, Record]
    assert items[1].reason == reason
    assert items[1].location == "line 2"
    assert items[1].raw == line
    assert items[2].location == "line 4"


def test_bullet_value_none_mate_and_missing_counters():
    text = ("4k3/8/8/8/8/8/4P3/4K3 b - - 0 1 | 32002 | 0.5\n"
            "4k3/8/8/8/8/8/4P3/4K3 b - - 0 1 | 31990 | 1.0\n"
            "4k3/8/8/8/8/8/4P3/4K3 w - - | 15 | 1.0\n")
    a, b, c = read_text("bullet-text", text)
    assert a.score is None and not a.score_is_mate
    assert b.score == -31990 and b.score_is_mate and b.result == -1
    assert c.ply is None and c.score == 15
    assert len({a.game, b.game, c.game}) == 3  # no counters / no continuation: separate games


# ======================================================================================= PGN
def _comment_score(comment: str) -> int | None:
    m = re.match(r"\s*([+-]?\d+\.\d+)/\d+", comment)
    return None if m is None else round(float(m.group(1)) * 100)


def test_pgn_cutechess_mover_pov_on_annotated_sample():
    items = read_file("pgn", ANNOTATED)  # default pgn_pov="mover"
    assert all(isinstance(i, Record) for i in items)
    # count positions against python-chess's own mainline count
    with open(ANNOTATED) as f:
        games = []
        while (g := chess.pgn.read_game(f)) is not None:
            games.append(g)
    assert len(games) == 2
    nodes = [n for g in games for n in g.mainline()]
    assert len(items) == len(nodes) == 113 + 193  # the PlyCount tags
    assert [r.game for r in items] == [0] * 113 + [1] * 193
    for rec, node in zip(items, nodes):
        parent = node.parent.board()
        assert rec.fen == parent.fen() and rec.move == node.move.uci()
        assert rec.ply == parent.ply()
        # mover POV == side-to-move POV of the position before the move: the comment as written
        assert rec.score == _comment_score(node.comment), (rec.location, node.comment)
        # both games are 0-1
        assert rec.result == (-1 if parent.turn == chess.WHITE else 1)
    # book moves and moves without a comment carry no score
    assert all(r.score is None for r in items[:20])  # 10 moves of {book} in game 0
    kh8 = items[23]  # 12... Kh8 has no comment
    assert kh8.move == "g8h8" and kh8.score is None
    assert items[20].score == 10 and items[21].score == 0  # 11. Nh4 {+0.10/7}, 11... d4 {0.00/8}
    assert items[46].score == -132 and items[47].score == 137  # 24. Bd3 {-1.32}, Nb4 {+1.37}
    assert items[112].score == -665  # last comment, with ', Black wins by adjudication'
    # signs alternate with the mover once black is clearly better: white POV stays negative
    late = [r for r in items[46:113] if r.score is not None and abs(r.score) >= 50]
    assert len(late) > 40
    white_pov = [r.score if r.ply % 2 == 0 else -r.score for r in late]
    assert all(s < 0 for s in white_pov)
    signs = [r.score > 0 for r in late]
    assert signs == [r.ply % 2 == 1 for r in late]
    assert not any(r.score_is_mate for r in items)


def test_pgn_white_pov_option_flips_black_moves_only():
    mover = read_file("pgn", ANNOTATED)
    white = read_file("pgn", ANNOTATED, pgn_pov="white")
    for m, w in zip(mover, white):
        if m.score is None:
            assert w.score is None
        elif m.ply % 2 == 0:
            assert w.score == m.score
        else:
            assert w.score == -m.score


def test_pgn_selfplay_white_pov_agrees_with_plain():
    plain = read_file("plain", selfplay("sf15-960-xfen-s2.plain"))
    pgn = read_file("pgn", selfplay("sf15-960-xfen-s2.pgn"), pgn_pov="white")
    assert len(pgn) == len(plain) == 4586
    assert all(isinstance(i, Record) for i in pgn)
    mates = 0
    for p, g in zip(plain, pgn):
        assert g.fen == chess.Board(p.fen, chess960=True).fen()
        assert (g.move, g.result, g.ply, g.score_is_mate) == (p.move, p.result, p.ply,
                                                               p.score_is_mate), g.location
        assert g.score == p.score, g.location
        mates += g.score_is_mate
    assert mates > 10
    assert len({g.game for g in pgn}) == 40


PGN_MATE = """[Event "mate edge"]
[FEN "6k1/p4ppp/8/8/8/8/5PPP/3R2K1 b - - 0 1"]
[SetUp "1"]
[Result "1-0"]

1... a6 {-M3/20 0.010s} 2. Rd8# {+M1/20 0.001s} 1-0
"""


def test_pgn_minus_mate_on_blacks_move_means_white_mates():
    a, b = read_text("pgn", PGN_MATE)  # pgn_pov="mover", as cutechess writes
    assert a.fen.split()[1] == "b" and a.move == "a7a6"
    assert a.score_is_mate and a.score < 0  # black to move is being mated
    assert a.score == -(32000 - 3)
    assert a.result == -1
    assert b.score_is_mate and b.score == 32000 - 1 and b.result == 1
    # the same comments read as white POV: -M3 is then "black mates", good for black to move
    a_w, b_w = read_text("pgn", PGN_MATE, pgn_pov="white")
    assert a_w.score == 32000 - 3 and b_w.score == 32000 - 1


PGN_LICHESS = """[Event "lichess"]
[Result "1/2-1/2"]

1. e4 { [%eval 0.20] } 1... e5 { [%eval 0.25] [%clk 0:03:00] } 2. Nf3 { [%eval -1.5] } 1/2-1/2
"""


@pytest.mark.parametrize("pov", ["mover", "white"])
def test_pgn_lichess_eval_is_white_pov_of_the_position_after_the_move(pov):
    # lichess puts the eval of the position *after* a move in that move's comment
    a, b, c = read_text("pgn", PGN_LICHESS, pgn_pov=pov)
    assert a.score is None                   # the start position has no eval
    assert (b.score, c.score) == (-20, 25)   # after 1. e4 (black to move): +0.20 white -> -20 stm
    assert not (b.score_is_mate or c.score_is_mate)
    assert (a.result, b.result, c.result) == (0, 0, 0)


PGN_LICHESS_MATE = """[Event "lichess"]
[FEN "6k1/p4ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1"]
[SetUp "1"]
[Result "0-1"]

1. h3 { [%eval #-3] } 1... a6 { [%eval #3] } 2. Kh2 0-1
"""


def test_pgn_lichess_mate_distances_depend_on_side_to_move():
    a, b, c = read_text("pgn", PGN_LICHESS_MATE)
    assert a.score is None and a.fen.split()[1] == "w"
    # after 1. h3, black to move and black mates in 3 moves: 5 plies, good for the side to move
    assert b.fen.split()[1] == "b" and b.score_is_mate and b.score == 32000 - 5
    # after 1... a6, white to move and white mates in 3 moves: 5 plies, good for the side to move
    assert c.fen.split()[1] == "w" and c.score_is_mate and c.score == 32000 - 5


def test_pgn_lichess_mate_for_the_side_not_to_move():
    text = PGN_LICHESS_MATE.replace("{ [%eval #3] }", "{ [%eval #-2] }")
    _, _, c = read_text("pgn", text)
    # white to move, black mates in 2 moves: white moves first, so 4 plies, bad for the stm
    assert c.score_is_mate and c.score == -(32000 - 4)


def test_pgn_unfinished_game_yields_rejects_not_records():
    text = ('[Event "a"]\n[Result "*"]\n\n1. e4 {+0.30/5 0.1s} e5 2. Nf3 *\n\n'
            '[Event "b"]\n[Result "1-0"]\n\n1. d4 d5 1-0\n')
    items = read_text("pgn", text)
    assert [type(i) for i in items] == [Reject, Reject, Reject, Record, Record]
    assert all(r.reason == "unknown game result" for r in items[:3])
    assert items[0].raw == START
    assert items[0].location.startswith("line 1") and items[3].location.startswith("line 6")
    assert [r.game for r in items[3:]] == [1, 1] and items[3].result == 1 and items[4].result == -1


def test_pgn_illegal_move_ends_game_with_one_reject():
    text = ('[Event "a"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Qxf8 Nf6 1-0\n\n'
            '[Event "b"]\n[Result "0-1"]\n\n1. d4 d5 0-1\n')
    items = read_text("pgn", text)
    records = [i for i in items if isinstance(i, Record)]
    rejects = [i for i in items if isinstance(i, Reject)]
    assert [r.move for r in records] == ["e2e4", "e7e5", "d1h5", "b8c6", "d2d4", "d7d5"]
    assert len(rejects) == 1 and "Qxf8" in rejects[0].detail
    assert rejects[0].location.startswith("line 1")


# ================================================================================ registry
def test_detect_format_by_extension_and_content(tmp_path):
    for name, fmt in (("a.plain", "plain"), ("a.txt", "bullet-text"), ("a.pgn", "pgn"),
                      ("a.plain.zst", "plain"), ("a.txt.gz", "bullet-text")):
        assert detect_format(tmp_path / name) == fmt
    (tmp_path / "x.dump").write_text(plain_block(START))
    assert detect_format(tmp_path / "x.dump") == "plain"
    (tmp_path / "y.dump").write_text("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1 | 10 | 0.5\n")
    assert detect_format(tmp_path / "y.dump") == "bullet-text"
    (tmp_path / "z.dump").write_bytes(bytes(range(256)))
    with pytest.raises(FormatError, match="z.dump"):
        detect_format(tmp_path / "z.dump")
    with pytest.raises(FormatError, match="nope"):
        get_format("nope")
