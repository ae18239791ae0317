"""pipeline/compiled/boards.py against pipeline/fastcheck.py (the NumPy reference): identical
reason, slow, in_check, piece_count and black on real boards, broken ones and random bytes."""
from __future__ import annotations

import numpy as np
import pytest

from formats_testlib import public
from nnue.pipeline import fastcheck
from nnue.pipeline.compiled import boards as cboards


def same(boards: np.ndarray):
    a, b = fastcheck.check_boards(boards), cboards.check_boards(boards)
    for name in ("reason", "slow", "in_check", "piece_count", "black"):
        x, y = getattr(a, name), getattr(b, name)
        bad = np.nonzero(x != y)[0]
        assert len(bad) == 0, (name, bad[:5], x[bad[:5]], y[bad[:5]], boards[bad[:1]].tobytes().hex())
    return a


@pytest.fixture(scope="module")
def real() -> np.ndarray:
    data = np.frombuffer(public("batch.bf").read_bytes(), np.uint8).reshape(-1, 32).copy()
    boards = np.zeros_like(data)  # bulletformat boards as marlinformat, white to move
    boards[:, :24] = data[:, :24]
    boards[:, 24] = 64
    boards[:, 26] = 1
    return boards


def test_real_boards(real):
    chk = same(real)
    assert (chk.reason == 0).mean() > 0.9


@pytest.mark.parametrize("seed", range(4))
def test_mutated_boards(real, seed):
    rng = np.random.default_rng(seed)
    b = real[rng.integers(0, len(real), 20_000)].copy()
    rows = np.arange(len(b))
    for _ in range(3):
        col = rng.integers(0, 25, len(b))
        flip = rng.random(len(b)) < 0.5
        b[rows, col] = np.where(flip, b[rows, col] ^ (1 << rng.integers(0, 8, len(b))).astype(np.uint8),
                                rng.integers(0, 256, len(b)).astype(np.uint8))
    b[rng.random(len(b)) < 0.3, 24] ^= 0x80  # other side to move
    ep = rng.random(len(b)) < 0.2
    b[ep, 24] = (b[ep, 24] & 0x80) | rng.integers(0, 65, ep.sum()).astype(np.uint8)
    same(b)


def test_random_bytes():
    rng = np.random.default_rng(7)
    b = rng.integers(0, 256, (20_000, 32)).astype(np.uint8)
    sparse = rng.integers(0, 64, (20_000, 12))  # boards of at most 12 occupied squares
    occ = np.zeros(20_000, np.uint64)
    for j in range(12):
        occ |= np.uint64(1) << sparse[:, j].astype(np.uint64)
    b[:10_000, :8] = occ[:10_000, None].view(np.uint8).reshape(-1, 8)
    same(b)
