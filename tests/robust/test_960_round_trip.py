"""Issue 15 item 6: .plain -> dataset -> .plain gives the same text for Chess960 castling:
the input's convention (king takes rook, e1a1, or the king's two-square step, e1c1) is recorded
per input in the manifest and written back."""
from __future__ import annotations

import pytest

from nnue.pipeline import manifest as mf
from nnue.pipeline.convert import convert
from nnue.pipeline.pack import pack

STD_LOOKING = "r3k2r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R w KQkq - 0 1"
BLACK = "r3k2r/pppppppp/8/8/8/8/PPPPPPPP/R3K2R b KQkq - 0 1"


def _plain(moves):
    return "".join(f"fen {fen}\nmove {m}\nscore 10\nply {i}\nresult 0\ne\n"
                   for i, (fen, m) in enumerate(moves))


@pytest.mark.parametrize("moves,convention", [
    ([(STD_LOOKING, "e1a1"), (BLACK, "e8h8")], "king-takes-rook"),
    ([(STD_LOOKING, "e1c1"), (BLACK, "e8g8")], "king-two-squares"),
])
def test_castling_convention_round_trips(tmp_path, moves, convention):
    src = tmp_path / "a.plain"
    src.write_text(_plain(moves))
    pack([src], tmp_path / "ds", progress=False)
    entry = next(iter(mf.load(tmp_path / "ds")["files"].values()))
    assert entry["castling"] == convention
    convert(tmp_path / "ds", "plain", tmp_path / "out.plain")
    assert (tmp_path / "out.plain").read_text() == src.read_text()


def test_no_castling_no_convention(tmp_path):
    src = tmp_path / "a.plain"
    src.write_text(_plain([(STD_LOOKING, "e2e4")]))
    pack([src], tmp_path / "ds", progress=False)
    assert next(iter(mf.load(tmp_path / "ds")["files"].values())).get("castling") is None
