"""Slow: every file of ../shared/data/selfplay/ packs with conserved counts (issue 2's gate)."""
from __future__ import annotations

from pathlib import Path

import pytest

from nnue.pipeline.formats import ReaderOptions
from nnue.pipeline.pack import pack

SELFPLAY = Path(__file__).resolve().parents[3] / "shared" / "data" / "selfplay"
# positions per set, from ../shared/data/README.md
EXPECTED = {"sf15-n5000-s1": 43_919, "sf15-n2000-s11": 224_965, "sf15-960-xfen-s2": 4_586,
            "sf15-n1500-s21": 552_247}


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(SELFPLAY.glob("*")) if SELFPLAY.exists() else [],
                         ids=lambda p: p.name)
def test_every_selfplay_file_conserves_counts(path, tmp_path):
    s = pack([path], tmp_path / "ds", options=ReaderOptions(pgn_pov="white"), progress=False)
    assert s["read"] == s["packed"] + sum(s["rejected"].values())
    assert s["packed"] == EXPECTED[path.name.split(".")[0]] and not s["rejected"]
