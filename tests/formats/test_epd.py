"""Labelled EPD reader on the public samples (zurichess ``c9 "1-0";`` and Ethereal ``[1.0] eval``)
and on small hand-written lines. Golden values from ../shared/data/public/SOURCES.md."""
from __future__ import annotations

import io
from collections import Counter

import chess
import pytest

from nnue.pipeline.formats import FormatError, ReaderOptions, Record, Reject, get_format
from nnue.pipeline.pack import pack
from nnue.pipeline.schema import FLAG_PLY_UNKNOWN, FLAG_SCORE_NONE
from nnue.pipeline.parts import read_part
from tests.formats.formats_testlib import check_finished, public


def read_epd(text: str) -> list[Record | Reject]:
    return list(get_format("epd").read(io.StringIO(text), ReaderOptions(fast=False)))


def read_epd_file(name: str) -> list[Record | Reject]:
    with open(public(name)) as f:
        return list(get_format("epd").read(f, ReaderOptions(fast=False)))


def white_result(r: Record) -> int:
    return r.result if r.fen.split()[1] == "w" else -r.result


def test_zurichess_1000_result_counts_and_upstream_example():
    items = read_epd_file("samplefen1000.epd")
    assert len(items) == 1000 and all(isinstance(r, Record) for r in items)
    assert Counter(white_result(r) for r in items) == {1: 378, -1: 364, 0: 258}
    assert all(r.score is None and r.ply is None and r.move is None for r in items)
    assert all(r.fen.endswith(" 0 1") for r in items)  # no counters: default 0 1
    (ex,) = [r for r in items if r.fen.startswith("r5k1/1N3pp1/1ppb3p/3p4/1p1P4/P2P2PP/4QP2/R5K1 b - -")]
    assert ex.result == -1  # white wins, black to move
    assert ex.location == "line 76"


def test_zurichess_100_is_the_head_of_the_1000():
    a = read_epd_file("samplefen.epd")
    b = read_epd_file("samplefen1000.epd")[:100]
    assert [(r.fen, r.result) for r in a] == [(r.fen, r.result) for r in b]


def test_ethereal_counts_upstream_examples_and_stm_eval():
    items = read_epd_file("sample_ethereal_fen.epd")
    assert len(items) == 100 and all(isinstance(r, Record) for r in items)
    assert Counter(white_result(r) for r in items) == {1: 40, 0: 30, -1: 30}
    by_placement = {r.fen.split(" ")[0] + " " + r.fen.split(" ")[1]: r for r in items}
    a = by_placement["8/5p2/3BpP2/2K1Pk2/7p/3N1n1P/8/8 b"]
    b = by_placement["2k2r2/p7/1pp1Rn1p/5Pp1/P7/1P6/2K4P/5R2 b"]
    c = by_placement["3r1rk1/4qp1p/1p1pp1p1/p1pPb3/2P1b3/PPB1P2P/3QBPP1/2RR2K1 w"]
    # [1.0] with black to move: stm lost; the eval on the line is already side-to-move POV
    assert (a.result, a.score, a.ply, a.fen) == (-1, 308, 139, "8/5p2/3BpP2/2K1Pk2/7p/3N1n1P/8/8 b - - 6 70")
    assert (b.result, b.score, b.ply) == (0, -217, 67)
    assert (c.result, c.score, c.ply) == (-1, -36, 44)
    first = items[0]
    assert (first.fen, first.score, first.result) == ("8/2N2kp1/5b1p/1P6/3p4/4P1P1/5K1P/8 b - - 0 38", -154, -1)


@pytest.mark.parametrize("name,n", [("samplefen1000.epd", 1000), ("sample_ethereal_fen.epd", 100),
                                    ("samplefen.epd", 100)])
def test_epd_samples_pack_without_rejects(tmp_path, name, n):
    path = public(name)
    summary = pack([path], tmp_path / "ds", progress=False)
    assert summary["files"][0]["format"] == "epd"
    rejects = check_finished(summary, tmp_path / "ds", path)
    assert (summary["read"], summary["packed"], rejects) == (n, n, [])
    t = read_part(tmp_path / "ds" / summary["files"][0]["part"]).to_pydict()
    if name.startswith("samplefen"):
        assert all(f & FLAG_PLY_UNKNOWN and f & FLAG_SCORE_NONE for f in t["flags"])
    else:
        assert not any(f & (FLAG_PLY_UNKNOWN | FLAG_SCORE_NONE) for f in t["flags"])


def test_epd_opcodes_give_counters():
    (r,) = read_epd('4k3/8/8/8/8/8/8/4K3 b - - hmvc 7; fmvn 31; c9 "0-1";\n')
    assert (r.fen, r.result, r.ply) == ("4k3/8/8/8/8/8/8/4K3 b - - 7 31", 1, 61)


def test_epd_result_tokens_and_bad_lines():
    text = ("# comment\n\n"
            '4k3/8/8/8/8/8/8/4K3 w - - c9 "1/2-1/2";\n'
            "4k3/8/8/8/8/8/8/4K3 w - - [0.5]\n"
            "4k3/8/8/8/8/8/8/4K3 w - - [2.0]\n"
            "4k3/8/8/8/8/8/8/4K3 w -\n"
            "4k3/8/8/8/8/8/8/4K3 w - - hmvc x; c9 \"1-0\";\n")
    a, b, c, d, e = read_epd(text)
    assert (a.result, b.result) == (0, 0)
    assert (a.location, b.location) == ("line 3", "line 4")
    assert isinstance(c, Reject) and c.location == "line 5" and c.reason == "result out of range"
    assert isinstance(d, Reject) and d.location == "line 6" and d.reason == "bad FEN"
    assert isinstance(e, Reject) and e.location == "line 7" and e.reason == "bad FEN"


def test_epd_wrong_first_line_is_a_format_error():
    with pytest.raises(FormatError, match="line 1"):
        read_epd("fen rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1\nmove e2e4\n")


def test_epd_positions_are_legal_boards():
    for r in read_epd_file("samplefen.epd"):
        assert chess.Board(r.fen).is_valid()
