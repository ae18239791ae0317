"""The trainer sees new data without a restart: PackedStream.refresh at epoch boundaries.

Unit test: parts packed after the stream was built join it on refresh, and the split of every
game stays where it was. End to end: ``nnue train`` runs while a writer process drops dumps into a
folder that ``nnue pack --watch`` feeds into the training dataset; the stream's parts log
records, per epoch, the part files known at its start and the rows read from each, and a dump's
part is read from the first epoch that starts after its manifest entry, and in every later one."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pyarrow.parquet as pq

from nnue.pipeline import manifest as mf
from nnue.pipeline.pack import pack
from nnue.pipeline.stream import Filters, PackedStream, split_mask
from nnue.pipeline.parts import read_part
from tests.service.service_testlib import NNUE, cut_dumps, env

NO_FILTERS = Filters(skip_in_check=False, skip_capture=False, skip_score_none=False, skip_mate=False)


def test_refresh_adds_new_parts_and_keeps_the_split(tmp_path):
    a, b, c = cut_dumps(tmp_path / "d", 3, records=400, bad_every=0)
    ds = tmp_path / "ds"
    pack([a, b], ds, progress=False)
    train = PackedStream([ds], 64, 0, "train", 0.3, NO_FILTERS, drop_last=False)
    val = PackedStream([ds], 64, 0, "val", 0.3, NO_FILTERS, drop_last=False)
    n_train = sum(len(x["score"]) for x in train)
    n_val = sum(len(x["score"]) for x in val)
    assert n_train + n_val == 800
    assert train.refresh() == {"new_parts": 0, "new_positions": 0}
    pack([c], ds, progress=False)
    assert train.refresh() == {"new_parts": 1, "new_positions": 400}
    assert val.refresh()["new_parts"] == 1
    n_train2 = sum(len(x["score"]) for x in train)
    n_val2 = sum(len(x["score"]) for x in val)
    assert n_train2 + n_val2 == 1200 and n_train2 > n_train and n_val2 >= n_val
    # the split is a function of the game id only: each part's val rows are what split_mask says
    for e in mf.load(ds)["files"].values():
        gid = read_part(ds / e["part"], columns=["game_id"]).column("game_id").to_numpy()
        assert split_mask(gid, "val", 0.3).sum() + split_mask(gid, "train", 0.3).sum() == len(gid)
    expected_val = sum(int(split_mask(read_part(ds / e["part"], columns=["game_id"]).column("game_id")
                                      .to_numpy(), "val", 0.3).sum()) for e in mf.load(ds)["files"].values())
    assert n_val2 == expected_val


WRITER = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    log, src, dst = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    def progress():  # (epochs read, part files known at the start of the last); epochs count from 1
        if not log.exists():
            return 0, 0
        lines = [json.loads(l) for l in log.read_text().splitlines() if l.strip()]
        train = [l for l in lines if l["split"] == "train"]
        return (train[-1]["epoch"], len(train[-1]["known_parts"])) if train else (0, 0)
    # newB waits until newA's part is known as well: packing newA may take longer than an epoch
    # under load (a fast CPU step, a loaded machine), and both would then join at the same epoch
    for name, after, known in (("newA.plain", 1, 0), ("newB.plain", 3, 3)):
        while progress()[0] < after or progress()[1] < known:
            time.sleep(0.02)
        tmp = dst / ("." + name + ".tmp")
        tmp.write_bytes((src / name).read_bytes())
        os.rename(tmp, dst / name)      # renamed into place: complete
        print(name, "dropped after epoch", after, flush=True)
""")


def test_dumps_added_while_training_are_trained_from_the_next_epoch(tmp_path):
    base = cut_dumps(tmp_path / "base", 2, records=700, bad_every=0)
    src = tmp_path / "src"
    a, b = cut_dumps(src, 2, records=300, bad_every=0, start=2000)
    a.rename(src / "newA.plain")
    b.rename(src / "newB.plain")
    ds, folder, log, out = tmp_path / "ds", tmp_path / "watched", tmp_path / "parts.jsonl", tmp_path / "run"
    pack(base, ds, progress=False)
    folder.mkdir()
    epochs = 8
    watcher = subprocess.Popen([*NNUE, "pack", "--watch", str(folder), "-o", str(ds), "--interval", "0.1",
                                "--settle", "0.5"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env())
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(src), str(folder)],
                              stdout=subprocess.PIPE, text=True)
    try:
        train = subprocess.run(
            [*NNUE, "train", "experiment=demo", f"data.path={ds}", f"paths.output_dir={out}",
             f"data.parts_log={log}", "data.positions_per_epoch=null", "data.batch_size=128",
             f"trainer.max_epochs={epochs}", "trainer.enable_progress_bar=false", "model.hidden=16",
             "~logger.tensorboard"],
            capture_output=True, text=True, env=env(), timeout=900)
        assert train.returncode == 0, train.stderr[-3000:]
        writer.wait(timeout=60)
    finally:
        writer.kill()
        watcher.terminate()
        wout, _ = watcher.communicate(timeout=60)
    assert watcher.returncode == 0
    key = {name: f"part-{mf.sha256_file(src / name)[:16]}.parquet" for name in ("newA.plain", "newB.plain")}
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    per_epoch = {x["epoch"]: x for x in lines if x["split"] == "train"}
    assert sorted(per_epoch) == list(range(1, epochs + 1))
    known_before: set = set()
    for e in range(1, epochs + 1):
        x = per_epoch[e]
        assert known_before <= set(x["known_parts"])           # parts never leave
        assert set(x["rows_read"]) == set(x["known_parts"])     # one pass reads every known part
        known_before = set(x["known_parts"])
    first = {n: min(e for e in range(1, epochs + 1) if k in per_epoch[e]["known_parts"]) for n, k in key.items()}
    assert 2 <= first["newA.plain"] < first["newB.plain"] <= epochs, (first, wout)
    assert first["newB.plain"] >= 4  # dropped only after epoch 3 ended
    for n, k in key.items():  # read in every epoch from then on, whole
        rows = pq.ParquetFile(tmp_path / "ds" / k).metadata.num_rows
        assert all(per_epoch[e]["rows_read"].get(k) == rows for e in range(first[n], epochs + 1))
        assert all(k not in per_epoch[e]["rows_read"] for e in range(1, first[n]))
    out = train.stderr + train.stdout
    # the log numbers epochs as the parts log and the progress line do
    import re

    assert sorted(int(e) for e in re.findall(r"epoch (\d+), train: 1 new part file", out)) == sorted(first.values())
    assert {int(e) for e in re.findall(r"epoch (\d+)/%d  step" % epochs, out)} == set(range(1, epochs + 1))
    # validation is the set of the run's start: new parts join training only, and the log says so
    base_parts = sorted(per_epoch[1]["known_parts"])
    val = [x for x in lines if x["split"] == "val"]
    assert val and all(sorted(x["known_parts"]) == base_parts for x in val), val
    assert "validation set fixed at the start of the run (2 part file(s)); new part files join training only" in out
    assert ", val: " not in out  # no "epoch N, val: new part file(s)" line


def test_wait_for_first_part(tmp_path):
    """A dataset folder with no manifest (what `pack --watch` makes before its first dump) is
    waited for: at most the timeout, one notice when the wait starts, back as soon as a part lands."""
    import threading

    import pytest

    ds = tmp_path / "ds"
    ds.mkdir()
    said = []
    with pytest.raises(mf.ManifestError, match="no part file arrived within 0.3 s"):
        mf.wait_for_first_part(ds, 0.3, said.append, poll_s=0.05)
    assert len(said) == 1 and "waiting up to 0.3 s for the first part file" in said[0]
    (dump,) = cut_dumps(tmp_path / "d", 1, records=50, bad_every=0)
    t = threading.Timer(0.5, lambda: pack([dump], ds, progress=False))
    t.start()
    try:
        assert mf.wait_for_first_part(ds, 60, said.append, poll_s=0.05) is True
    finally:
        t.join()
    assert mf.totals(mf.load(ds))["packed"] == 50
    # a packed dataset, or no folder at all: no wait (load words the problem)
    assert mf.wait_for_first_part(ds, 60) is False and mf.wait_for_first_part(tmp_path / "nope", 60) is False


def test_train_on_an_empty_watched_dataset_waits(tmp_path):
    """`nnue train` on the folder `pack --watch` made before any dump: one line, then it trains as
    soon as the watcher packs one; with nothing arriving, one more line and status 2."""
    import time

    folder, ds, out = tmp_path / "watched", tmp_path / "ds", tmp_path / "run"
    folder.mkdir()
    ds.mkdir()
    (ds / ".manifest.lock").touch()  # what a fresh watcher leaves
    r = subprocess.run([*NNUE, "train", "experiment=demo", f"data.path={ds}", "data.wait_for_data_s=1",
                        f"paths.output_dir={out}"], capture_output=True, text=True, env=env(), timeout=300)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 2, r.stderr
    assert "waiting up to 1 s for the first part file" in err[0] and "no part file arrived within 1 s" in err[1]
    watcher = subprocess.Popen([*NNUE, "pack", "--watch", str(folder), "-o", str(ds), "--interval", "0.1",
                                "--settle", "0.3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    train = subprocess.Popen([*NNUE, "train", "experiment=demo", f"data.path={ds}", f"paths.output_dir={out}",
                              "trainer.max_epochs=1", "data.positions_per_epoch=1024", "data.batch_size=256",
                              "model.hidden=8", "trainer.enable_progress_bar=false", "~logger.tensorboard",
                              "data.val_fraction=0.3"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    try:
        first = train.stderr.readline()  # the notice comes before anything else
        assert "waiting up to 600 s for the first part file" in first, first
        time.sleep(1)
        assert train.poll() is None  # waiting, not refused
        cut_dumps(folder, 1, records=300, bad_every=0)
        tout, terr = train.communicate(timeout=600)
        terr = first + terr
    finally:
        train.kill()
        watcher.terminate()
        watcher.communicate(timeout=60)
    assert train.returncode == 0, terr[-3000:]
    assert terr.count("waiting up to 600 s for the first part file") == 1
    assert json.loads((out / "metrics.json").read_text())["global_step"] == 4
