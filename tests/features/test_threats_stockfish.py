"""The SFNNv16 inputs against Stockfish's own feature code (src/nnue/features at master 762dd1da, SF
19's architecture), through tests/c/sf_features.cpp built against a Stockfish source tree by
``scripts/build_sf_features.sh`` (found through ``NNUE_SF_FEATURES``, else the script's default
output in the cache folder); without it the test skips with the reason."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.features import npt_loader


def sf_features_path() -> Path | None:
    env = os.environ.get("NNUE_SF_FEATURES")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nnue-forge" / "sf19-features" / "sf_features"
    p = Path(env) if env else cache
    return p if p.is_file() and os.access(p, os.X_OK) else None


def sf_lists(exe: Path, fens: list[str], chess960: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    out = subprocess.run([str(exe)] + (["960"] if chess960 else []), input="".join(f + "\n" for f in fens),
                         capture_output=True, text=True, check=True, timeout=600).stdout.splitlines()
    assert len(out) == len(fens) and "error" not in out
    res = []
    for line in out:
        w, _, b = line.partition("|")
        res.append((np.array(w.split(), dtype=np.int64), np.array(b.split(), dtype=np.int64)))
    return res


def test_stockfish_gives_the_fixture():
    """Stockfish's lists equal nnue-pytorch's (the fixture, which our encoders and C reference
    match in test_threat_sets.py) on all 17,268 positions: the two sources agree."""
    exe = sf_features_path()
    if exe is None:
        pytest.skip("Stockfish's feature harness not built: bash scripts/build_sf_features.sh STOCKFISH_SRC "
                    "(or set NNUE_SF_FEATURES)")
    fens = npt_loader.fixture_fens()
    games = len(fens) - len(npt_loader.FIXTURE_EXTRA)
    first960 = games - 4586  # the Chess960 set is the last shipped file: X-FEN castling rights
    lists = (sf_lists(exe, fens[:first960], False) + sf_lists(exe, fens[first960:games], True)
             + sf_lists(exe, fens[games:], False))
    dig, cnt = npt_loader.summarise(lists)
    fix = npt_loader.read_fixture()
    bad = np.nonzero((dig != fix["digest"]).any(1))[0]
    assert bad.size == 0, f"{bad.size} positions differ, first {fens[bad[0]]}"
    assert np.array_equal(cnt, fix["counts"])
