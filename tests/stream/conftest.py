"""The stream's tests run on both part layouts (nnue.pipeline.parts): the datasets below
override the session ones of tests/conftest.py, once chained (what ``nnue pack`` writes) and
once flat (datasets packed before chains)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.samples import CUT, SAMPLE, selfplay


@pytest.fixture(scope="session", params=["chained", "flat"])
def layout(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def sample_dataset(tmp_path_factory, layout) -> Path:
    """The bundled sample (4,015 positions, 38 games) packed in ``layout``."""
    from nnue.pipeline.pack import pack

    out = tmp_path_factory.mktemp(f"sample-{layout}") / "dataset"
    pack([SAMPLE], out, progress=False, layout=layout)
    return out


@pytest.fixture(scope="session")
def selfplay_dataset(tmp_path_factory, layout) -> Path:
    """The self-play cut (12,678 positions, 112 games) packed in ``layout``."""
    from nnue.pipeline.pack import pack

    out = tmp_path_factory.mktemp(f"selfplay-{layout}") / "dataset"
    pack([selfplay(f"{CUT}.plain")], out, progress=False, layout=layout)
    return out
