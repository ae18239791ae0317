"""Concurrent writers into one dataset never lose data (manifest merge under an flock).

Real processes: worker processes forked once wait on a barrier and then pack their own dump into
the round's dataset at the same moment, 20 rounds of 2, 3 and 4 writers; and real ``nnue pack``
command-line processes started together. After every round the manifest lists every file, every
position is readable and ``read == packed + rejected`` for the whole dataset."""
from __future__ import annotations

import json
import multiprocessing as mp
import subprocess
from pathlib import Path


from nnue.pipeline import manifest as mf
from tests.service.service_testlib import NNUE, cut_dumps, dataset_rows, env

ROUNDS = 20


def _writer(barrier, jobs, results):
    from nnue.pipeline.pack import pack

    while True:
        job = jobs.get()
        if job is None:
            return
        dump, dataset = job
        barrier.wait()
        s = pack([dump], dataset, progress=False)
        results.put((str(dump), s["read"], s["packed"], sum(s["rejected"].values())))


def _check_round(dataset: Path, dumps: list[Path], reports: list[tuple]):
    m = mf.load(dataset)
    listed = sorted(e["path"] for e in m["files"].values())
    assert listed == sorted(map(str, dumps)), f"manifest lost files: {listed}"
    t = mf.totals(m)
    rejected = sum(t["rejected"].values())
    assert t["read"] == t["packed"] + rejected
    assert dataset_rows(dataset, m) == t["packed"]
    assert sum(r[1] for r in reports) == t["read"]
    assert sum(r[2] for r in reports) == t["packed"]
    assert sum(r[3] for r in reports) == rejected > 0
    assert not [p for p in dataset.iterdir() if p.name.endswith(".tmp")]


def test_forked_writers_many_rounds(tmp_path):
    ctx = mp.get_context("fork")
    writers = 4
    dumps = cut_dumps(tmp_path / "dumps", writers * ROUNDS, records=40)
    for k in (2, 3, 4):
        barrier, jobs, results = ctx.Barrier(k), ctx.Queue(), ctx.Queue()
        procs = [ctx.Process(target=_writer, args=(barrier, jobs, results)) for _ in range(k)]
        for p in procs:
            p.start()
        try:
            for r in range(ROUNDS):
                dataset = tmp_path / f"ds-{k}-{r}"
                mine = dumps[r * writers: r * writers + k]
                for d in mine:
                    jobs.put((d, dataset))
                reports = [results.get(timeout=120) for _ in mine]
                _check_round(dataset, mine, reports)
        finally:
            for _ in procs:
                jobs.put(None)
            for p in procs:
                p.join(timeout=60)
        assert all(p.exitcode == 0 for p in procs)


def test_nnue_pack_processes_together(tmp_path):
    """The reported case: several ``nnue pack`` commands into one dataset at once (2 rounds of 3)."""
    dumps = cut_dumps(tmp_path / "dumps", 6, records=100)
    for r in range(2):
        dataset = tmp_path / f"ds{r}"
        mine = dumps[3 * r: 3 * r + 3]
        procs = [subprocess.Popen([*NNUE, "pack", str(d), "-o", str(dataset), "--json", "--no-progress"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
                 for d in mine]
        reports = []
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            s = json.loads(out)
            reports.append((None, s["read"], s["packed"], sum(s["rejected"].values())))
        _check_round(dataset, mine, reports)


def test_same_input_twice_at_once(tmp_path):
    """Two writers packing the same file at once: one entry, a readable part, no temp file left."""
    ctx = mp.get_context("fork")
    (dump,) = cut_dumps(tmp_path / "dumps", 1, records=200)
    for r in range(3):
        dataset = tmp_path / f"ds{r}"
        barrier, jobs, results = ctx.Barrier(2), ctx.Queue(), ctx.Queue()
        procs = [ctx.Process(target=_writer, args=(barrier, jobs, results)) for _ in range(2)]
        for p in procs:
            p.start()
        for _ in procs:
            jobs.put((dump, dataset))
        reports = [results.get(timeout=120) for _ in procs]
        for _ in procs:
            jobs.put(None)
        for p in procs:
            p.join(timeout=60)
        m = mf.load(dataset)
        assert len(m["files"]) == 1
        (e,) = m["files"].values()
        assert dataset_rows(dataset, m) == e["packed"] == reports[0][2] == reports[1][2]
        assert not [p for p in dataset.iterdir() if p.name.endswith(".tmp")]
