"""Dataset manifest (``manifest.json``): inputs, their counts, score units, schema version.

One entry per packed input file, keyed by its sha256::

    {"schema_version": 2, "score_unit": "cp", "files": {"<sha256>": {
        "path", "size", "sha256", "format", "score_unit", "part", "rejects",
        "read", "packed", "rejected": {reason: count}, "castling", "game_ids"}}}

A file packed in several byte ranges (``nnue pack --range-mb``, :mod:`nnue.pipeline.ranges`) has
``"parts"`` and ``"rejects_parts"`` (one each per range, in range order), ``"ranges"`` ([nominal
index, first byte, end byte] per part) and ``"range_count"`` (nominal ranges) instead of ``"part"`` and
``"rejects"``; :func:`entry_parts` / :func:`entry_rejects` list the files of any entry. A shard's
entry for part of a file's ranges also has ``"shard_units"`` (the nominal ranges it holds) and
``"castling_seen"``; :func:`merge` unions such entries, and drops both keys once all ranges are in.

``validated_by_python_chess``: the records validated one by one with python-chess (the rest were
validated in bulk by the compiled core). Absent in entries packed before it.

``game_ids``: how the part's ``game_id`` column was made. ``"content:16"``: a hash of the
position keys of the game's first 16 valid positions (``pack.GameIds``), so one game has one
id in every format and every file. Absent in entries packed before it: SplitMix64 of the
input's sha256 prefix plus the game's ordinal in the file.

``schema_version``: the layout of the dataset's parts (:mod:`nnue.pipeline.parts`): 2, move
chains (what ``nnue pack`` writes into a new dataset), or 1, flat rows (datasets packed before
chains, and ``nnue pack --layout flat``); parts added later (``pack``, ``pack --watch``,
``merge``) take the dataset's layout, and ``nnue convert DATASET --to chained`` upgrades a flat
dataset in place. Each part's own Parquet metadata also names its layout, which is what its
readers go by. A version this build does not read is refused in one line.

Written atomically (temporary file, fsync, rename), so an interrupted run leaves the previous
manifest intact. Invariant checked on load: ``read == packed + sum(rejected)`` per file.

**Concurrent writers.** Several processes may append to one dataset at once (``nnue pack`` runs,
``nnue pack --watch``, ``nnue retrain``). Every change goes through :func:`merge`: it takes an
exclusive ``fcntl.flock`` on ``.manifest.lock`` in the dataset, re-reads the manifest as it is
*now* on disk, adds this writer's entries and renames the new manifest into place before the lock
is released. A writer that only held its own copy and saved it would drop the entries another
writer added in between (two packs both reported success, and the manifest listed one file).
The lock is released by the kernel when its holder dies, so a ``kill -9`` never leaves it stuck.
Readers take no lock: the manifest is always replaced whole by a rename.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

from .atomic import atomic_write_bytes
from .schema import READABLE_VERSIONS, SCHEMA_VERSION

MANIFEST = "manifest.json"
LOCK = ".manifest.lock"


class ManifestError(ValueError):
    pass


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def wait_for_first_part(dataset: str | Path, timeout_s: float, say=None, poll_s: float = 0.5) -> bool:
    """For a dataset folder that exists but holds no manifest yet (``nnue pack --watch`` made it
    and has packed nothing): wait until its manifest lists a packed position, at most
    ``timeout_s`` seconds. ``say(text)`` is called once, when the wait starts. Returns whether it
    waited. Raises ManifestError when nothing arrived in time; a folder that is missing or already
    has a manifest returns False at once (:func:`load` words its problems)."""
    d = Path(dataset)
    if not d.is_dir() or (d / MANIFEST).exists():
        return False
    if say is not None:
        say(f"waiting up to {timeout_s:g} s for the first part file in {d} (no {MANIFEST} yet: "
            "'nnue pack --watch' writes it when it has packed a dump; data.wait_for_data_s sets the wait)")
    deadline = time.monotonic() + timeout_s
    while True:
        if (d / MANIFEST).exists():
            try:
                if totals(load(d))["packed"] > 0:
                    return True
            except ManifestError:
                pass  # being replaced: look again
        if time.monotonic() >= deadline:
            raise ManifestError(f"{d}: no part file arrived within {timeout_s:g} s (data.wait_for_data_s); "
                                "is 'nnue pack --watch' running on it?")
        time.sleep(min(poll_s, max(deadline - time.monotonic(), 0.01)))


def sha256_prefix(path: str | Path, n: int, chunk: int = 1 << 20) -> str:
    """sha256 of the first ``n`` bytes of a file (of all of it when shorter)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while n > 0 and (block := f.read(min(chunk, n))):
            h.update(block)
            n -= len(block)
    return h.hexdigest()


def load(dataset: str | Path) -> dict:
    """Load and check a dataset's manifest. Raises ManifestError naming the problem."""
    path = Path(dataset) / MANIFEST
    if not Path(dataset).is_dir():  # say what the path is, not only that no manifest is in it
        what = "a file, not a dataset folder" if Path(dataset).exists() else "no such folder"
        raise ManifestError(f"{dataset}: {what}; give a dataset folder written by 'nnue pack'")
    if not path.exists():
        raise ManifestError(f"{dataset}: no {MANIFEST}; is this a dataset written by 'nnue pack'?")
    try:
        m = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ManifestError(f"{path}: not valid JSON: {e}") from e
    if not isinstance(m, dict) or not isinstance(m.get("files"), dict):
        raise ManifestError(f"{path}: not a manifest of nnue pack (a JSON object with a 'files' object)")
    if m.get("schema_version") not in READABLE_VERSIONS:
        raise ManifestError(f"{path}: schema version {m.get('schema_version')!r}, a layout this build does not "
                            f"read (it reads {' and '.join(map(str, READABLE_VERSIONS))}); use the nnue-forge "
                            f"that wrote it")
    for sha, f in m["files"].items():
        if f["read"] != f["packed"] + sum(f["rejected"].values()):
            raise ManifestError(f"{path}: counts of {f['path']} do not add up")
    return m


def entry_parts(entry: dict) -> list[str]:
    """The part file names of a manifest entry, in row order: ``[entry["part"]]`` for a file of
    one range (every entry written before byte ranges), else ``entry["parts"]``."""
    return list(entry["parts"]) if "parts" in entry else [entry["part"]]


def entry_rejects(entry: dict) -> list[str]:
    """The rejects file names of a manifest entry, in file order (see :func:`entry_parts`)."""
    return list(entry["rejects_parts"]) if "rejects_parts" in entry else [entry["rejects"]]


def entry_key(entry: dict) -> str:
    """Sort key of entries (their first part's name), the order readers visit the parts in."""
    parts = entry_parts(entry)
    return parts[0] if parts else "part-" + entry["sha256"][:16]


def union_entries(have: dict, new: dict) -> dict:
    """Two entries of one input packed by different shards (each holds some of its byte ranges,
    ``shard_units``) as one: counts summed, parts in range order. When every nominal range is in,
    the result is the entry one ``nnue pack`` writes (no ``shard_units`` / ``castling_seen``)."""
    if have["range_count"] != new["range_count"] or set(have["shard_units"]) & set(new["shard_units"]):
        raise ValueError(f"{new['path']}: its shards were cut into different byte ranges ({have['range_count']} "
                         f"and {new['range_count']} nominal ranges, or overlapping ones); pack every shard with "
                         f"the same --range-mb and --shard K/N of one N")
    units = sorted(set(have["shard_units"]) | set(new["shard_units"]))
    out = dict(have)
    rows = sorted(zip(have["ranges"] + new["ranges"], have["parts"] + new["parts"],
                      have["rejects_parts"] + new["rejects_parts"]), key=lambda t: t[0][0])
    out["ranges"] = [r for r, _, _ in rows]
    out["parts"] = [p for _, p, _ in rows]
    out["rejects_parts"] = [q for _, _, q in rows]
    for k in ("read", "packed", "validated_by_python_chess"):
        out[k] = have.get(k, 0) + new.get(k, 0)
    rej = dict(have["rejected"])
    for k, v in new["rejected"].items():
        rej[k] = rej.get(k, 0) + v
    out["rejected"] = dict(sorted(rej.items()))
    seen = [a + b for a, b in zip(have["castling_seen"], new["castling_seen"])]
    out["castling"] = (None if not any(seen) else "mixed" if all(seen)
                       else "king-takes-rook" if seen[1] else "king-two-squares")
    out["shard_units"], out["castling_seen"] = units, seen
    if "pov_check" in have and "pov_check" in new:  # a PGN's eval-sign counts, over both shards' ranges
        out["pov_check"] = {k: have["pov_check"][k] + new["pov_check"][k] for k in have["pov_check"]}
    if "one_range_because" in new:  # written by the shard that holds its one range
        out["one_range_because"] = new["one_range_because"]
    if len(units) == out["range_count"]:
        del out["shard_units"], out["castling_seen"]
    return out


def new(version: int = SCHEMA_VERSION) -> dict:
    """An empty manifest of layout ``version`` (:data:`nnue.pipeline.schema.SCHEMA_VERSION`: chained)."""
    return {"schema_version": version, "score_unit": None, "files": {}}


def layout(dataset: str | Path) -> int:
    """The layout new parts of a dataset take: its manifest's ``schema_version``, or the default
    (chained) for a folder with no manifest yet."""
    p = Path(dataset) / MANIFEST
    return load(dataset)["schema_version"] if p.exists() else SCHEMA_VERSION


def save(dataset: str | Path, manifest: dict) -> None:
    atomic_write_bytes(Path(dataset) / MANIFEST,
                       (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())


@contextmanager
def locked(dataset: str | Path):
    """Hold the dataset's exclusive writer lock (``fcntl.flock`` on ``DATASET/.manifest.lock``,
    blocking until it is free) for the duration of the ``with`` block."""
    fd = os.open(Path(dataset) / LOCK, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def merge(dataset: str | Path, entries: list[dict] = (), score_unit: str | None = None,
          failed: dict | None = None, lock: bool = True, version: int | None = None) -> dict:
    """Add ``entries`` (manifest file entries, keyed by their ``sha256``) to the dataset's
    manifest under the writer lock: re-read the manifest on disk (or start a new one), check the
    score unit, add what is not there yet, save atomically. An entry already present (the same
    input packed by another writer meanwhile) is kept as it is: packing is idempotent.
    ``failed``: {sha256: {"path", "size", "error"}} of inputs that could not be packed at all
    (``nnue pack --watch`` records them so that it does not retry an unchanged file forever).
    ``lock=False``: the caller already holds :func:`locked` (``flock`` on a second descriptor
    would wait for the first). version: the layout of a manifest made here (none on disk yet;
    default chained). Returns the merged manifest. Raises ManifestError (unreadable
    manifest) or ValueError (a score unit other than the dataset's)."""
    from contextlib import nullcontext

    with locked(dataset) if lock else nullcontext():
        m = load(dataset) if (Path(dataset) / MANIFEST).exists() else new(version or SCHEMA_VERSION)
        if score_unit is not None:
            if m["score_unit"] not in (None, score_unit):
                raise ValueError(f"{dataset} holds scores in {m['score_unit']}, not {score_unit}")
            m["score_unit"] = score_unit
        for e in entries:
            have = m["files"].get(e["sha256"])
            if have is not None and "shard_units" in have and "shard_units" in e \
                    and not set(e["shard_units"]) <= set(have["shard_units"]):
                m["files"][e["sha256"]] = union_entries(have, e)  # more ranges of one input (shards)
            else:
                m["files"].setdefault(e["sha256"], e)
                if e.get("replaces") in m["files"] and m["files"][e["sha256"]] is e:
                    # a grown input packed from where its earlier version stopped (pack.append_entry):
                    # the new entry holds the earlier parts too
                    del m["files"][e["replaces"]]
            m.get("failed", {}).pop(e["sha256"], None)
        if failed:
            m.setdefault("failed", {}).update({k: v for k, v in failed.items() if k not in m["files"]})
        save(dataset, m)
    return m


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists on this machine (signal 0; a process of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_orphans(dataset: str | Path) -> list[str]:
    """Remove temporary files that writers killed mid-way left in ``dataset``: part and rejects
    files of processes no longer alive (``.part-<key>.<pid>.parquet.tmp``), and manifest
    temporaries (only ever written under the lock, so orphans while we hold it). Returns their
    names. Only for writers on this machine: a pid is looked up locally."""
    import re

    pat = re.compile(r"^\.(part|rejects)-[0-9a-f]+(?:-\d+)?\.(\d+)\.(parquet|jsonl)\.tmp$")
    removed = []
    with locked(dataset):
        for p in Path(dataset).iterdir():
            m = pat.match(p.name)
            if (m and not pid_alive(int(m.group(2)))) or (
                    p.name.startswith(f".{MANIFEST}.") and p.name.endswith(".tmp")):
                p.unlink(missing_ok=True)
                removed.append(p.name)
    return sorted(removed)


def digest(dataset: str | Path) -> str:
    """sha256 of the manifest file: identifies a dataset's contents in net provenance."""
    return sha256_file(Path(dataset) / MANIFEST)


def totals(manifest: dict) -> dict:
    """Sum of read/packed/rejected-by-reason over all files."""
    read = packed = 0
    rejected: dict[str, int] = {}
    for f in manifest["files"].values():
        read += f["read"]
        packed += f["packed"]
        for k, v in f["rejected"].items():
            rejected[k] = rejected.get(k, 0) + v
    return {"read": read, "packed": packed, "rejected": rejected}
