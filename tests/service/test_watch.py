"""``nnue pack --watch``: complete dumps only, new ones only, kill -9 at any moment, clean stops.

The kill test runs a real watcher process and kills it with SIGKILL 8 times: on even rounds the
moment a pack's temporary part file appears (mid-write), on odd rounds after a random delay
(during start-up, a scan, a pack or a manifest merge); each time a new watcher is started on the
same folder. At the end every dump is in the manifest exactly once with every row readable, and
no temporary file is left."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from nnue.pipeline import manifest as mf
from nnue.pipeline.watch import Watcher
from tests.service.service_testlib import NNUE, cut_dumps, dataset_rows, env, nnue


def _watch(folder, dataset, *extra, **kw):
    return subprocess.Popen([*NNUE, "pack", "--watch", str(folder), "-o", str(dataset), "--interval", "0.2",
                             *map(str, extra)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env(), **kw)


def _wait(cond, timeout=60.0, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    raise AssertionError("timed out waiting")


def _manifest_paths(dataset: Path) -> list[str]:
    if not (dataset / mf.MANIFEST).exists():
        return []
    return sorted(e["path"] for e in mf.load(dataset)["files"].values())


def test_half_written_dump_is_never_packed(tmp_path):
    """A writer appends a dump in 6 pieces, pausing 0.3 s (< settle 1 s) between them; the one
    entry packed is the whole file (its sha256 is the final file's)."""
    (src,) = cut_dumps(tmp_path / "src", 1, records=600)
    text = src.read_text()
    folder, ds = tmp_path / "w", tmp_path / "ds"
    folder.mkdir()
    logs = []
    w = Watcher([folder], ds, settle=1.0, interval=0.1, log=logs.append)
    t = threading.Thread(target=w.run, daemon=True)
    dump = folder / "slow.plain"
    with open(dump, "w") as f:
        t.start()
        step = len(text) // 6 + 1
        for i in range(0, len(text), step):
            f.write(text[i:i + step])
            f.flush()
            time.sleep(0.3)
    _wait(lambda: _manifest_paths(ds))
    m = mf.load(ds)
    (e,) = m["files"].values()
    assert e["sha256"] == mf.sha256_file(dump)
    assert e["read"] == 600 and dataset_rows(ds, m) == e["packed"]
    assert sum("packed " in line for line in logs) == 1


def test_marker_and_rename_are_complete_at_once(tmp_path):
    """With settle = 60 s, a NAME.done marker or a rename into place (from a hidden temporary
    name in the watched folder) still packs within seconds; a plain file without either waits."""
    a, b, c = cut_dumps(tmp_path / "src", 3, records=50)
    folder, ds = tmp_path / "w", tmp_path / "ds"
    folder.mkdir()
    p = _watch(folder, ds, "--settle", "60")
    try:
        assert " watching " in p.stdout.readline()  # renames are seen once the observer runs
        (folder / "waiting.plain").write_text(c.read_text())
        (folder / "marked.plain").write_text(a.read_text())
        (folder / "marked.plain.done").write_text("")
        tmp = folder / ".renamed.plain.tmp"
        tmp.write_text(b.read_text())
        os.rename(tmp, folder / "renamed.plain")
        try:
            _wait(lambda: len(_manifest_paths(ds)) == 2, timeout=60)
        except AssertionError:
            p.kill()
            raise AssertionError(p.communicate()) from None
        time.sleep(1.0)
        assert _manifest_paths(ds) == sorted([str(folder / "marked.plain"), str(folder / "renamed.plain")])
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    lines = [line for line in out.splitlines() if " packed " in line and "summary" not in line]
    assert len(lines) == 2 and all("read 50, packed" in line for line in lines), out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_ctrl_c_exit_zero(tmp_path, sig):
    folder, ds = tmp_path / "w", tmp_path / "ds"
    cut_dumps(folder, 2, records=40)
    p = _watch(folder, ds, "--settle", "0")
    _wait(lambda: len(_manifest_paths(ds)) == 2)
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "stopped" in out and "Traceback" not in err


def test_failed_dump_is_logged_counted_and_the_watch_goes_on(tmp_path):
    folder, ds = tmp_path / "w", tmp_path / "ds"
    folder.mkdir()
    (folder / "a-bad.plain").write_text("this is not a plain dump\n")
    cut_dumps(folder, 2, records=40, stem="c-good")
    r = nnue("pack", "--watch", folder, "-o", ds, "--once", "--settle", "0", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout.splitlines()[-1])
    assert (s["packed_files"], s["failed_files"]) == (2, 1)
    m = mf.load(ds)
    assert len(m["files"]) == 2 and str(folder / "a-bad.plain") in {f["path"] for f in m["failed"].values()}
    assert sum(f" failed {folder}" in line for line in r.stdout.splitlines()) == s["failed_files"]
    again = nnue("pack", "--watch", folder, "-o", ds, "--once", "--settle", "0", "--json")
    assert json.loads(again.stdout.splitlines()[-1])["failed_files"] == 0  # unchanged: not retried


def test_missing_folder_is_one_line_status_2(tmp_path):
    r = nnue("pack", "--watch", tmp_path / "nope", "-o", tmp_path / "ds")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"nnue pack: error: {tmp_path / 'nope'}: watched folder does not exist"]
    assert not (tmp_path / "ds").exists()


def test_kill_9_at_any_moment_then_restart(tmp_path):
    rng = random.Random(7)
    folder, ds = tmp_path / "w", tmp_path / "ds"
    dumps = cut_dumps(tmp_path / "src", 12, records=700)
    folder.mkdir()
    for d in dumps[:4]:
        os.rename(d, folder / d.name)
    kills = 0
    for rnd in range(8):
        p = _watch(folder, ds, "--settle", "0.3")
        try:
            if rnd % 2 == 0:  # mid-write: as soon as a temporary part file appears
                _wait(lambda: ds.exists() and any(n.name.endswith(".tmp") for n in ds.iterdir()),
                      timeout=120, step=0.002)
            else:
                time.sleep(rng.uniform(0.0, 2.5))
        except AssertionError:
            pass  # nothing left to pack this round: kill it anyway
        p.kill()
        p.communicate(timeout=30)
        kills += 1
        for d in dumps[4 + rnd: 5 + rnd]:  # the engine goes on writing
            os.rename(d, folder / d.name)
        mf.load(ds) if (ds / mf.MANIFEST).exists() else None  # always a readable manifest
    assert kills == 8
    r = nnue("pack", "--watch", folder, "-o", ds, "--once", "--settle", "0.3", check=True)
    m = mf.load(ds)
    assert _manifest_paths(ds) == sorted(str(folder / d.name) for d in dumps)
    t = mf.totals(m)
    assert t["read"] == 12 * 700 == t["packed"] + sum(t["rejected"].values())
    assert dataset_rows(ds, m) == t["packed"]
    assert not [n.name for n in ds.iterdir() if n.name.endswith(".tmp")], r.stdout
