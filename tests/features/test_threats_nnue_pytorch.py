"""The SFNNv16 inputs against nnue-pytorch's own C++ data loader, live, where it is built (it is
found through ``NNUE_PYTORCH_LOADER``, ``$NPA/src`` or ``../npa/src``: tests/features/npt_loader.py);
without it these skip with the reason, and test_threat_sets.py checks the same lists through the
fixture that loader wrote."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from nnue.pipeline.board import pack_fen
from nnue.pipeline.features import get_feature_set
from tests.features import npt_loader
from tests.features.test_threat_sets import MANY_THREATS, white_black
from tests.samples import full_selfplay


@pytest.fixture(scope="module")
def loader():
    path = npt_loader.loader_path()
    if path is None:
        pytest.skip("nnue-pytorch's loader (libtraining_data_loader.so) not found: set NNUE_PYTORCH_LOADER "
                    "(built from nnue-pytorch's data_loader/cpp) or NPA")
    return npt_loader.load(path)


def _compare(lib, fens: list[str]) -> int:
    """Our lists (torch and compiled) against the loader's, as sorted lists, per perspective;
    returns the number of positions compared."""
    boards = torch.from_numpy(np.frombuffer(b"".join(pack_fen(f) for f in fens), dtype=np.uint8).reshape(-1, 32).copy())
    theirs = npt_loader.loader_lists(lib, fens)
    fs = get_feature_set("sfnnv16")
    for enc in (fs.encode_numba, fs.encode):
        ours = white_black(fens, *enc(boards))
        for f, (w, b), (tw, tb) in zip(fens, ours, theirs):
            assert sorted(w.tolist()) == sorted(tw.tolist()), ("white", f)
            assert sorted(b.tolist()) == sorted(tb.tolist()), ("black", f)
    return len(fens)


def test_fixture_is_what_the_loader_gives(loader):
    fens = npt_loader.fixture_fens()
    dig, cnt = npt_loader.summarise(npt_loader.loader_lists(loader, fens))
    fix = npt_loader.read_fixture()
    assert np.array_equal(dig, fix["digest"]) and np.array_equal(cnt, fix["counts"])


def test_loader_lists_equal_ours(loader):
    """Exact lists (not digests) on every 4th fixture position and a board with 137 threats."""
    assert _compare(loader, npt_loader.fixture_fens()[::4] + [MANY_THREATS]) > 4000


@pytest.mark.slow
@pytest.mark.parametrize("name", ["sf15-n2000-s11.plain", "sf15-n5000-s1.plain", "sf15-960-xfen-s2.plain"])
def test_loader_lists_equal_ours_on_the_full_selfplay(loader, name):
    """The full self-play sets (../shared/data/selfplay, not shipped), every position."""
    with full_selfplay(name).open() as fh:
        fens = [line[4:].strip() for line in fh if line.startswith("fen ")]
    for start in range(0, len(fens), 50_000):
        _compare(loader, fens[start:start + 50_000])
