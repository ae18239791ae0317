"""The bulk (NumPy) path of the fixed-record readers writes exactly what the one-by-one
python-chess path writes: same rows, same rejects with the same reasons and locations."""
from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from nnue.pipeline import manifest as mf
from nnue.pipeline.convert import convert
from nnue.pipeline.formats import ReaderOptions
from nnue.pipeline.pack import pack


def _both(path, fmt, tmp_path):
    out = {}
    for fast in (True, False):
        ds = tmp_path / f"{fmt}-{fast}"
        s = pack([path], ds, fmt=fmt, options=ReaderOptions(fast=fast), progress=False)
        entry = next(iter(mf.load(ds)["files"].values()))
        rejects = [json.loads(x) for x in (ds / entry["rejects"]).read_text().splitlines()]
        table = pq.read_table(ds / entry["part"]) if entry["packed"] else None
        out[fast] = (s, table, [(r["location"], r["reason"]) for r in rejects])
    return out


def _assert_same(out):
    (sf, tf, rf), (ss, ts, rs) = out[True], out[False]
    assert (sf["read"], sf["packed"], sf["rejected"]) == (ss["read"], ss["packed"], ss["rejected"])
    assert rf == rs
    if tf is not None:
        for c in tf.column_names:
            assert tf[c].equals(ts[c]), c


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """marlinformat and bulletformat files converted from real self-play, Chess960 included."""
    from conftest import SAMPLE, shared_file

    d = tmp_path_factory.mktemp("fast")
    pack([SAMPLE, shared_file("selfplay/sf15-960-xfen-s2.plain")], d / "ds", progress=False)
    convert(d / "ds", "marlinformat", d / "real.marlin")
    convert(d / "ds", "bulletformat", d / "real.bf")
    return d


@pytest.mark.parametrize("name,fmt", [("real.marlin", "marlinformat"), ("real.bf", "bulletformat")])
def test_bulk_path_equals_python_chess_on_real_data(sources, name, fmt, tmp_path):
    out = _both(sources / name, fmt, tmp_path)
    assert out[True][0]["packed"] == 4015 + 4586
    _assert_same(out)


def test_bulk_path_equals_python_chess_on_public_bulletformat(tmp_path):
    from conftest import shared_file

    _assert_same(_both(shared_file("public/batch.bf"), "bulletformat", tmp_path))


def _mutations(base: np.ndarray, seed: int) -> np.ndarray:
    """Boards broken in the ways validation must catch: kings removed or doubled, pawns moved to
    the back rank, pieces added next to kings (checks, both sides), castling codes, ep bytes,
    scores at the limits, wdl/result bytes out of range, random nibbles."""
    rng = np.random.default_rng(seed)
    out = base[rng.integers(0, len(base), 3000)].copy()
    for row in out:
        k = rng.integers(0, 9)
        if k == 0:
            row[8 + rng.integers(0, 16)] = rng.integers(0, 256)  # random nibbles
        elif k == 1:
            row[24] = (row[24] & 0x80) | rng.choice([16, 20, 40, 43, 64, 65, 100])  # ep bytes
        elif k == 2:
            row[28:30] = np.array([rng.choice([-32768, -32767, 32002, -32002, 31990, 32767])], "<i2").view(np.uint8)
        elif k == 3:
            row[30] = rng.integers(0, 6)  # wdl / result byte
        elif k == 4:
            row[24] ^= 0x80  # flip the side to move: many opposite checks
        elif k == 5:
            occ = int.from_bytes(row[:8].tobytes(), "little")
            free = [s for s in range(64) if not occ >> s & 1]
            s = int(rng.choice(free))  # add a piece on an empty square: rewrite via unpack/pack
            from nnue.pipeline.board import pack_position, unpack

            try:
                d = unpack(row.tobytes())
            except ValueError:
                continue
            d["pieces"][s] = int(rng.choice([0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13]))
            if len(d["pieces"]) <= 32:
                try:
                    row[:] = np.frombuffer(pack_position(d["pieces"], d["black_to_move"], d["castling_rooks"],
                                                         d["ep_square"], d["halfmove"], d["fullmove"],
                                                         d["eval_white"], min(d["wdl"], 2)), np.uint8)
                except ValueError:
                    continue
        elif k == 6:
            row[8 + rng.integers(0, 16)] |= 0x66  # castling-rook codes in odd places
        elif k == 7:
            row[26:28] = np.array([rng.choice([0, 1, 40000, 65535])], "<u2").view(np.uint8)  # fullmove
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_bulk_path_equals_python_chess_on_broken_marlinformat(sources, seed, tmp_path):
    base = np.fromfile(sources / "real.marlin", dtype=np.uint8).reshape(-1, 32)
    path = tmp_path / "broken.marlin"
    _mutations(base, seed).tofile(path)
    out = _both(path, "marlinformat", tmp_path)
    assert out[True][0]["rejected"] and out[True][0]["packed"]
    _assert_same(out)


@pytest.mark.parametrize("seed", [4, 5])
def test_bulk_path_equals_python_chess_on_broken_bulletformat(sources, seed, tmp_path):
    base = np.fromfile(sources / "real.bf", dtype=np.uint8).reshape(-1, 32)
    broken = _mutations(base, seed)
    broken[:, 29:32] = 0
    path = tmp_path / "broken.bf"
    broken.tofile(path)
    out = _both(path, "bulletformat", tmp_path)
    assert out[True][0]["rejected"] and out[True][0]["packed"]
    _assert_same(out)
