"""nnue convert's compiled writers (pipeline/compiled/dump.py) against the python-chess writers.

Each test packs real or generated data, converts it to every target with ``fast=True`` (compiled,
python-chess only for Chess960 castling rights) and ``fast=False`` (python-chess for every row,
the oracle), and compares the output bytes.
"""
from __future__ import annotations

import random

import chess
import pytest

from nnue.pipeline.convert import TARGETS as ALL_TARGETS
from nnue.pipeline.convert import convert
from nnue.pipeline.formats import get_format
from nnue.pipeline.pack import pack
from tests.samples import CUT, public, selfplay

# the writers of one row at a time (the chained writers, binpack and viriformat, have no
# python-chess oracle: tests/pipeline/test_chained.py reads them back)
TARGETS = tuple(t for t in ALL_TARGETS if get_format(t).write_stream is None)


def _both(ds, tmp_path, to):
    a = convert(ds, to, tmp_path / f"fast.{to}", fast=True)
    b = convert(ds, to, tmp_path / f"slow.{to}", fast=False)
    assert a["rows"] == b["rows"] and a["ply_unknown"] == b["ply_unknown"]
    assert (tmp_path / f"fast.{to}").read_bytes() == (tmp_path / f"slow.{to}").read_bytes(), to
    assert b["python_chess_rows"] == b["rows"]
    return a


def _random_plain(path, games: int, seed: int, chess960: bool) -> None:
    """Random legal games written as .plain: every position with the move played (castling as
    king takes rook in Chess960, as Stockfish writes it), a varied score (some VALUE_NONE, some
    mate scores), ply and result. Random play reaches en-passant squares with and without a legal
    capture, promotions, castling both ways and positions with partial castling rights."""
    rng = random.Random(seed)
    out = []
    for g in range(games):
        board = chess.Board.from_chess960_pos(rng.randrange(960)) if chess960 else chess.Board()
        result = rng.choice((-1, 0, 1))
        ply = 0
        while not board.is_game_over() and ply < 160:
            moves = list(board.legal_moves)
            promos = [m for m in moves if m.promotion]
            castles = [m for m in moves if board.is_castling(m)]
            move = rng.choice(promos or castles or moves) if rng.random() < 0.5 else rng.choice(moves)
            score = rng.choice((32002, rng.randrange(-600, 600), 31990, -31980, rng.randrange(-3000, 3000)))
            uci = board.uci(move, chess960=chess960)
            out.append(f"fen {board.fen()}\nmove {uci}\nscore {score}\nply {ply}\n"
                       f"result {result if ply % 2 == 0 else -result}\ne\n")
            board.push(move)
            ply += 1
    path.write_text("".join(out))


@pytest.mark.parametrize("chess960", [False, True])
def test_random_games_every_target(tmp_path, chess960):
    src = tmp_path / "games.plain"
    _random_plain(src, 40, seed=11 + chess960, chess960=chess960)
    s = pack([src], tmp_path / "ds", progress=False)
    assert s["packed"] > 3000
    for to in TARGETS:
        r = _both(tmp_path / "ds", tmp_path, to)
        if to in ("plain", "bullet-text"):
            # Chess960 castling rights are written by python-chess; standard ones never are
            assert (r["python_chess_rows"] > 0) == chess960, r
        else:
            assert r["python_chess_rows"] == 0


@pytest.mark.parametrize("name", [f"selfplay/{CUT}.plain", "selfplay/sf15-960-xfen-s2.plain",
                                  "public/samplefen1000.epd", "public/test-vf.bin"])
def test_samples_every_target(tmp_path, name):
    where, file = name.split("/")
    pack([selfplay(file) if where == "selfplay" else public(file)], tmp_path / "ds", progress=False)
    for to in TARGETS:
        _both(tmp_path / "ds", tmp_path, to)


def test_several_parts_in_dataset_order(tmp_path):
    pack([selfplay("sf15-960-xfen-s2.txt"), public("samplefen.epd")], tmp_path / "ds",
         progress=False)
    for to in ("plain", "bullet-text"):
        _both(tmp_path / "ds", tmp_path, to)


@pytest.mark.slow
def test_small_binpack_every_target(tmp_path):
    pack([public("small.binpack")], tmp_path / "ds", progress=False)
    for to in TARGETS:
        _both(tmp_path / "ds", tmp_path, to)


def test_dataset_in_byte_ranges_converts_as_one_part(tmp_path):
    """A file packed in byte ranges (several parts in one manifest entry) converts to the same
    bytes as the same file packed whole."""
    src = selfplay(f"{CUT}.plain")
    pack([src], tmp_path / "whole", progress=False, workers=1)
    pack([src], tmp_path / "ranged", progress=False, workers=2, range_mb=0.2)  # 6 ranges of the 1.2 MB cut
    from nnue.pipeline import manifest as mf

    (entry,) = mf.load(tmp_path / "ranged")["files"].values()
    assert len(mf.entry_parts(entry)) > 3
    for to in TARGETS:
        convert(tmp_path / "whole", to, tmp_path / f"w.{to}")
        convert(tmp_path / "ranged", to, tmp_path / f"r.{to}")
        assert (tmp_path / f"w.{to}").read_bytes() == (tmp_path / f"r.{to}").read_bytes(), to
