"""The compiled PGN reader (pipeline/compiled/pgn.py) against the python-chess reader
(``ReaderOptions(fast=False)``, the oracle): identical datasets, rejects files and per-record
locations on the samples, on hand-written games for every reject reason and SAN edge case, on
odd layouts (CRLF, lone CR, BOM, comments over lines, ``%``/``;`` lines, blank lines) and on
mutated games; and the compiled path really settles the common games (nothing handed back)."""
from __future__ import annotations

import random

import pytest

from nnue.pipeline.formats import PackedRows, ReaderOptions, get_format, open_text
from tests.formats.formats_testlib import public
from tests.formats.pgn_testlib import both
from tests.samples import CUT, CUT_POSITIONS, full_selfplay, selfplay


def _game(moves: str, fen: str | None = None, result: str = "1-0", variant: str | None = None,
          extra: str = "") -> str:
    tags = [f'[Event "t"]', f'[Result "{result}"]']
    if fen:
        tags += [f'[FEN "{fen}"]', '[SetUp "1"]']
    if variant:
        tags.append(f'[Variant "{variant}"]')
    return "\n".join(tags) + extra + "\n\n" + moves + "\n\n"


def run(tmp_path, text: str | bytes, name: str = "x", pov: str = "mover", expect_all_compiled: bool = False):
    data = text.encode() if isinstance(text, str) else text
    s = both(tmp_path, data, name=name, pov=pov)
    if expect_all_compiled:
        assert s is not None and s["handed"] == 0, s
    return s


def test_public_annotated_sample(tmp_path):
    s = both(tmp_path, path=public("sample_with_annotations.pgn"))
    assert s["read"] == 306 and s["handed"] == 0


def test_chess960_xfen_selfplay(tmp_path):
    p = selfplay("sf15-960-xfen-s2.pgn")
    for pov in ("white", "mover"):
        (tmp_path / pov).mkdir()
        s = both(tmp_path / pov, path=p, pov=pov)
        assert s["read"] == 4586 and s["rejected"] == {}
        assert s["handed"] == 0


@pytest.mark.slow
def test_selfplay_cut(tmp_path):
    s = both(tmp_path, path=selfplay(f"{CUT}.pgn"), pov="white")
    assert s["read"] == CUT_POSITIONS and s["rejected"] == {} and s["handed"] == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sf15-n5000-s1.pgn", "sf15-n2000-s11.pgn", "sf15-n1500-s21.pgn.zst"])
def test_full_selfplay_sets(tmp_path, name):
    s = both(tmp_path, path=full_selfplay(name), pov="white")
    assert s["rejected"] == {} and s["handed"] == 0


def test_standard_games_compiled(tmp_path):
    text = _game("1. e4 {+0.30/10 0.1s} e5 {-0.20/9} 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 5. O-O Be7 "
                 "6. Re1 b5 7. Bb3 d6 8. c3 O-O 9. h3 1-0")
    run(tmp_path, text, expect_all_compiled=True)
    run(tmp_path, text, name="w", pov="white", expect_all_compiled=True)


# ------------------------------------------------------------------ reject reasons
def test_unknown_result_star_and_odd(tmp_path):
    run(tmp_path, _game("1. e4 e5 2. Nf3 *", result="*"), "a")
    run(tmp_path, _game("1. e4 e5 2. Nf3", result="?"), "b")
    run(tmp_path, _game("1. e4 e5 2. Nf3 0-1", result="*"), "c", expect_all_compiled=True)  # movetext result
    run(tmp_path, "1. e4 e5 2. Nf3 1/2-1/2\n\n", "d", expect_all_compiled=True)  # no tags
    run(tmp_path, _game("1. e4 e5 1-0 0-1 2. Nf3", result="*"), "e", expect_all_compiled=True)


@pytest.mark.parametrize("comment", ["+M", "-.5x", "+1.0", "M/3", "+0.3/ 2", ". 5", "+1.5//3", "-.25"])
def test_bad_cutechess_comments(tmp_path, comment):
    run(tmp_path, _game(f"1. e4 {{{comment}}} e5 {{+0.1/3}} 2. Nf3 {{{comment}}} 1-0"))


@pytest.mark.parametrize("comment", ["[%eval 0.2]", "[%eval #-3]", "[%eval #0]", "[%eval 12.25,18]", "[%eval .5]",
                                     "[%eval 3.]", "[%eval -0.37] [%clk 0:00:10]", "[%eval  0.2]", "[%eval 0.123]",
                                     "[%eval x]", "%eval 3", "[%eval 1.5,]", "[%eval 12345678901]",
                                     "[%eval #+2]", "[%eval #12345678901]", "[%evalx 0.2] [%eval 0.3]",
                                     "[%eval 0.2,15"])
def test_lichess_evals(tmp_path, comment):
    moves = f"1. e4 {{ {comment} }} e5 {{ [%eval 0.1] }} 2. Nf3 {{ {comment} }} Nc6 3. Bb5 {{ +0.5/3 }} a6 1-0"
    run(tmp_path, _game(moves), "m")
    run(tmp_path, _game(moves), "w", pov="white")


def test_eval_numbers(tmp_path):
    moves = ("1. e4 {+0.355/3} e5 {-0.005/2} 2. Nf3 {+M16/3} Nc6 {-M3/1} 3. Bb5 {M2.5/1} a6 {+327.66/3} "
             "4. Ba4 {+327.68/3} Nf6 {0.125/1} 5. O-O {-0.015/1} Be7 {1.2345678901234567/2} 6. d3 {+12/3} 1-0")
    run(tmp_path, _game(moves), "m")
    run(tmp_path, _game(moves), "w", pov="white")


@pytest.mark.parametrize("moves,compiled", [
    ("1. e4 {38/21} e5 {-24/20 15ms} 2. Nf3 {350/19} Nc6 {-M2/18} 3. Bb5 {M1/3} 1-0", True),
    ("1. e4 {+0.38/21} e5 {-M3/20} 2. Nf3 {+M4/19} 1-0", True),
    ("1. e4 {-M3/21} e5 {-24/20} 2. Nf3 {350/19} 1-0", False),       # -M before any dialect
    ("1. e4 {+38/21} e5 {-24/20} 2. Nf3 {+350/19} 1-0", False),      # '+' integers
    ("1. e4 {0.10/3} e5 {12/3} 2. Nf3 {-M3/19} Nc6 {0/1} 1-0", False),  # both dialects, then -M
    ("1. e4 {M0/1} e5 {-M0/1} 2. Nf3 {M99999999999999/1} 1-0", False),
    ("1. e4 {-M3/21 0.5s} e5 {-M2/20 15ms} 2. Nf3 {-M1/19 1.25s, n=4} Nc6 {-M1/2 3ms} 1-0", True),  # time units
    ("1. e4 {-M3/21 0.5} e5 {-M2/20 15 ms} 2. Nf3 {-M1/19 s} 1-0", False),  # no unit: ambiguous
])
def test_c_chess_cli_dialect(tmp_path, moves, compiled):
    """Issue 20 item 1: c-chess-cli's integer centipawns and M<moves> read alike on both paths;
    ambiguous comments go to python-chess's reader, which rejects them with the reason."""
    for pov in ("mover", "white"):
        s = run(tmp_path, _game(moves), f"c-{pov}", pov=pov, expect_all_compiled=compiled)
        if not compiled:
            assert s["handed"] > 0


def test_latin1_bytes(tmp_path):
    """Issue 20 item 4: Latin-1 bytes in tags and comments (PGN's ISO 8859-1) are decoded as
    Latin-1 on both paths (the compiled reader hands such games to python-chess)."""
    game = ('[Event "Montr\xe9al"]\n[White "Jos\xe9"]\n[Result "1-0"]\n\n'
            '1. e4 {+0.30/10 0.1s} e5 {-0.20/9 0.1s} 2. Nf3 {tr\xe8s bien} Nc6 3. Bb5 {\xe9} a6 1-0\n\n')
    s = run(tmp_path, (game.encode("latin-1") + game.encode("utf-8")) * 2, "l1")
    assert s["read"] == 24 and s["rejected"] == {} and s["handed"] == 24  # every game has a non-ASCII byte


def test_numbers_too_long_for_python(tmp_path):
    """An eval number too long for a float (300-odd digits; cutechess and mate forms) is a bad eval
    comment, and a NAG too long for int() makes python-chess's read_game raise (an "unreadable PGN
    game"); the compiled path hands both back, so the paths agree. (Found by a fresh-clone check:
    the first stopped the pack with "cannot convert float infinity to integer", naming no file;
    the compiled path skipped the second, where python-chess rejects the game.)"""
    big = "1" + "0" * 309
    moves = (f"1. e4 {{+{big}/3}} e5 {{{big}/3}} 2. Nf3 {{+M{'9' * 5000}/3}} Nc6 {{-0.20/5}} "
             f"3. Bb5 {{+{'9' * 25}/4}} a6 {{+{'9' * 299}/4}} 4. Ba4 {{+{'9' * 150}.{'9' * 150}/4}} 1-0")
    s = run(tmp_path, _game(moves), "eval")
    # integers with a '+' sign are c-chess-cli-or-cutechess ambiguous (issue 20), unless too long
    assert s["rejected"] == {"eval comment not understood": 4, "ambiguous eval comment": 2}
    lichess = (f"1. e4 {{ [%eval #{'9' * 5000}] }} e5 {{ [%eval #-{'9' * 299}] }} 2. Nf3 {{ [%eval 0.2] }} "
               f"Nc6 {{ [%eval #{'1' * 300},5] }} 3. Bb5 1-0")
    s = run(tmp_path, _game(lichess), "lichess", pov="white")
    assert s["rejected"] == {"eval comment not understood": 2, "score out of int16 range": 1}
    for digits, raises in ((639, False), (640, False), (5000, True)):
        s = run(tmp_path, _game(f"1. d4 {{+0.10/3}} ${'7' * digits} d5 {{-0.1/3}} 2. c4 1-0") + GAME, f"nag{digits}")
        assert ("unreadable PGN game" in s["rejected"]) == raises, s
    s = run(tmp_path, _game("1. d4 $" + "7" * 640 + " d5 1-0"), "nag-handed")
    assert s["handed"] > 0  # handed back to python-chess at NAG_DIGITS digits


def test_illegal_and_ambiguous_moves(tmp_path):
    run(tmp_path, _game("1. e4 e5 2. Ke3 Nf6 1-0"), "illegal")
    run(tmp_path, _game("1. Nf3 d5 2. Nc3 e5 3. Nd4 1-0", fen=None), "ok")
    run(tmp_path, _game("1. d4 e5 2. dxe5 d6 3. Nf3 d5 4. Nbd2 a6 5. e3 a5 6. Nb3 h6 7. Nbd4 1-0"), "disamb")
    # two knights can reach d2: "Nd2" is ambiguous
    run(tmp_path, _game("1. Nd2 a6 2. Nd2 1-0", fen="4k3/8/8/8/8/5N2/8/1N2K3 w - - 0 1"), "ambig")
    # over-disambiguated: file, rank and square
    run(tmp_path, _game("1. Nbd2 a6 2. N2f3 a5 3. Nf3d4 1-0", fen="4k3/p7/8/8/8/5N2/8/1N2K3 w - - 0 1"), "over")
    run(tmp_path, _game("1. e2e4 e7e5 2. g1f3 1-0"), "long")
    run(tmp_path, _game("1. Ng1-f3 Ng8-f6 2. Nb1xc3 1-0"), "lan")


def test_bad_fen_and_variants(tmp_path):
    run(tmp_path, _game("1. e4 1-0", fen="not a fen"), "fen")
    run(tmp_path, _game("1. e4 1-0", fen="8/8/8/8/8/8/8/8 w - - 0 1"), "empty")
    run(tmp_path, _game("1. e4 1-0", variant="Atomic"), "atomic")
    run(tmp_path, _game("1. e4 1-0", variant="Standard"), "std", expect_all_compiled=True)
    run(tmp_path, _game("1. e4 1-0", variant="bogus"), "bogus")
    run(tmp_path, _game("1. e4 1-0", variant="fischerandom"), "fr", expect_all_compiled=True)
    run(tmp_path, _game("1. Kd2 1-0", fen="rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 99999999999999"),
        "counters")


def test_not_pgn_raises_alike(tmp_path):
    assert run(tmp_path, "hello world this is not pgn\n", "np") is None


# ------------------------------------------------------------------ SAN edge cases
def test_promotions(tmp_path):
    fen = "1n2k3/P1P5/8/8/8/8/5p1p/4K1N1 w - - 0 1"
    for i, moves in enumerate(["1. a8=Q Kd7 2. cxb8=N+ Kc7 1-0", "1. a8Q h1=R 2. cxb8n fxg1=q 1-0",
                               "1. a8 h1Q 1-0", "1. a8=K 1-0", "1. c8=Q 1-0", "1. axb8=B Kf7 1-0",
                               "1. a7a8Q Kd7 1-0", "1. a8=P 1-0"]):
        run(tmp_path, _game(moves, fen=fen), f"p{i}")


def test_en_passant(tmp_path):
    run(tmp_path, _game("1. e4 a6 2. e5 d5 3. exd6 e5 4. d7+ Kxd7 1-0"), "ep", expect_all_compiled=True)
    run(tmp_path, _game("1. e4 a6 2. e5 d5 3. exd6e.p. 1-0"), "epnote", expect_all_compiled=True)
    run(tmp_path, _game("1. e4 a6 2. e5 d5 3. a3 c6 4. exd6 1-0"), "late")
    # the en-passant capture would expose the king (pinned along the rank)
    run(tmp_path, _game("1... d5 2. exd6 1-0", fen="8/3p4/8/K3P2r/8/8/8/7k b - - 0 1"), "pinned")
    run(tmp_path, _game("1... d5 2. Kb4 1-0", fen="8/3p4/8/K3P2r/8/8/8/7k b - - 0 1"), "pinned2",
        expect_all_compiled=True)
    # in check from the pawn that just pushed two squares, with a legal en-passant capture
    chk = "4k3/3p4/8/4P3/2K5/8/8/8 b - - 0 1"
    run(tmp_path, _game("1... d5 2. exd6 1-0", fen=chk), "chk", expect_all_compiled=True)
    run(tmp_path, _game("1... d5 2. Kb3 1-0", fen=chk), "chk2", expect_all_compiled=True)
    # the en-passant square is not valid for python-chess (a piece on the pushed pawn's start)
    run(tmp_path, _game("1. exd6 1-0", fen="4k3/3n4/8/3pP3/2K5/8/8/8 w - d6 0 1"), "chk3")


def test_castling(tmp_path):
    run(tmp_path, _game("1. O-O O-O-O 1-0", fen="r3k2r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R w KQkq - 0 1"), "std",
        expect_all_compiled=True)
    run(tmp_path, _game("1. 0-0-0 0-0 1-0", fen="r3k2r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R w KQkq - 0 1"), "zero",
        expect_all_compiled=True)
    # through check (f1 attacked), out of check, into check, without the right
    run(tmp_path, _game("1. O-O 1-0", fen="4k3/8/8/8/8/8/5r2/R3K2R w KQ - 0 1"), "through")
    run(tmp_path, _game("1. O-O-O 1-0", fen="4k3/8/8/8/8/8/4r3/R3K2R w KQ - 0 1"), "check")
    run(tmp_path, _game("1. O-O 1-0", fen="4k3/8/8/8/8/8/6r1/R3K2R w KQ - 0 1"), "into")
    run(tmp_path, _game("1. O-O 1-0", fen="4k3/8/8/8/8/8/8/R3K2R w Q - 0 1"), "noright")
    run(tmp_path, _game("1. Kg1 1-0", fen="4k3/8/8/8/8/8/8/R3K2R w KQ - 0 1"), "kingstep")
    # Chess960: king b1, rooks a1 and h1 (X-FEN KQ), castling both ways, also as Shredder-FEN
    fen = "6kr/8/8/8/8/8/8/RK5R w KQk - 0 1"
    run(tmp_path, _game("1. O-O Kg7 1-0", fen=fen, variant="Chess960"), "960k", expect_all_compiled=True)
    run(tmp_path, _game("1. O-O-O Kg7 1-0", fen=fen, variant="Chess960"), "960q", expect_all_compiled=True)
    run(tmp_path, _game("1. O-O-O O-O 1-0", fen="6kr/8/8/8/8/8/8/RK5R w HAh - 0 1"), "shredder")
    run(tmp_path, _game("1. O-O 1-0", fen="6kr/8/8/8/8/8/6r1/RK5R w KQk - 0 1", variant="Chess960"), "960chk")


def test_pinned_pieces_and_evasions(tmp_path):
    fen = "4k3/8/8/8/1b6/8/3N4/4K2R w K - 0 1"
    run(tmp_path, _game("1. Nf3 1-0", fen=fen), "pin")          # the knight is pinned: illegal
    run(tmp_path, _game("1. Rh2 Kd7 2. Nc4 1-0", fen=fen), "pin2")
    run(tmp_path, _game("1. Kf2 1-0", fen="4k3/8/8/8/8/8/8/r3K3 w - - 0 1"), "ev")  # stays in check: illegal
    run(tmp_path, _game("1. Kd2 1-0", fen="4k3/8/8/8/8/8/8/r3K3 w - - 0 1"), "ev2", expect_all_compiled=True)


def test_null_moves_drops_and_variations(tmp_path):
    run(tmp_path, _game("1. e4 -- 2. d4 1-0"), "null")
    run(tmp_path, _game("1. e4 Z0 2. d4 1-0"), "z0")
    run(tmp_path, _game("1. e4 0000 2. d4 1-0"), "zeros")
    run(tmp_path, _game("1. e4 @@@@ 2. d4 1-0"), "ats")
    run(tmp_path, _game("1. e4 N@f6 2. d4 1-0"), "drop")
    run(tmp_path, _game("1. e4 {+0.1/2} (1. d4 {x} d5) 1... e5 {-0.2/3} (1... c5 2. Nf3) 2. Nf3 1-0"), "var")
    run(tmp_path, _game("( 1. e4 ) 1. d4 ) d5 1-0"), "paren")


# ------------------------------------------------------------------ layout
GAME = _game("1. e4 {+0.30/10 0.1s} e5 {-0.20/9} 2. Nf3 $1 Nc6 !? 3. Bb5 ?? a6 ! 4. Ba4 1-0")


def test_layouts(tmp_path):
    two = GAME + GAME
    cases = {
        "crlf": two.replace("\n", "\r\n"),
        "cr": two.replace("\n", "\r"),
        "bom": "\ufeff" + two,
        "bom2": GAME + "\ufeff" + GAME,
        "noeol": two.rstrip("\n"),
        "noblank": GAME.rstrip("\n") + "\n" + GAME,
        "tags_blank": '[Event "t"]\n\n[Result "1-0"]\n\n1. e4 e5 1-0\n',
        "tags_2blank": '[Event "t"]\n\n\n[Result "1-0"]\n\n1. e4 e5 1-0\n',
        "pct": "% escape\n" + GAME.replace("1. e4", "%skip 1. d4\n1. e4") + "; x\n" + GAME,
        "semicolon": GAME.replace("2. Nf3", "2. Nf3 ; Nc6 rest\n; line\n"),
        "multiline_comment": GAME.replace("{+0.30/10 0.1s}", "{ +0.30/10\n\n 0.1s }").replace("{-0.20/9}",
                                                                                          "{\n-0.20/9 }"),
        "comment_then_pct": GAME.replace("{+0.30/10 0.1s}", "{+0.30/10 0.1s}%x\n"),
        "comment_first": GAME.replace("1. e4", "{start} 1. e4"),
        "two_comments": GAME.replace("{-0.20/9}", "{-0.20/9} {} {book} {+0.5/3}"),
        "empty_comment": GAME.replace("{-0.20/9}", "{} { } {  }"),
        "unterminated": GAME + "[Result \"1-0\"]\n\n1. e4 {never closed\n",
        "spaces": GAME.replace("\n\n1.", "\n   \n1.").replace("1-0\n\n", "1-0\n \t\n"),
        "tabs": GAME.replace(" ", "\t"),
        "odd_tags": '[Result  "0-1"] \n[FEN"x"]\n[Result "1-0"] "x"]\n[ Result "0-1"]\n\n1. e4 e5 *\n',
        "tag_value_quotes": '[Result "1-0"]\n[Event "a "b" c"]\n\n1. e4 e5\n',
        "latin1": GAME.replace("{-0.20/9}", "{caf\u00e9}"),
        "formfeed": GAME + "\x0c\n" + GAME,
        "nul": GAME.replace("Nc6", "N\x00c6"),
        "nags": GAME.replace("$1", "$ $12 $"),
        "move_numbers": GAME.replace("2. Nf3", "2.Nf3").replace("3. Bb5", "3...Bb5"),
        "only_tags": '[Event "a"]\n[Result "1-0"]\n\n\n[Event "b"]\n[Result "0-1"]\n\n1. d4 d5 0-1\n',
        "leading_blank": "\n\n  \n" + GAME,
        "check_marks": GAME.replace("Nc6", "Nc6+").replace("a6", "a6#"),
        "caps": GAME.replace("e5", "E5"),
    }
    for name, text in cases.items():
        run(tmp_path, text, name)


def test_layouts_compiled(tmp_path):
    """The ordinary layouts stay on the compiled path."""
    cases = {"crlf": GAME.replace("\n", "\r\n"), "bom": "\ufeff" + GAME, "cr": GAME.replace("\n", "\r"),
             "pct": "% escape\n" + GAME, "ml": GAME.replace("{+0.30/10 0.1s}", "{ +0.30/10\n 0.1s }")}
    for name, text in cases.items():
        run(tmp_path, text, name, expect_all_compiled=True)


def test_small_chunks(tmp_path, monkeypatch):
    """Games cut at every chunk boundary (including between CR and LF) read alike."""
    from nnue.pipeline.formats import pgn

    text = (GAME + GAME.replace("\n", "\r\n") + GAME.replace("{+0.30/10 0.1s}", "{ +0.30/10\n 0.1s }")) * 2
    for chunk in (1, 7, 64):
        monkeypatch.setattr(pgn, "CHUNK", chunk)
        run(tmp_path, text, f"c{chunk}")


def test_row_buffer_full(tmp_path, monkeypatch):
    from nnue.pipeline.formats import pgn

    monkeypatch.setattr(pgn, "CAP", 10)
    long_game = _game(" ".join(f"{i}. Nf3 Nf6 {i}... Ng1 Ng8" for i in range(1, 8)) + " 1/2-1/2", result="1/2-1/2")
    run(tmp_path, GAME * 3 + long_game + GAME, "full")


# ------------------------------------------------------------------ mutations
def _sample_games(n: int) -> str:
    p = selfplay("sf15-960-xfen-s2.pgn")
    text = p.read_text()
    games = text.split("\n\n[Event")
    return games[0] + "".join("\n\n[Event" + g for g in games[1:n])


ALPHABET = b" \n\r\t{}()[];%$!?+-#=x.0123456789abcdefghNBRQKOPZ@M/\"*"


def mutate(data: bytes, rng: random.Random, k: int) -> bytes:
    b = bytearray(data)
    for _ in range(k):
        i = rng.randrange(len(b) + 1)
        op = rng.random()
        if op < 0.4 and i < len(b):
            b[i] = rng.choice(ALPHABET)
        elif op < 0.7:
            b[i:i] = bytes([rng.choice(ALPHABET)])
        elif i < len(b):
            del b[i:i + rng.randint(1, 8)]
    return bytes(b)


@pytest.mark.parametrize("seed", range(3))
def test_mutated_games(tmp_path, seed):
    rng = random.Random(seed)
    base = _sample_games(3).encode()
    for i in range(12):
        run(tmp_path, mutate(base, rng, rng.randint(1, 6)), f"m{seed}-{i}")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(20))
def test_mutated_games_many(tmp_path, seed):
    rng = random.Random(1000 + seed)
    base = _sample_games(6).encode()
    for i in range(50):
        run(tmp_path, mutate(base, rng, rng.randint(1, 20)), f"m{seed}-{i}")


def test_common_games_stay_compiled():
    """Nothing of the annotated public sample goes to python-chess, and the compiled path yields
    runs of rows (not one Record per position)."""
    with open_text(public("sample_with_annotations.pgn")) as s:
        items = list(get_format("pgn").read(s, ReaderOptions()))
    assert items and all(isinstance(i, PackedRows) for i in items)
