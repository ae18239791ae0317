"""pack --workers and --dedup."""
from __future__ import annotations

from collections import Counter

import pytest

from nnue.pipeline import manifest as mf
from nnue.pipeline.pack import DEDUP_KEY_BYTES, pack
from nnue.pipeline.parts import read_part
from tests.samples import SAMPLE


def _split(src, tmp_path, n):
    """Cut a .plain into n files of whole records."""
    blocks = src.read_text().split("e\n")[:-1]
    paths = []
    for i in range(n):
        p = tmp_path / f"part{i}.plain"
        p.write_text("".join(b + "e\n" for b in blocks[i::n]))
        paths.append(p)
    return paths


def _boards(ds):
    m = mf.load(ds)
    out = Counter()
    for e in m["files"].values():
        out.update(read_part(ds / e["part"], columns=["board"]).column("board").to_pylist())
    return out


def test_workers_give_the_same_dataset_as_one_process(tmp_path):
    files = _split(SAMPLE, tmp_path, 3)
    one = pack(files, tmp_path / "one", progress=False)
    two = pack(files, tmp_path / "two", progress=False, workers=2)
    assert one["read"] == two["read"] == 4015 and one["packed"] == two["packed"]
    assert _boards(tmp_path / "one") == _boards(tmp_path / "two")
    assert mf.load(tmp_path / "two")["files"].keys() == mf.load(tmp_path / "one")["files"].keys()
    with pytest.raises(ValueError):
        pack(files, tmp_path / "bad", workers=0, progress=False)


def test_dedup_rejects_repeats_within_and_across_runs(tmp_path):
    doubled = tmp_path / "doubled.plain"
    doubled.write_text(SAMPLE.read_text() * 2)
    s = pack([SAMPLE, doubled], tmp_path / "ds", dedup=True, progress=False)
    unique = len({b[:DEDUP_KEY_BYTES] for b in _boards(tmp_path / "ds")})
    assert s["read"] == 3 * 4015 == s["packed"] + s["rejected"]["duplicate position"]
    assert s["packed"] == unique
    # a later run compares against what the dataset already holds
    copy = tmp_path / "copy.plain"
    copy.write_text(SAMPLE.read_text() + "\n")
    s2 = pack([copy], tmp_path / "ds", dedup=True, progress=False)
    assert s2["packed"] == 0 and s2["rejected"] == {"duplicate position": 4015}
    rejects = (tmp_path / "ds" / mf.load(tmp_path / "ds")["files"][mf.sha256_file(copy)]["rejects"]).read_text()
    assert rejects.count("duplicate position") == 4015 and '"location": "line 1"' in rejects
