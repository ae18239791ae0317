"""Dataset manifest (``manifest.json``): inputs, their counts, score units, schema version.

One entry per packed input file, keyed by its sha256::

    {"schema_version": 1, "score_unit": "cp", "files": {"<sha256>": {
        "path", "size", "sha256", "format", "score_unit", "part", "rejects",
        "read", "packed", "rejected": {reason: count}}}}

Written atomically (temporary file, fsync, rename), so an interrupted run leaves the previous
manifest intact. Invariant checked on load: ``read == packed + sum(rejected)`` per file.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .atomic import atomic_write_bytes
from .schema import SCHEMA_VERSION

MANIFEST = "manifest.json"


class ManifestError(ValueError):
    pass


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
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
    if m.get("schema_version") != SCHEMA_VERSION:
        raise ManifestError(f"{path}: schema version {m.get('schema_version')}, "
                            f"this build reads {SCHEMA_VERSION}")
    for sha, f in m["files"].items():
        if f["read"] != f["packed"] + sum(f["rejected"].values()):
            raise ManifestError(f"{path}: counts of {f['path']} do not add up")
    return m


def new() -> dict:
    return {"schema_version": SCHEMA_VERSION, "score_unit": None, "files": {}}


def save(dataset: str | Path, manifest: dict) -> None:
    atomic_write_bytes(Path(dataset) / MANIFEST,
                       (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())


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
