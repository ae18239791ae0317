"""nnue convert: write-back to plain, bullet-text, bulletformat, marlinformat, and round trips."""
from __future__ import annotations

import json
import subprocess
import sys

import chess
import pytest

from nnue.pipeline.convert import convert
from nnue.pipeline.formats import ReaderOptions
from nnue.pipeline.pack import pack
from nnue.pipeline.parts import read_part
from tests.samples import SAMPLE, public, selfplay


def _table(ds):
    return read_part(next(ds.glob("part-*.parquet")))


def test_plain_round_trip_is_identical_after_normalisation(sample_dataset, tmp_path):
    r = convert(sample_dataset, "plain", tmp_path / "out.plain")
    assert r["rows"] == 4015
    # the sample's FENs are already what python-chess writes, so the text comes back unchanged
    assert (tmp_path / "out.plain").read_text() == SAMPLE.read_text()


def test_plain_round_trip_chess960(tmp_path):
    src = selfplay("sf15-960-xfen-s2.plain")
    pack([src], tmp_path / "ds", progress=False)
    convert(tmp_path / "ds", "plain", tmp_path / "out.plain")
    pack([tmp_path / "out.plain"], tmp_path / "ds2", progress=False)
    a, b = _table(tmp_path / "ds"), _table(tmp_path / "ds2")
    for c in ("board", "score", "result", "ply", "best_move", "best_move_is_capture", "in_check"):
        assert a[c].equals(b[c]), c
    # the same text (issue 15 item 6): a castling move in a position that also reads as standard
    # chess (king on e1/e8, rooks in the corners) stays king-takes-rook, as the input wrote it
    assert (tmp_path / "out.plain").read_text() == src.read_text()


def test_marlinformat_round_trip_is_byte_identical(sample_dataset, tmp_path):
    convert(sample_dataset, "marlinformat", tmp_path / "a.marlin")
    pack([tmp_path / "a.marlin"], tmp_path / "ds", progress=False)
    convert(tmp_path / "ds", "marlinformat", tmp_path / "b.marlin")
    assert (tmp_path / "a.marlin").read_bytes() == (tmp_path / "b.marlin").read_bytes()
    assert (tmp_path / "a.marlin").stat().st_size == 32 * 4015
    a, b = _table(sample_dataset), _table(tmp_path / "ds")
    for c in ("board", "score", "result", "ply"):
        assert a[c].equals(b[c]), c


def test_bullet_text_round_trip(sample_dataset, tmp_path):
    convert(sample_dataset, "bullet-text", tmp_path / "out.txt")
    first = (tmp_path / "out.txt").read_text().splitlines()[1]
    # black to move, stm score 6 and draw -> white POV -6 and 0.5
    assert first.endswith("| -6 | 0.5") and " b " in first
    pack([tmp_path / "out.txt"], tmp_path / "ds", progress=False)
    a, b = _table(sample_dataset), _table(tmp_path / "ds")
    for c in ("board", "score", "result", "ply"):
        assert a[c].equals(b[c]), c


def test_bulletformat_round_trip_keeps_stm_view(sample_dataset, tmp_path):
    convert(sample_dataset, "bulletformat", tmp_path / "out.bf")
    data = (tmp_path / "out.bf").read_bytes()
    assert len(data) == 32 * 4015
    pack([tmp_path / "out.bf"], tmp_path / "ds", progress=False)
    a, b = _table(sample_dataset), _table(tmp_path / "ds")
    assert a["score"].equals(b["score"]) and a["result"].equals(b["result"])
    # the bulletformat view is the position seen by the side to move, with castling/ep dropped
    for pa, pb in list(zip(a["board"].to_pylist(), b["board"].to_pylist()))[:500]:
        ba = chess.Board(_fen(pa))
        bb = chess.Board(_fen(pb))
        view = ba if ba.turn == chess.WHITE else ba.mirror()
        assert bb.board_fen() == view.board_fen() and bb.turn == chess.WHITE


def _fen(packed):
    from nnue.pipeline.board import unpack_fen

    return unpack_fen(packed)


def test_cli_convert_and_errors(sample_dataset, tmp_path):
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "convert", str(sample_dataset), "--to", "plain",
                        "-o", str(tmp_path / "x.plain"), "--json"], capture_output=True, text=True)
    assert r.returncode == 0 and json.loads(r.stdout)["rows"] == 4015
    r = subprocess.run([sys.executable, "-m", "nnue.cli", "convert", str(tmp_path), "--to", "plain",
                        "-o", str(tmp_path / "y.plain")], capture_output=True, text=True)
    assert r.returncode == 2 and "manifest.json" in r.stderr and not (tmp_path / "y.plain").exists()
    with pytest.raises(ValueError):
        convert(sample_dataset, "pgn", tmp_path / "z")


def test_pgn_rows_without_scores_write_value_none(tmp_path):
    pack([public("sample_with_annotations.pgn")], tmp_path / "ds", options=ReaderOptions(),
         progress=False)
    convert(tmp_path / "ds", "plain", tmp_path / "out.plain")
    text = (tmp_path / "out.plain").read_text()
    assert "score 32002" in text  # book moves and moves without comment have no score
    pack([tmp_path / "out.plain"], tmp_path / "ds2", progress=False)
    assert _table(tmp_path / "ds")["flags"].equals(_table(tmp_path / "ds2")["flags"])
