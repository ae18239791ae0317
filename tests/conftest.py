"""Shared fixtures: locations of sample data and small packed datasets built once per session."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
SAMPLE = REPO / "data" / "sample" / "sf15-n5000-s1-sample.plain"


def shared_file(rel: str) -> Path:
    p = SHARED / rel
    if not p.exists():
        pytest.skip(f"shared sample data {p} not present")
    return p


@pytest.fixture(scope="session")
def sample_dataset(tmp_path_factory) -> Path:
    """The bundled sample packed once: 4,015 positions, 38 games."""
    from nnue.pipeline.pack import pack

    out = tmp_path_factory.mktemp("sample") / "dataset"
    pack([SAMPLE], out, progress=False)
    return out


@pytest.fixture(scope="session")
def selfplay_dataset(tmp_path_factory) -> Path:
    """sf15-n5000-s1.plain (43,919 positions, 400 games) packed once."""
    from nnue.pipeline.pack import pack

    out = tmp_path_factory.mktemp("selfplay") / "dataset"
    pack([shared_file("selfplay/sf15-n5000-s1.plain")], out, progress=False)
    return out
