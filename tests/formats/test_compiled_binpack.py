"""The compiled binpack decoder (pipeline/compiled/binpack.py) against the python-chess reader.

Every test packs the same bytes twice — ``ReaderOptions(fast=True)`` (compiled) and
``fast=False`` (the python-chess reference) — and requires identical Parquet tables (every
column, every row, in order), identical rejects files and identical summaries. The decoder is
compiled (or loaded from numba's cache) once per session by the ``warm`` fixture."""
from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from nnue.pipeline.formats import ReaderOptions
from nnue.pipeline.formats import FormatError
from nnue.pipeline.pack import pack
from nnue.pipeline.parts import read_part
from tests.formats.formats_testlib import binpack_chain_ends, public


@pytest.fixture(scope="session", autouse=True)
def warm():
    """Compile (or load) the decoder once: later calls in the session cost nothing extra. On zero
    bytes (read-only, as np.frombuffer gives them), not on a third-party sample: the tests on our
    own chains (test_stem_double_checks) must run in a clone without ../shared/data/public."""
    from nnue.pipeline.compiled import binpack as cb

    data = bytes(40)
    b = cb.buffers(cb.CAP)
    cb.decode_chains(np.frombuffer(data, np.uint8), 0, len(data), *(b[k] for k in cb._FIELDS))
    return cb


def both(tmp_path, data: bytes, name: str = "x"):
    """Pack ``data`` with the compiled and the reference path; assert identical outputs.
    Returns the summary."""
    path = tmp_path / f"{name}.binpack"
    path.write_bytes(data)
    out, errors = [], []
    for fast in (True, False):
        ds = tmp_path / f"{name}-{fast}"
        try:
            s = pack([path], ds, fmt="binpack", options=ReaderOptions(fast=fast), progress=False)
        except FormatError as e:  # a file whose first chain does not decode: both paths refuse it alike
            errors.append(str(e))
            continue
        (part,) = ds.glob("part-*.parquet")
        (rej,) = ds.glob("rejects-*.jsonl")
        out.append((s["read"], s["packed"], s["rejected"], read_part(part), rej.read_text()))
    if errors:
        assert len(errors) == 2 and errors[0] == errors[1], errors
        return None
    (ra, pa_, ja, ta, xa), (rb, pb, jb, tb, xb) = out
    assert (ra, pa_, ja) == (rb, pb, jb)
    assert ta.equals(tb), _first_difference(ta, tb)
    assert xa == xb
    return {"read": ra, "packed": pa_, "rejected": ja}


def _first_difference(ta, tb) -> str:
    for name in ta.column_names:
        a, b = ta.column(name).to_pylist(), tb.column(name).to_pylist()
        if a != b:
            i = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            return f"column {name} row {i}: {a[i:i + 1]} vs {b[i:i + 1]} (rows {len(a)} / {len(b)})"
    return "no column differs"


def block(chains: bytes) -> bytes:
    return b"BINP" + struct.pack("<I", len(chains)) + chains


@pytest.fixture(scope="module")
def small():
    data = public("small.binpack").read_bytes()
    body = data[8:8 + int.from_bytes(data[4:8], "little")]
    return body, [0] + binpack_chain_ends(data, 400)


def test_golden_three_positions(tmp_path):
    assert both(tmp_path, public("ep1.binpack").read_bytes())["packed"] == 3


def test_first_chains_of_small_binpack(tmp_path, small):
    body, ends = small
    s = both(tmp_path, block(body[:ends[60]]))
    assert s["packed"] > 1000 and s["rejected"] == {}


def test_rows_python_chess_settles(tmp_path, small, warm):
    """Chains holding positions with a legal en-passant capture or two checkers (the rows the
    compiled core hands to python-chess) pack identically."""
    body, ends = small
    b = warm.buffers(warm.CAP)
    picked = []
    for lo, hi in zip(ends, ends[1:]):
        rows, _, _, _ = warm.decode_chains(np.frombuffer(body[lo:hi], np.uint8), 0, hi - lo,
                                           *(b[k] for k in warm._FIELDS))
        if b["kind"][:rows].any():
            picked.append(body[lo:hi])
        if len(picked) == 3:
            break
    assert picked, "no chain with a python-chess row in the first 400 chains"
    both(tmp_path, block(b"".join(picked)))


@pytest.mark.parametrize("cut", ["inside a chain", "at a chain boundary", "inside a stem"])
def test_cut_last_block_decodes_compiled(tmp_path, small, cut):
    """A file that ends inside its last block (an interrupted copy): the whole chains before the
    cut are decoded by the compiled core (not handed to python-chess, which was 7x slower), and
    the cut is one "truncated record" reject, as the reference path gives it."""
    body, ends = small
    whole = block(body[:ends[120]])
    at = {"inside a chain": 8 + ends[100] + 50, "at a chain boundary": 8 + ends[100],
          "inside a stem": 8 + ends[100] + 20}[cut]
    s = both(tmp_path, whole[:at])
    assert s["rejected"] == {"truncated record": 1}
    path = tmp_path / "cut.binpack"
    path.write_bytes(whole[:at])
    r = pack([path], tmp_path / "ds", fmt="binpack", progress=False)
    assert r["files"][0]["validated_by_python_chess"] < 0.01 * r["packed"]


def test_several_blocks_and_game_ordinals(tmp_path, small):
    body, ends = small
    data = block(body[:ends[3]]) + block(body[ends[3]:ends[7]]) + block(body[ends[7]:ends[9]])
    both(tmp_path, data)


@pytest.mark.parametrize("field,value", [
    (26, 64004),   # score zigzag(32002): VALUE_NONE
    (26, 65535),   # score -32768: out of int16 range
    (26, 63508),   # score 31754: a mate score
    (28, 0xC000),  # result zigzag 3 -> -2: result out of range, on every ply
    (28, 0x3FFF),  # ply 16383
    (24, 0),       # no stem move, with further plies: a corrupt chain
    (30, 300),     # rule50 beyond 255
])
def test_stem_fields(tmp_path, small, field, value):
    body, ends = small
    chain = bytearray(body[:ends[2]])
    if field == 28:
        old = struct.unpack(">H", chain[28:30])[0]
        value = (old & 0x3FFF) | value if value == 0xC000 else (old & 0xC000) | value
    chain[field:field + 2] = struct.pack(">H", value)
    both(tmp_path, block(bytes(chain)), f"f{field}")
    # the same chain after an intact one: a file whose first chain decodes is packed, not refused
    assert both(tmp_path, block(bytes(body[:ends[1]]) + bytes(chain)), f"g{field}") is not None


def test_stem_only_chain_without_move(tmp_path):
    data = bytearray(public("ep1.binpack").read_bytes())
    chain = bytearray(data[8:8 + 32]) + b"\0\0"
    chain[24:26] = b"\0\0"
    both(tmp_path, block(bytes(chain)))


@pytest.mark.parametrize("seed", range(12))
def test_mutated_chains(tmp_path, small, seed):
    """Random byte and bit flips in a few chains: the compiled decoder settles or hands back
    exactly what the reference does (rows, rejects, corrupt chains, skipped block tails)."""
    body, ends = small
    rng = random.Random(seed)
    k = rng.randrange(0, 300)
    d = bytearray(body[ends[k]:ends[k + 4]])
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(d)) if rng.random() < 0.5 else rng.randrange(min(34, len(d)))
        d[i] = rng.randrange(256) if rng.random() < 0.5 else d[i] ^ (1 << rng.randrange(8))
    # after an intact first chain, so that the file is a binpack and not refused whole
    assert both(tmp_path, block(bytes(body[:ends[1]]) + bytes(d)), f"m{seed}") is not None


@pytest.mark.slow
def test_all_of_small_binpack(tmp_path):
    """All 434,921 positions (the reference path takes minutes)."""
    s = both(tmp_path, public("small.binpack").read_bytes())
    assert s["read"] == 434_921


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(200))
def test_mutated_chains_many(tmp_path, small, seed):
    test_mutated_chains(tmp_path, small, 1000 + seed)


def _stem(fen: str, move: str | None, score: int = 5, ply: int = 30) -> bytes:
    """A binpack chain of one stem (no movetext) for a position without en passant or castling
    rights (FORMATS.md: occupancy BE, nibbles, move, zigzag score, ply | result, rule50, count)."""
    import chess

    b = chess.Board(fen)
    occ = b.occupied
    codes = []
    for sq in chess.scan_forward(occ):
        p = b.piece_at(sq)
        c = 2 * (p.piece_type - 1) + (p.color == chess.BLACK)
        if p.piece_type == chess.KING and p.color == chess.BLACK and b.turn == chess.BLACK:
            c = 15
        codes.append(c)
    nib = bytearray(16)
    for i, c in enumerate(codes):
        nib[i >> 1] |= c << (4 * (i & 1))
    m = 0 if move is None else (chess.parse_square(move[:2]) << 8 | chess.parse_square(move[2:4]) << 2)
    z = 2 * score if score >= 0 else -2 * score - 1
    return occ.to_bytes(8, "big") + bytes(nib) + struct.pack(">HHHHH", m, z, ply, 0, 0)


@pytest.mark.parametrize("fen,move", [
    ("4k3/8/3N1N2/8/8/8/8/4K3 b - - 0 1", "e8e7"),   # two knights: no last move gives it
    ("4k3/3P4/5N2/8/8/8/8/4K3 b - - 0 1", "e8d7"),   # a pawn and a knight
    ("4k3/8/8/8/8/5n2/8/4K2r w - - 0 1", "e1e2"),    # a rook and a knight: possible
])
def test_stem_double_checks(tmp_path, fen, move):
    """A stem with two checkers is packed, or rejected as an impossible check, as python-chess's
    path (with the packer's retrograde rule) decides."""
    good = _stem("4k3/8/8/8/8/8/8/4K3 w - - 0 1", "e1e2")
    s = both(tmp_path, block(good + _stem(fen, move)))
    assert s["read"] == 2
