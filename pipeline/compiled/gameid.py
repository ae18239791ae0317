"""Compiled position-key hashes for content-derived game ids (:class:`nnue.pipeline.pack.GameIds`).

:func:`key_hashes` computes, in one pass and without temporaries, what the NumPy expression
``splitmix64(splitmix64(splitmix64(w0) ^ w1) ^ w2) ^ w3`` gives over the little-endian 64-bit
words w0..w3 of each packed board with bytes 25..31 (counters, eval, WDL) zeroed: the key of a
position (occupancy, piece nibbles, side to move and en passant). SplitMix64: Steele, Lea and
Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014.
"""
from __future__ import annotations

import numpy as np
from numba import njit

U64 = np.uint64


@njit(cache=True, inline="always")
def _splitmix64(x):
    z = x + U64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> U64(30))) * U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> U64(27))) * U64(0x94D049BB133111EB)
    return z ^ (z >> U64(31))


@njit(cache=True, inline="always")
def _word(b, r, at, n):
    w = U64(0)
    for i in range(n):
        w |= U64(b[r, at + i]) << U64(8 * i)
    return w


@njit(cache=True)
def key_hashes(boards):
    """boards: (n, 32) uint8 packed boards -> (n,) uint64 position-key hashes (module docstring)."""
    n = boards.shape[0]
    out = np.empty(n, np.uint64)
    for r in range(n):
        h = _splitmix64(_word(boards, r, 0, 8)) ^ _word(boards, r, 8, 8)
        h = _splitmix64(h) ^ _word(boards, r, 16, 8)
        out[r] = _splitmix64(h) ^ _word(boards, r, 24, 1)
    return out


_INDEX_MIX = U64(0xD6E8FEB86659FD93)  # multiplies a position's index in its game (GameIds)


@njit(cache=True)
def position_terms(boards, j):
    """The terms GameIds sums: ``splitmix64(key_hash(board) + j * 0xD6E8FEB86659FD93)`` per row.
    boards: (n, 32) uint8; j: (n,) int64 index of each position in its game -> (n,) uint64."""
    h = key_hashes(boards)
    for r in range(h.shape[0]):
        h[r] = _splitmix64(h[r] + U64(j[r]) * _INDEX_MIX)
    return h


@njit(cache=True)
def game_ids(total, count):
    """A game's id from its summed terms and its count of positions:
    ``splitmix64(total ^ splitmix64(count))``. total: (n,) uint64; count: (n,) int64 -> (n,) uint64."""
    out = np.empty(total.shape[0], np.uint64)
    for r in range(total.shape[0]):
        out[r] = _splitmix64(total[r] ^ _splitmix64(U64(count[r])))
    return out
