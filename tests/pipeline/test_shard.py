"""Packing in shards and merging them: ``nnue pack --shard K/N``, ``nnue merge`` and
``nnue pack-shards`` (a Hydra multirun through a real launcher).

A dataset packed as N shards and merged holds exactly what one ``nnue pack`` of the same inputs
writes: the same manifest entries (but for the path each input was named by), the same part and
rejects files byte for byte. The merge is idempotent and finishes after an interruption."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nnue.pipeline import manifest as mf
from nnue.pipeline import shard as shardmod
from nnue.pipeline.shard import merge_datasets, parse_shard, shard_files
from tests.samples import SAMPLE, public_if_present, selfplay

NNUE = [sys.executable, "-m", "nnue.cli"]


#: the inputs mix formats whose documented units differ (Stockfish's .binpack: internal units):
#: one dataset takes one unit, so these packs name it
UNIT = ["--score-unit", "cp"]


def inputs() -> list[Path]:
    """The bundled sample and the Chess960 PGN (ours, in every clone), then the third-party
    samples of ../shared/data/public where they are present."""
    return [SAMPLE, selfplay("sf15-960-xfen-s2.pgn"),
            *public_if_present("samplefen1000.epd", "ep1.binpack", "sample_with_annotations.pgn", "test-vf.bin",
                               "batch.bf")]


def nnue(*args, ok=True, **kw):
    r = subprocess.run([*NNUE, *map(str, args)], capture_output=True, text=True, **kw)
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def content(dataset: Path) -> dict:
    """The dataset as data: manifest entries without their paths, and every file's bytes."""
    m = mf.load(dataset)
    entries = {sha: {k: v for k, v in e.items() if k != "path"} for sha, e in m["files"].items()}
    files = {p.name: p.read_bytes() for p in sorted(dataset.iterdir())
             if p.name.startswith(("part-", "rejects-"))}
    return {"entries": entries, "files": files, "score_unit": m["score_unit"]}


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    d = tmp_path_factory.mktemp("whole") / "ds"
    nnue("pack", *inputs(), "-o", d, "--no-progress", *UNIT)
    return content(d)


def test_shards_partition_the_files_and_balance_bytes(tmp_path):
    files = []
    for i, size in enumerate([50, 10, 10, 30, 5, 5, 40, 0]):
        p = tmp_path / f"f{i}.plain"
        p.write_bytes(b"x" * size)
        files.append(p)
    for n in (1, 2, 3, 5, 8, 11):
        parts = [shard_files(files, k, n) for k in range(n)]
        flat = sorted(str(f) for s in parts for f in s)
        assert flat == sorted(map(str, files))  # a partition: every file in exactly one shard
        for s in parts:  # each shard keeps the input order
            assert s == [f for f in files if f in s]
        loads = [sum(f.stat().st_size for f in s) for s in parts]
        if n <= len(files):
            assert max(loads) - min(loads) <= 50, (n, loads)  # greedy by size: within the largest file
    assert shard_files(files, 0, 2) == shard_files(list(files), 0, 2)  # deterministic
    two = [sum(f.stat().st_size for f in shard_files(files, k, 2)) for k in range(2)]
    assert sorted(two) == [75, 75]


@pytest.mark.parametrize("bad", ["3", "a/b", "2/2", "-1/3", "0/0", "1/2/3"])
def test_bad_shard_spec(bad):
    with pytest.raises(ValueError, match="--shard"):
        parse_shard(bad)


@pytest.mark.parametrize("extra", [["--dedup"], ["--watch", "60"]])
def test_shard_refuses_dedup_and_watch(tmp_path, extra):
    """--dedup under --shard would drop only the repeats one shard sees (the merge kept 3x the
    positions of one --dedup pack: a fresh-clone check); refused in one line, nothing written."""
    r = nnue("pack", selfplay("sf15-960-xfen-s2.plain"), "-o", tmp_path / "s", "--shard", "0/2",
             *extra, ok=False)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "--shard" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "s").exists()


def test_sharded_pack_and_merge_equal_one_pack(tmp_path, whole):
    n = 3
    shards = [tmp_path / f"s{k}" for k in range(n)]
    for k, s in enumerate(shards):
        nnue("pack", *inputs(), "-o", s, "--shard", f"{k}/{n}", "--no-progress", *UNIT)
    held = [set(mf.load(s)["files"]) for s in shards]
    assert sum(map(len, held)) == len(whole["entries"]) and set().union(*held) == set(whole["entries"])
    out = tmp_path / "merged"
    r = json.loads(nnue("merge", *shards, "-o", out, "--json").stdout)
    assert r["files"] == len(whole["entries"])
    assert content(out) == whole
    for s in shards:  # moved, not copied; the shard is no longer a dataset
        assert not list(s.glob("part-*")) and not (s / mf.MANIFEST).exists() and (s / shardmod.MERGED).exists()
    # idempotent: a rerun merges nothing and changes nothing
    r2 = json.loads(nnue("merge", *shards, "-o", out, "--json").stdout)
    assert r2["files"] == 0 and {x["status"] for x in r2["shards"]} == {"already merged"}
    assert content(out) == whole


def test_interrupted_merge_is_finished_by_a_rerun(tmp_path, whole, monkeypatch):
    shards = [tmp_path / f"s{k}" for k in range(2)]
    for k, s in enumerate(shards):
        nnue("pack", *inputs(), "-o", s, "--shard", f"{k}/2", "--no-progress", *UNIT)
    out = tmp_path / "merged"
    first = set(mf.load(shards[0])["files"])
    real = mf.merge
    calls = {"n": 0}

    def crash_on_second(*a, **kw):  # the second shard's parts are moved, then the process "dies"
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(shardmod.mf, "merge", crash_on_second)
    with pytest.raises(KeyboardInterrupt):
        merge_datasets(shards, out)
    monkeypatch.setattr(shardmod.mf, "merge", real)
    # the half-merged state: the target lists only the first shard's inputs, readers see a dataset
    assert set(mf.load(out)["files"]) == first and len(first) < len(whole["entries"])
    assert list(out.glob("part-*")) and len(list(out.glob("part-*"))) > len(first)  # moved, not yet listed
    assert (shards[1] / mf.MANIFEST).exists()
    merge_datasets(shards, out)
    assert content(out) == whole


def test_merge_refuses_what_is_not_a_shard(tmp_path):
    r = nnue("merge", tmp_path / "nope", "-o", tmp_path / "out", ok=False)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "nope" in r.stderr
    d = tmp_path / "d"
    nnue("pack", inputs()[0], "-o", d, "--no-progress")
    r = nnue("merge", d, "-o", d, ok=False)
    assert r.returncode == 2 and "output itself" in r.stderr
    r = nnue("pack", inputs()[0], "-o", tmp_path / "x", "--shard", "5/2", ok=False)
    assert r.returncode == 2 and "0 <= K < N" in r.stderr and "Traceback" not in r.stderr


def test_an_empty_shard_is_an_empty_dataset(tmp_path):
    s = tmp_path / "s"
    r = nnue("pack", inputs()[0], "-o", s, "--shard", "1/2")
    assert "no input files" in r.stdout
    assert mf.load(s)["files"] == {}
    out = tmp_path / "out"
    nnue("merge", s, "-o", out)
    assert mf.load(out)["files"] == {}


def test_pack_shards_through_hydra_equals_one_pack(tmp_path, whole):
    out = tmp_path / "ds"
    ins = ",".join(str(p) for p in inputs())
    r = nnue("pack-shards", f"inputs=[{ins}]", f"output={out}", "shards=3", "score_unit=cp", cwd=tmp_path)
    assert f"merged {len(inputs())} file(s)" in r.stdout
    assert content(out) == whole
    # a rerun packs nothing again and merges nothing twice
    r = nnue("pack-shards", f"inputs=[{ins}]", f"output={out}", "shards=3", "score_unit=cp", cwd=tmp_path)
    assert "merged 0 file(s)" in r.stdout
    assert content(out) == whole


def test_pack_shards_through_submitit_local(tmp_path, whole):
    out = tmp_path / "ds"
    ins = ",".join(str(p) for p in inputs())
    nnue("pack-shards", f"inputs=[{ins}]", f"output={out}", "shards=2", "score_unit=cp", "hydra/launcher=submitit_local",
         "hydra.launcher.timeout_min=20", cwd=tmp_path, timeout=900)
    assert content(out) == whole
    assert (tmp_path / "ds.shards" / ".hydra" / ".submitit").is_dir()


def test_a_failed_shard_job_is_one_line_and_nothing_is_merged(tmp_path):
    bad = tmp_path / "dumps"
    bad.mkdir()
    (bad / "a.plain").write_bytes(SAMPLE.read_bytes())
    (bad / "b.binpack").write_bytes(os.urandom(5000))  # not a binpack: FormatError in its job
    out = tmp_path / "ds"
    r = nnue("pack-shards", f"inputs=[{bad}]", f"output={out}", "shards=2", ok=False, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    assert line.startswith("nnue pack-shards: error:") and "b.binpack" in line and "nothing merged" in line
    assert "Traceback" not in r.stderr
    assert not (out / mf.MANIFEST).exists()


@pytest.mark.parametrize("args,msg", [([], "give inputs and output"),
                                      (["inputs=[/nonexistent]", "output=x"], "/nonexistent"),
                                      (["-m", "inputs=[a]", "output=x"], "not -m"),
                                      (["inputs=[a]", "output=x", "shards=0"], "at least 1"),
                                      (["inputs=[a", "output=x"], "error")])
def test_pack_shards_bad_input_is_one_line(tmp_path, args, msg):
    r = nnue("pack-shards", *args, ok=False, cwd=tmp_path)
    assert r.returncode == 2 and msg in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.slurm
def test_pack_shards_as_a_slurm_job_array(slurm, tmp_path, whole):
    out = tmp_path / "ds"
    ins = ",".join(str(p) for p in inputs())
    nnue("pack-shards", f"inputs=[{ins}]", f"output={out}", "shards=2", "score_unit=cp", "hydra/launcher=submitit_slurm",
         "hydra.launcher.timeout_min=20", cwd=tmp_path, timeout=900)
    assert content(out) == whole
    logs = list((tmp_path / "ds.shards" / ".hydra" / ".submitit").rglob("*_log.out"))
    assert len(logs) == 2, logs  # one array task per shard
