"""Compiled walks that find where a range of a file may start (:mod:`nnue.pipeline.ranges`)."""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _walk(words, nbytes, out):
    n = 0
    pos = 0  # in 4-byte words; a viriformat game is 8 words of header, pairs, then one zero word
    nw = words.shape[0]
    while pos * 4 < nbytes:
        if n == out.shape[0]:
            return n, pos
        out[n] = pos * 4
        n += 1
        pos += 8
        while pos < nw and words[pos] != 0:
            pos += 1
        pos += 1
    return n, -1


def viri_game_starts(words: np.ndarray, nbytes: int) -> np.ndarray:
    """Byte offsets of every game's header in a viriformat file, in order, as the reader walks it:
    32 header bytes, then 4-byte (move, eval) pairs up to one of 4 zero bytes. words: the file as
    (nbytes // 4,) little-endian uint32 (a memory map); the last game may be cut short.
    Returns (games,) int64."""
    chunks = []
    start = 0
    while True:
        out = np.empty(1 << 20, np.int64)
        n, resume = _walk(words[start // 4:], nbytes - start, out)
        chunks.append(out[:n] + start)
        if resume < 0:
            break
        start += resume * 4
    return np.concatenate(chunks)
