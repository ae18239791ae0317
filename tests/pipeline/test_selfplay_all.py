"""Slow: every self-play file packs with conserved counts (issue 2's gate): the repo's files
(tests/data/selfplay, always) and the full sets of ../shared/data/selfplay (where present)."""
from __future__ import annotations

import pytest

from nnue.pipeline.formats import ReaderOptions
from nnue.pipeline.pack import pack
from tests.samples import CUT, CUT_POSITIONS, XFEN960, XFEN960_POSITIONS, full_selfplay, selfplay

# positions per set, from ../shared/data/README.md
EXPECTED = {"sf15-n5000-s1": 43_919, "sf15-n2000-s11": 224_965, "sf15-960-xfen-s2": 4_586,
            "sf15-n1500-s21": 552_247}
FULL = [f"{s}.{ext}" for s in ("sf15-n5000-s1", "sf15-n2000-s11", "sf15-960-xfen-s2") for ext in ("plain", "txt", "pgn")]
FULL += [f"sf15-n1500-s21.{ext}.zst" for ext in ("plain", "txt", "pgn")]


def _conserves(path, tmp_path, n):
    s = pack([path], tmp_path / "ds", options=ReaderOptions(pgn_pov="white"), progress=False)
    assert s["read"] == s["packed"] + sum(s["rejected"].values())
    assert s["packed"] == n and not s["rejected"]


@pytest.mark.slow
@pytest.mark.parametrize("name", [f"{s}.{ext}" for s in (CUT, XFEN960) for ext in ("plain", "txt", "pgn")])
def test_every_repo_selfplay_file_conserves_counts(name, tmp_path):
    _conserves(selfplay(name), tmp_path, CUT_POSITIONS if name.startswith(CUT) else XFEN960_POSITIONS)


@pytest.mark.slow
@pytest.mark.parametrize("name", FULL)
def test_every_full_selfplay_file_conserves_counts(name, tmp_path):
    _conserves(full_selfplay(name), tmp_path, EXPECTED[name.split(".")[0]])
