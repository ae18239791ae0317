"""Issue 10: ``nnue pack --dedup`` with concurrent writers. Two real ``nnue pack --dedup``
processes into one dataset, given inputs that hold the same positions, must not both add a
position: each file is packed under the dataset's writer lock against the keys of every part
in the manifest at that moment."""
from __future__ import annotations

import subprocess
import sys

import pytest

from nnue.pipeline import manifest as mf
from nnue.pipeline.parts import read_part
from tests.samples import selfplay

NNUE = [sys.executable, "-m", "nnue.cli"]
KEY = 25


def _keys(ds) -> tuple[list, dict]:
    m = mf.load(ds)  # read == packed + rejected per file
    keys = []
    for e in m["files"].values():
        t = read_part(ds / e["part"], columns=["board"])
        assert t.num_rows == e["packed"]
        keys += [b[:KEY] for b in t.column("board").to_pylist()]
    return keys, m


@pytest.mark.parametrize("round_", range(3))
def test_two_concurrent_dedup_packs_add_each_position_once(tmp_path, round_):
    a = selfplay("sf15-960-xfen-s2.plain")
    b = selfplay("sf15-960-xfen-s2.txt")  # the same games, so the same positions
    ds = tmp_path / "ds"
    procs = [subprocess.Popen([*NNUE, "pack", str(f), "-o", str(ds), "--dedup", "--no-progress"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for f in ((a, b) if round_ % 2 == 0 else (b, a))]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    keys, m = _keys(ds)
    assert {e["path"] for e in m["files"].values()} == {str(a), str(b)}
    assert len(keys) == len(set(keys)), f"{len(keys) - len(set(keys))} positions packed twice"
    # one file packed every distinct position; the other rejected all of them as duplicates
    ref = tmp_path / "ref"
    assert subprocess.run([*NNUE, "pack", str(a), "-o", str(ref), "--dedup", "--no-progress"]).returncode == 0
    assert set(keys) == set(_keys(ref)[0])
    packed = sorted(e["packed"] for e in m["files"].values())
    assert packed[0] == 0 and packed[1] == len(keys)


def test_dedup_pack_of_an_input_already_packed_skips_it(tmp_path):
    """An input already in the manifest (checked again under the lock, where another writer may
    have added it since the run started) is skipped, not packed again as all duplicates."""
    from nnue.pipeline.pack import pack

    a = selfplay("sf15-960-xfen-s2.plain")
    ds = tmp_path / "ds"
    first = pack([a], ds, progress=False, dedup=True)
    assert first["packed"] > 0
    again = pack([a], ds, progress=False, dedup=True)
    assert again["skipped"] == [str(a)] and again["packed"] == 0
