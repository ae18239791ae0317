"""Keep a dataset up to date with folders an engine writes dumps into (``nnue pack --watch``).

A dump is packed once it is *complete*, which is one of:

- it was renamed into place (an inotify ``moved-to`` event: writers that write ``.name.tmp`` and
  rename it are picked up at once);
- a marker ``NAME.done`` exists beside it;
- its size and mtime have not changed for ``settle`` seconds (as seen by this process).

A half-written dump is therefore never packed (unless its writer pauses for longer than
``settle`` and writes neither a marker nor through a rename). Files whose names start with ``.``
and files without a dump extension (``*.tmp``, ``*.done``, …) are never candidates.

Only inputs whose sha256 is not in the manifest are packed (:func:`nnue.pipeline.pack.pack`
appends idempotently and merges under the dataset's writer lock, so a watcher can run beside other
writers). A dump that cannot be packed at all (wrong format, unreadable) is logged, recorded under
``"failed"`` in the manifest by sha256 (so an unchanged file is not retried after a restart; a
changed one has a new sha256), counted, and the watcher goes on with the next file. Records a
reader rejects are counted in the manifest's ``rejected`` as for any pack.

**Crash safety.** Everything a pack writes is renamed into place when complete and the manifest
is replaced atomically, so ``kill -9`` at any moment leaves at worst temporary files of the dead
process (removed by :func:`nnue.pipeline.manifest.remove_orphans` when the next watcher starts);
a restart re-scans the folders and packs what the manifest does not list yet.

**Detection.** The folders are re-scanned every ``interval`` seconds (polling); where inotify
works, a ``watchdog`` observer wakes the loop early and reports renames. The scan is what the
rules above rest on, because inotify misses writes made by other machines to NFS or Lustre, where
the cluster's engines often write; inotify only lowers the latency and tells renames apart.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from . import manifest as mf
from .formats import FormatError, ReaderOptions

DONE_SUFFIX = ".done"


class Stop(BaseException):
    """Raised in the main thread by SIGTERM: stop at once, cleanly (temporary files removed)."""


@dataclass
class WatchSummary:
    """Per run: files packed, already packed (skipped), failed; positions read/packed/rejected."""

    packed_files: int = 0
    skipped_files: int = 0
    failed_files: int = 0
    read: int = 0
    packed: int = 0
    rejected: Counter = field(default_factory=Counter)
    failures: list = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"packed_files": self.packed_files, "skipped_files": self.skipped_files,
                "failed_files": self.failed_files, "read": self.read, "packed": self.packed,
                "rejected": dict(sorted(self.rejected.items())), "failures": self.failures}


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class Watcher:
    """Watch ``folders`` (recursively) and pack complete, new dumps into ``dataset``.

    folders: existing folders (FileNotFoundError naming the first one that is not a folder).
    settle: seconds a dump's (size, mtime) must stay unchanged without a rename or a marker.
    interval: seconds between scans. log: called with one line of text per event (default: print).
    fmt, score_unit, options, dedup: as for :func:`nnue.pipeline.pack.pack`. inotify: use a
    watchdog observer besides the scans (falls back to scans alone where it cannot start).
    """

    def __init__(self, folders: Iterable[str | Path], dataset: str | Path, *, fmt: str = "auto",
                 score_unit: str = "auto", options: ReaderOptions = ReaderOptions(), dedup: bool = False,
                 settle: float = 5.0, interval: float = 2.0, log: Callable[[str], None] | None = None,
                 inotify: bool = True):
        self.folders = [Path(f) for f in folders]
        if not self.folders:
            raise ValueError("--watch needs a folder")
        for f in self.folders:
            if not f.is_dir():
                raise FileNotFoundError(f"{f}: watched folder does not exist"
                                        + (" (it is a file)" if f.exists() else ""))
        if settle < 0 or interval <= 0:
            raise ValueError(f"settle must be ≥ 0 and interval > 0 (got {settle}, {interval})")
        self.dataset = Path(dataset)
        self.fmt, self.score_unit, self.options, self.dedup = fmt, score_unit, options, dedup
        self.settle, self.interval = float(settle), float(interval)
        self.log = log or (lambda line: print(line, flush=True))
        self.summary = WatchSummary()
        self._seen: dict[Path, tuple[int, int, float]] = {}   # path -> size, mtime_ns, since
        self._handled: dict[Path, tuple[int, int]] = {}       # path -> state when handled
        self._moved: set[Path] = set()
        self._wake = threading.Event()
        self._observer = None
        self._inotify = inotify

    # --- detection -----------------------------------------------------------------------
    def _start_observer(self) -> None:
        if not self._inotify:
            return
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer

            watcher = self

            class Handler(FileSystemEventHandler):
                def on_moved(self, event):
                    if not event.is_directory:
                        watcher._moved.add(Path(os.fsdecode(event.dest_path)))
                    watcher._wake.set()

                def on_any_event(self, event):
                    if event.event_type != "moved":
                        watcher._wake.set()

            obs = Observer()
            for f in self.folders:
                obs.schedule(Handler(), str(f), recursive=True)
            obs.daemon = True
            obs.start()
            self._observer = obs
        except Exception as e:  # inotify limits, unsupported file system: the scans still work
            self.log(f"{_stamp()} inotify unavailable ({e}); polling every {self.interval:g} s")

    def _stop_observer(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None

    def candidates(self) -> list[Path]:
        """Dump files in the folders (dump extension, not hidden), sorted."""
        from .pack import expand_inputs

        files, _ = expand_inputs(self.folders)
        return files

    def _complete(self, path: Path, size: int, mtime: int, now: float) -> bool:
        prev = self._seen.get(path)
        if prev is None or prev[:2] != (size, mtime):
            # first seen (or changed): unchanged since its mtime, so a file last written at least
            # `settle` s ago (by the wall clock) has settled already; only a newer one is watched
            age = max(0.0, time.time() - mtime / 1e9)
            self._seen[path] = (size, mtime, now - (age if prev is None else 0.0))
            prev = self._seen[path]
        if Path(f"{path}{DONE_SUFFIX}").exists():
            return True
        if path in self._moved:
            return True
        return now - prev[2] >= self.settle

    def scan(self) -> tuple[list[Path], int]:
        """Complete dumps not yet handled in their current state, and how many are still settling."""
        now = time.monotonic()
        ready, waiting = [], 0
        for path in self.candidates():
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            state = (st.st_size, st.st_mtime_ns)
            if self._handled.get(path) == state:
                continue
            if self._complete(path, *state, now):
                ready.append(path)
            else:
                waiting += 1
        return ready, waiting

    # --- packing -------------------------------------------------------------------------
    def handle(self, path: Path) -> None:
        """Pack one complete dump (or skip it, or record its failure); one log line."""
        from .pack import pack

        try:
            st = path.stat()
            sha = mf.sha256_file(path)
        except OSError as e:
            self.log(f"{_stamp()} gone {path}: {e}")
            return
        state = (st.st_size, st.st_mtime_ns)
        m = mf.load(self.dataset) if (self.dataset / mf.MANIFEST).exists() else mf.new()
        if sha in m["files"]:
            self.summary.skipped_files += 1
            self.log(f"{_stamp()} already packed {path} (sha256 {sha[:16]})")
        elif sha in m.get("failed", {}):
            self.summary.skipped_files += 1
            self.log(f"{_stamp()} failed before, not retried {path}: {m['failed'][sha]['error']}")
        else:
            try:
                s = pack([path], self.dataset, fmt=self.fmt, score_unit=self.score_unit,
                         options=self.options, progress=False, dedup=self.dedup)
            except (FormatError, mf.ManifestError, ValueError, OSError, OverflowError, KeyError) as e:
                if isinstance(e, mf.ManifestError):
                    raise  # the dataset itself is unreadable: nothing more can be packed
                msg = " ".join(str(e).split())
                self.summary.failed_files += 1
                self.summary.failures.append({"path": str(path), "error": msg})
                mf.merge(self.dataset, [], failed={sha: {"path": str(path), "size": st.st_size, "error": msg}})
                self.log(f"{_stamp()} failed {path}: {msg}")
            else:
                rej = sum(s["rejected"].values())
                if s["files"]:
                    self.summary.packed_files += 1
                else:
                    self.summary.skipped_files += 1
                self.summary.read += s["read"]
                self.summary.packed += s["packed"]
                self.summary.rejected.update(s["rejected"])
                grew = next((f for f in s["files"] if f.get("replaces")), None)
                self.log(f"{_stamp()} packed {path}: read {s['read']:,}, packed {s['packed']:,}, "
                         f"rejected {rej:,}" + (f" (its new bytes from byte {grew['appended'][-1]['from_byte']:,}: "
                                                f"the file grew)" if grew else ""))
                for w in s.get("warnings", []):
                    self.log(f"{_stamp()} warning: {w}")
        self._handled[path] = state
        self._moved.discard(path)

    def _idle_line(self) -> str:
        from . import formats
        from .ranges import COMPRESSED

        exts = ", ".join(sorted(formats.EXTENSIONS))
        return (f"waiting for new dumps in {', '.join(map(str, self.folders))}: files named *{{{exts}}} "
                f"(also {', '.join(sorted(COMPRESSED))}-compressed), each taken once complete (renamed into the "
                f"folder, or NAME{DONE_SUFFIX} written beside it, or unchanged for {self.settle:g} s)")

    def _waiting_line(self, n: int) -> str:
        return (f"{n} dump(s) still being written: each taken once renamed into place, marked by "
                f"NAME{DONE_SUFFIX}, or unchanged for {self.settle:g} s")

    def pass_once(self) -> int:
        """One scan and the packing of whatever is complete. Returns dumps still settling."""
        ready, waiting = self.scan()
        for path in ready:
            self.handle(path)
        return waiting

    def run(self, once: bool = False) -> WatchSummary:
        """Watch until SIGTERM or Ctrl-C (or, with ``once``, until every dump present at the start
        is handled: dumps still settling are waited for). Returns the summary."""
        self.dataset.mkdir(parents=True, exist_ok=True)
        removed = mf.remove_orphans(self.dataset)
        if removed:
            self.log(f"{_stamp()} removed {len(removed)} temporary file(s) of dead processes: "
                     + ", ".join(removed))
        old = None
        if threading.current_thread() is threading.main_thread():
            def on_term(signum, frame):
                raise Stop()
            old = signal.signal(signal.SIGTERM, on_term)
        self._start_observer()
        mode = "inotify + scans" if self._observer is not None else "scans"
        self.log(f"{_stamp()} watching {', '.join(map(str, self.folders))} -> {self.dataset} "
                 f"({mode} every {self.interval:g} s, settle {self.settle:g} s)")
        deadline = time.monotonic() + max(3 * self.settle, 10.0)
        said_idle, said_waiting = False, 0  # the first idle scan says what it waits for; settling dumps when their count changes
        try:
            while True:
                waiting = self.pass_once()
                if waiting and waiting != said_waiting:
                    self.log(f"{_stamp()} {self._waiting_line(waiting)}")
                elif not waiting and not said_idle and not once:
                    self.log(f"{_stamp()} {self._idle_line()}")
                    said_idle = True
                said_waiting = waiting
                if once and not waiting:
                    break
                if once and time.monotonic() > deadline:
                    self.log(f"{_stamp()} {waiting} dump(s) still being written; left for the next run")
                    break
                timeout = self.interval if not once else min(self.interval, max(self.settle / 4, 0.05))
                self._wake.wait(timeout)
                self._wake.clear()
        except (Stop, KeyboardInterrupt):
            self.log(f"{_stamp()} stopped")
        finally:
            self._stop_observer()
            if old is not None:
                signal.signal(signal.SIGTERM, old)
        s = self.summary
        self.log(f"{_stamp()} summary: {s.packed_files} file(s) packed, {s.skipped_files} skipped (packed or failed before), "
                 f"{s.failed_files} failed; {s.packed:,} of {s.read:,} positions packed")
        return s


def cli_watch(args) -> int:
    """``nnue pack --watch``: argparse namespace of ``nnue pack`` -> exit status (0 when stopped
    by SIGTERM or Ctrl-C; 2 for a folder that does not exist, raised as FileNotFoundError)."""
    import json

    if args.inputs:
        raise ValueError("--watch takes its folders from --watch DIR, not INPUT arguments")
    w = Watcher(args.watch, args.output, fmt=args.format, score_unit=args.score_unit,
                options=ReaderOptions(pgn_pov=args.pgn_pov), dedup=args.dedup, settle=args.settle,
                interval=args.interval)
    s = w.run(once=args.once)
    if args.json:
        print(json.dumps(s.to_dict()), flush=True)
    return 0
