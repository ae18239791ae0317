"""The compiled position-key hash of content-derived game ids equals its NumPy definition."""
from __future__ import annotations

import numpy as np

from nnue.pipeline.formats._binary import splitmix64
from nnue.pipeline.pack import DEDUP_KEY_BYTES, _key_hashes


def _numpy_key_hashes(boards: np.ndarray) -> np.ndarray:
    b = np.array(boards, dtype=np.uint8, copy=True).reshape(-1, 32)
    b[:, DEDUP_KEY_BYTES:] = 0
    w = b.view("<u8")
    with np.errstate(over="ignore"):
        return splitmix64(splitmix64(splitmix64(w[:, 0]) ^ w[:, 1]) ^ w[:, 2]) ^ w[:, 3]


def test_compiled_key_hashes_equal_numpy_definition():
    rng = np.random.default_rng(7)
    boards = rng.integers(0, 256, (4099, 32), dtype=np.uint8)
    boards[:7] = 0
    boards[7:14] = 255
    assert np.array_equal(_key_hashes(boards), _numpy_key_hashes(boards))
    # bytes 25..31 (counters, eval, WDL) never change a key; every key byte does
    a = boards[20:21].copy()
    b = a.copy()
    b[0, 25:] ^= 0x5A
    assert _key_hashes(a)[0] == _key_hashes(b)[0]
    for i in range(DEDUP_KEY_BYTES):
        c = a.copy()
        c[0, i] ^= 1
        assert _key_hashes(c)[0] != _key_hashes(a)[0], i
    # non-contiguous and list-of-rows inputs, and no rows
    assert np.array_equal(_key_hashes(boards[::3]), _numpy_key_hashes(boards[::3]))
    assert _key_hashes(boards[:0]).shape == (0,)
