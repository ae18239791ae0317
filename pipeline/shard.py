"""Packing on a cluster: shards of the inputs, packed apart, merged into one dataset.

- :func:`shard_files`: the K-th of N shards of a list of input files (``nnue pack --shard K/N``).
  A shard is a set of whole files: the files are dealt largest first, each to the shard with the
  fewest bytes so far (ties: the lowest shard number; equal sizes: path order), so that the
  shards hold about the same bytes. The deal is a pure function of the (path, size) pairs, so
  N processes that see the same inputs agree on it without talking to each other.
- :func:`shard_units`: the same deal over byte ranges (``nnue pack --shard K/N``): every input is cut
  into its nominal byte ranges (:mod:`nnue.pipeline.ranges`: ``ceil(size / range)`` of them for an
  uncompressed file in a format that splits, else one), and the (file, range) units are dealt as
  whole files are, by their nominal bytes, so one huge file is spread over all shards. A shard's
  manifest entry for a file it holds only some ranges of lists those ranges' parts
  (``shard_units``), and the merge unions the entries of one input (``manifest.union_entries``).
- :func:`merge_datasets`: ``nnue merge SHARD... -o DATASET`` unions shard datasets into one
  dataset (:func:`merge_shard` per shard).

A merge is atomic and idempotent:

1. every part and rejects file of the shard that the target's manifest does not list yet is
   *moved* into the target folder (``os.replace``; across file systems: copy to a temporary name,
   fsync, rename, then remove the source), and a file already moved by an earlier, interrupted
   merge is recognised by its name and size;
2. the shard's entries go into the target's manifest under the target's writer lock
   (:func:`nnue.pipeline.manifest.merge`: the same lock ``nnue pack`` writers take);
3. ``merged.json`` (the target's path and the shard's input hashes) is written in the shard, and
   the shard's ``manifest.json`` removed: the shard is no longer a dataset of its own.

A crash between 1 and 2 leaves part files in the target that its manifest does not list (readers
never see them) and the shard's manifest still in place, so a rerun finishes steps 2 and 3; a
crash between 2 and 3 leaves entries that are already merged, which step 2 keeps as they are.
A shard already merged (``merged.json``, no ``manifest.json``) is skipped. The same input file in
two shards is merged once (its entry is keyed by sha256); the second copy stays in its shard.
Game ids need no renumbering: they are derived from the games themselves, never from the shard.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from . import manifest as mf
from .atomic import atomic_write_bytes

MERGED = "merged.json"


def parse_shard(text: str) -> tuple[int, int]:
    """``"K/N"`` -> (K, N) with 0 <= K < N; ValueError (one line) otherwise."""
    try:
        k, n = (int(x) for x in str(text).split("/"))
    except ValueError:
        raise ValueError(f"--shard {text!r}: expected K/N, e.g. 0/4 (shards are numbered 0 to N-1)") from None
    if n < 1 or not 0 <= k < n:
        raise ValueError(f"--shard {text}: need N >= 1 and 0 <= K < N (shards are numbered 0 to N-1)")
    return k, n


def shard_files(files: list[Path], k: int, n: int) -> list[Path]:
    """The files of shard ``k`` of ``n`` (module docstring), in their original order.

    files: input files (expanded, as :func:`nnue.pipeline.pack.expand_inputs` returns them).
    Returns a sub-list; the N shards partition ``files``. A shard may be empty (fewer files than
    shards). OSError when a file cannot be stat'ed."""
    sizes = [Path(f).stat().st_size for f in files]
    order = sorted(range(len(files)), key=lambda i: (-sizes[i], str(files[i])))
    load = [0] * n
    owner = [0] * len(files)
    for i in order:
        s = min(range(n), key=lambda j: (load[j], j))
        owner[i] = s
        load[s] += sizes[i]
    return [f for i, f in enumerate(files) if owner[i] == k]


def nominal_units(path: Path, fmt: str, rbytes: int) -> int:
    """Nominal byte ranges of an input (:func:`nnue.pipeline.ranges.nominal_count`), from its
    name, size and format; with ``fmt="auto"`` the format comes from the extension (both formats a
    ``.bin`` may be split alike), else from :func:`~nnue.pipeline.formats.detect_format`."""
    from .formats import detect_format, format_from_extension
    from .ranges import COMPRESSED, nominal_count

    path = Path(path)
    size = path.stat().st_size
    if path.suffix.lower() in COMPRESSED or size <= rbytes:
        return 1
    if fmt == "auto":
        fmt = format_from_extension(path) or detect_format(path)
    return nominal_count(path, fmt, size, rbytes)


def shard_units(files: list[Path], k: int, n: int, rbytes: int, fmt: str = "auto") -> dict[str, list[int]]:
    """The (file, nominal range) units of shard ``k`` of ``n``: {str(path): [range indices]}, for
    the files the shard holds any range of (module docstring). Units are dealt largest first
    (nominal bytes; ties: path, then range index), each to the shard with the fewest bytes so far
    (ties: the lowest shard number): a pure function of the paths, sizes and formats, so N
    processes agree on it without talking. The N shards partition the units."""
    units = []
    for f in files:
        size = Path(f).stat().st_size
        count = nominal_units(Path(f), fmt, rbytes)
        for i in range(count):
            units.append((min(size, (i + 1) * rbytes) - i * rbytes if count > 1 else size, str(f), i))
    units.sort(key=lambda u: (-u[0], u[1], u[2]))
    load = [0] * n
    out: dict[str, list[int]] = {}
    for w, f, i in units:
        s = min(range(n), key=lambda j: (load[j], j))
        load[s] += w
        if s == k:
            out.setdefault(f, []).append(i)
    return {f: sorted(v) for f, v in out.items()}


def _move(src: Path, dst: Path) -> None:
    """Move ``src`` to ``dst`` (same folder semantics as os.replace, also across file systems)."""
    try:
        os.replace(src, dst)
        return
    except OSError as e:
        import errno

        if e.errno != errno.EXDEV:
            raise
    tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
    with open(src, "rb") as fi, open(tmp, "wb") as fo:
        shutil.copyfileobj(fi, fo, 1 << 22)
        fo.flush()
        os.fsync(fo.fileno())
    os.replace(tmp, dst)
    src.unlink()


def merge_shard(shard: str | Path, dataset: str | Path) -> dict:
    """Merge one shard dataset into ``dataset`` (created if needed); see the module docstring.

    Returns {"shard", "status": "merged" | "already merged", "files": entries added,
    "positions": packed rows added}. Raises ManifestError (no manifest, unreadable manifest),
    ValueError (score units differ, or a part file the shard's manifest lists is in neither
    folder), OSError."""
    shard, dataset = Path(shard), Path(dataset)
    if shard.resolve() == dataset.resolve():
        raise ValueError(f"{shard}: is the merge's output itself")
    if not (shard / mf.MANIFEST).exists() and (shard / MERGED).exists():
        return {"shard": str(shard), "status": "already merged", "files": 0, "positions": 0}
    if not shard.is_dir():
        raise FileNotFoundError(f"{shard}: no such shard dataset folder")
    sm = mf.load(shard)
    if sm.get("annotations"):
        raise ValueError(f"{shard}: is annotated (nnue annotate); merge the shards first, then annotate the dataset")
    dataset.mkdir(parents=True, exist_ok=True)
    have = mf.load(dataset)["files"] if (dataset / mf.MANIFEST).exists() else {}
    todo = [e for sha, e in sm["files"].items() if sha not in have or _more_ranges(have[sha], e)]
    _check_layout(shard, sm, dataset)
    for e in todo:
        for name in mf.entry_parts(e) + mf.entry_rejects(e):
            src, dst = shard / name, dataset / name
            if src.exists():
                _move(src, dst)
            elif not dst.exists():
                raise ValueError(f"{shard / mf.MANIFEST}: lists {name}, which is in neither {shard} nor {dataset}")
    mf.merge(dataset, todo, score_unit=sm.get("score_unit"), failed=sm.get("failed"), version=sm["schema_version"])
    atomic_write_bytes(shard / MERGED, (json.dumps({"into": str(dataset.resolve()), "files": sorted(sm["files"])},
                                                  indent=1) + "\n").encode())
    (shard / mf.MANIFEST).unlink()
    return {"shard": str(shard), "status": "merged", "files": len(todo),
            "positions": sum(int(e["packed"]) for e in todo)}


def _check_layout(shard: Path, sm: dict, dataset: Path) -> None:
    """Refuse a shard whose parts are of another layout than the dataset's (a dataset's parts
    share its manifest's layout; a shard with no rows fits any)."""
    if not (dataset / mf.MANIFEST).exists() or not any(e["packed"] for e in sm["files"].values()):
        return
    want = mf.load(dataset)["schema_version"]
    if sm["schema_version"] != want:
        names = {1: "flat", 2: "chained (schema 2)", 3: "chained"}
        raise ValueError(f"{shard}: holds {names.get(sm['schema_version'])} parts and {dataset} "
                         f"{names.get(want)} ones; upgrade the older one first ('nnue convert DATASET --to chained' "
                         f"makes flat or schema-2 parts schema 3), or pack the shards with the dataset's --layout")


def _more_ranges(have: dict, e: dict) -> bool:
    """Does shard entry ``e`` add byte ranges to the dataset's partial entry ``have`` of one input?"""
    return "shard_units" in have and "shard_units" in e and not set(e["shard_units"]) <= set(have["shard_units"])


def _check_union(shards: list[str | Path], dataset: str | Path) -> None:
    """Refuse, before any file is moved, a merge that would stop half way: every shard's
    manifest must load, and the entries of one input in the target and the shards must union
    (the same nominal byte ranges, none twice). Raises ManifestError or ValueError (one line)."""
    have = dict(mf.load(dataset)["files"]) if (Path(dataset) / mf.MANIFEST).exists() else {}
    for shard in map(Path, shards):
        if not (shard / mf.MANIFEST).exists():
            continue  # merged already, or missing: merge_shard says which
        sm = mf.load(shard)
        _check_layout(shard, sm, Path(dataset))
        for sha, e in sm["files"].items():
            if sha not in have:
                have[sha] = e
            elif "shard_units" in have[sha] and "shard_units" in e:
                if have[sha]["range_count"] != e["range_count"] or _more_ranges(have[sha], e):
                    have[sha] = mf.union_entries(have[sha], e)  # raises on ranges cut differently


def merge_datasets(shards: list[str | Path], dataset: str | Path) -> dict:
    """:func:`merge_shard` for each shard in order, after checking that all of them merge
    (:func:`_check_union`: a refused merge moves nothing). Returns {"dataset", "shards": [...],
    "files", "positions"} (what this call added) plus the merged dataset's totals."""
    _check_union(shards, dataset)
    rows = [merge_shard(s, dataset) for s in shards]
    m = mf.load(dataset) if (Path(dataset) / mf.MANIFEST).exists() else mf.new()
    return {"dataset": str(dataset), "shards": rows, "files": sum(r["files"] for r in rows),
            "positions": sum(r["positions"] for r in rows), "totals": mf.totals(m),
            "dataset_files": len(m["files"])}
