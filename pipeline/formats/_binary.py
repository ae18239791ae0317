"""Helpers shared by the binary readers: fixed-size record iteration and bit readers."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from ..records import Reject, read_exact

CHUNK_RECORDS = 8192


def fixed_records(stream, size: int) -> Iterator[tuple[int, bytes] | Reject]:
    """Yield (byte offset, record bytes) for each ``size``-byte record; a trailing partial
    record becomes one Reject ("truncated record") at its byte offset."""
    offset = 0
    while True:
        block = read_exact(stream, size * CHUNK_RECORDS)
        if not block:
            return
        whole = len(block) - len(block) % size
        for i in range(0, whole, size):
            yield offset + i, block[i:i + size]
        if whole != len(block):
            yield Reject(f"byte {offset + whole}", "truncated record",
                         f"{len(block) - whole} trailing byte(s), records are {size} bytes", block[whole:].hex())
            return
        offset += len(block)


class BitReaderLSB:
    """Bits of a byte string, least significant bit of each byte first (Stockfish .bin)."""

    def __init__(self, data: bytes):
        self.value = int.from_bytes(data, "little")
        self.pos = 0
        self.limit = 8 * len(data)

    def read(self, n: int) -> int:
        if self.pos + n > self.limit:
            raise ValueError(f"bit stream overrun at bit {self.pos}")
        v = (self.value >> self.pos) & ((1 << n) - 1)
        self.pos += n
        return v


class BitReaderMSB:
    """Bits of a byte string, most significant bit of each byte first (binpack movetext)."""

    def __init__(self, data: bytes, start: int = 0):
        self.data = data
        self.pos = 8 * start  # bit position from the start of data

    def read(self, n: int) -> int:
        if n == 0:
            return 0
        byte = self.pos >> 3
        if (self.pos + n + 7) >> 3 > len(self.data):
            raise ValueError(f"movetext overrun at byte {byte}")
        window = int.from_bytes(self.data[byte:byte + 2].ljust(2, b"\0"), "big")
        v = (window >> (16 - (self.pos & 7) - n)) & ((1 << n) - 1)
        self.pos += n
        return v

    def read_vle16(self, block: int = 4) -> int:
        """Variable-length unsigned: groups of ``block`` data bits, low group first, each followed
        (as its high bit) by a "more follows" flag."""
        v = shift = 0
        while True:
            g = self.read(block + 1)
            v |= (g & ((1 << block) - 1)) << shift
            if not g >> block:
                return v & 0xFFFF
            shift += block
            if shift > 16:
                raise ValueError("variable-length score longer than 16 bits")

    def bytes_used(self) -> int:
        return (self.pos + 7) >> 3


def zigzag_decode(v: int) -> int:
    """Binpack's unsigned-to-signed mapping: 2s for s ≥ 0, −2s−1 for s < 0."""
    return -((v >> 1) + 1) if v & 1 else v >> 1


def game_boundary(prev: tuple | None, ply: int | None, result: int | None) -> bool:
    """A new game starts unless ply follows the previous record's by one and the stm result flips."""
    return not (prev is not None and ply is not None and prev[0] is not None
                and ply == prev[0] + 1 and result == -prev[1])


def fixed_blocks(stream, size: int, records: int = 65536):
    """Yield (byte offset, (n, size) uint8 array) blocks of whole records; a trailing partial
    record becomes one Reject ("truncated record") at its byte offset, as in fixed_records."""
    offset = 0
    while True:
        block = read_exact(stream, size * records)
        if not block:
            return
        whole = len(block) - len(block) % size
        if whole:
            yield offset, np.frombuffer(block, dtype=np.uint8, count=whole).reshape(-1, size)
        if whole != len(block):
            yield Reject(f"byte {offset + whole}", "truncated record",
                         f"{len(block) - whole} trailing byte(s), records are {size} bytes", block[whole:].hex())
            return
        offset += len(block)



def compiled_fixed():
    """The numba kernels of the fixed-record formats (:mod:`nnue.pipeline.compiled.fixed`), their
    ``SPEC.compiled``. Imported when a reader first needs them, not with this module: importing
    them loads numba (0.3 CPU s), which the CLI's parser must not."""
    from ..compiled import fixed

    return fixed


def read_game_records(stream, size: int, decode_record) -> Iterator:
    """The reference path of a format of fixed-size records whose consecutive records form games
    (:func:`game_boundary`): ``decode_record(offset, rec, None)`` for each record, with its game
    ordinal set, and the Rejects of :func:`fixed_records`, in file order."""
    game, prev = -1, None
    for item in fixed_records(stream, size):
        if isinstance(item, Reject):
            yield item
            continue
        offset, rec = item
        out = decode_record(offset, rec, None)
        if not isinstance(out, Reject):
            if game_boundary(prev, out.ply, out.result):
                game += 1
            prev = (out.ply, out.result)
            out.game = game
        yield out


def read_game_blocks_compiled(stream, size: int, decode_record, kernel: str, with_moves: bool) -> Iterator:
    """The compiled path of the same formats: blocks of records through the kernel ``kernel`` of
    :mod:`nnue.pipeline.compiled.fixed` (``run_block``: PackedRows for the records it settles,
    ``decode_record(offset, rec, game)`` for the others), game ordinals carried across blocks."""
    fixed = compiled_fixed()
    state = np.array([-1, 0, 0, 0], np.int64)  # last game ordinal, has previous, its ply (-1: none), its result
    for item in fixed_blocks(stream, size):
        if isinstance(item, Reject):
            yield item
            continue
        offset, recs = item

        def one(i, game, offset=offset, recs=recs):
            return decode_record(offset + i * size, recs[i].tobytes(), game)

        yield from fixed.run_block(getattr(fixed, kernel), recs, offset, size, state, one, with_moves=with_moves)


MASK64 = (1 << 64) - 1


def splitmix64(x):
    """SplitMix64 finaliser (Steele et al. 2014): a well-mixed 64-bit hash of x. Works on Python
    ints and on NumPy uint64 arrays alike (wrapping arithmetic)."""
    if isinstance(x, np.ndarray):
        with np.errstate(over="ignore"):
            z = x + np.uint64(0x9E3779B97F4A7C15)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            return z ^ (z >> np.uint64(31))
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)
