"""Fixtures for tests/formats."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def warm_compiled():
    """Compile (or load from numba's cache) the compiled decoders once per session, before any
    test's own time limit starts (test_fuzz.py fails a test that runs past 60 s)."""
    import numpy as np

    from nnue.pipeline.compiled import binpack as cb
    from nnue.pipeline.compiled import boards

    b = cb.buffers(cb.CAP)
    cb.decode_chains(np.zeros(40, np.uint8), 0, 40, *(b[k] for k in cb._FIELDS))
    boards.check_boards(np.zeros((1, 32), np.uint8))
