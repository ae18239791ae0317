"""Stream shuffled, filtered batches of packed boards from Parquet datasets.

:class:`PackedStream` is a torch ``IterableDataset`` that yields *packed* batches (32 bytes a
position); :func:`nnue.pipeline.batch.to_sparse_batch` expands them into feature indices on the
training device (DESIGN.md: ship packed boards as far as possible).

Order of work per epoch: list every (file, row group) of every dataset (a *unit*); shard the
units over DDP ranks and DataLoader workers (disjoint, round-robin); visit them in a seeded random
order; apply the train/validation split (by game id) and the filters (vectorised over the row
group); push the surviving rows into a shuffle buffer; emit batches of a fixed size from the
shuffled buffer. Memory is bounded by the shuffle buffer plus one row group, whatever the dataset
size (``tests/stream/test_loader.py`` measures it).

**Interleaving** (``weights``): with one weight per dataset, each dataset is a *source* and the
buffer is fed one unit at a time from the source furthest behind its share (fewest rows fed
relative to its weight), so the rows that reach the buffer, and so the batches, follow the weights.
A one-pass epoch ends when the first source runs out; without weights the datasets are pooled.

**Epoch length.** By default an epoch is one pass over the shard. With ``positions_per_epoch``
it is that many positions over all ranks: each rank yields ``positions_per_epoch // (world_size ·
batch_size)`` batches, cycling its shard (a new shuffle each pass) as often as needed, and epoch
e continues roughly where epoch e − 1 stopped (bullet's superbatches).

**Equal batch counts under DDP** (no rank waits at the end of an epoch for a rank that has
stopped): with ``world_size > 1`` every rank yields exactly the same number of batches per epoch,
computed identically on every rank from what all ranks can see, never from the rows a rank
happens to read: the ``positions_per_epoch`` count above, or for a one-pass epoch
``floor(min over ranks of E_r / batch_size)``, where E_r is rank r's rows from the Parquet
metadata times the share of rows that survive the split and filters, estimated on a seeded sample
of row groups (:meth:`PackedStream.keep_fraction`). A rank with rows left over stops early; a rank
that runs short starts its shard again. Within a rank the count is split over DataLoader workers
in proportion to their rows.

**New data between epochs** (:meth:`PackedStream.refresh`): the manifests are read again and the
part files added since (``nnue pack``, ``nnue pack --watch``) join the stream from the next epoch
on; parts are immutable (named by their input's sha256), so the units already known stay as they
are. The train/validation split stays a pure function of the game id, so a game never moves
between train and validation. ``parts_log`` records, per epoch (counted from 1: ``set_epoch(e)``
logs ``e + 1``, as the trainer's log lines number epochs), which part files were known at its
start and how many rows it read from each. The trainer refreshes only its training stream unless
``data.refresh_val``: the validation set stays the one of the run's start.

Sharding: a source's units go round-robin to the ``world_size · num_workers`` shards. With
weighted sources or fixed-length epochs, a source with fewer units than shards is read whole by
every shard (its rows repeat across ranks); a pooled one-pass epoch keeps every row exactly once.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import json
import os

import sys

import numpy as np
import pyarrow.parquet as pq
import torch

from . import manifest as mf
from .parts import Group, PartError, layout, open_part
from .schema import ANNOTATION_COLUMNS, FLAG_SCORE_MATE, FLAG_SCORE_NONE

# Stockfish's generator writes internal units; nnue-pytorch converts with cp = 100·score/208.
SF_INTERNAL_PER_PAWN = 208
# ANNOTATION_COLUMNS: optional columns written by ``nnue annotate`` (:mod:`nnue.pipeline.annotate`):
# carried into the batch as float32 centipawns (stm POV, NaN where null: in check) when every part has them.


@dataclass(frozen=True)
class Filters:
    """Stream-time filters; each skipped row is counted under the filter's name.

    skip_in_check: side to move in check. skip_capture: the recorded best move is a capture
    or a promotion. skip_score_none: no score. skip_mate: mate scores. max_abs_score: skip
    |score| above this many centipawns (None = no cap). min_ply: skip plies below this.
    min_pieces: skip positions with fewer pieces. random_skip: skip each row with this
    probability (seeded).
    """

    skip_in_check: bool = True
    skip_capture: bool = True
    skip_score_none: bool = True
    skip_mate: bool = True
    max_abs_score: int | None = None
    min_ply: int = 0
    min_pieces: int = 0
    random_skip: float = 0.0


def split_mask(game_id: np.ndarray, split: str, val_fraction: float) -> np.ndarray:
    """Train/validation split by game: a game is in validation when
    ``game_id % 10_000 < val_fraction · 10_000``. game_id: (N,) uint64. split: train|val|all."""
    if split == "all":
        return np.ones(game_id.shape, bool)
    is_val = (game_id % np.uint64(10_000)) < np.uint64(round(val_fraction * 10_000))
    if split == "val":
        return is_val
    if split == "train":
        return ~is_val
    raise ValueError(f"split {split!r} not one of train, val, all")


def filter_mask(cols: dict[str, np.ndarray], f: Filters, counts: Counter, rng: np.random.Generator,
                score_cp: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Apply ``f`` to the rows of one row group still in ``keep`` ((N,) bool); count the rows
    each filter removes (a row is counted by the first filter that removes it)."""
    keep = keep.copy()

    def drop(name: str, mask: np.ndarray):
        nonlocal keep
        hit = mask & keep
        counts[name] += int(hit.sum())
        keep &= ~mask

    if f.skip_score_none:
        drop("score_none", (cols["flags"] & FLAG_SCORE_NONE) != 0)
    if f.skip_mate:
        drop("mate", (cols["flags"] & FLAG_SCORE_MATE) != 0)
    if f.skip_in_check:
        drop("in_check", cols["in_check"])
    if f.skip_capture:
        drop("capture", cols["best_move_is_capture"])
    if f.max_abs_score is not None:
        drop("max_abs_score", np.abs(score_cp) > f.max_abs_score)
    if f.min_ply:
        drop("min_ply", cols["ply"] < f.min_ply)
    if f.min_pieces:
        drop("min_pieces", cols["piece_count"] < f.min_pieces)
    if f.random_skip > 0:
        drop("random_skip", rng.random(len(keep)) < f.random_skip)
    return keep


def dataset_parts(paths: Sequence[str | Path]) -> list[tuple[Path, float]]:
    """Part files of the datasets, with each dataset's score scale to centipawns.
    Raises ManifestError for a folder that is not a dataset."""
    out = []
    for d in map(Path, paths):
        m = mf.load(d)
        scale = 100.0 / SF_INTERNAL_PER_PAWN if m["score_unit"] == "sf-internal" else 1.0
        for entry in sorted(m["files"].values(), key=mf.entry_key):
            if entry["packed"]:
                out.extend((d / name, scale) for name in mf.entry_parts(entry))
    return out


@dataclass(frozen=True)
class Unit:
    """One row group: part file index (into ``PackedStream.parts``), row group, rows, source."""

    file: int
    row_group: int
    rows: int
    source: int


def _largest_remainder(total: int, shares: Sequence[float]) -> list[int]:
    """Split ``total`` into integers proportional to ``shares`` (deterministic)."""
    s = float(sum(shares))
    if s <= 0:
        shares, s = [1.0] * len(shares), float(len(shares))
    exact = [total * x / s for x in shares]
    out = [int(np.floor(e)) for e in exact]
    order = sorted(range(len(shares)), key=lambda i: (-(exact[i] - out[i]), i))
    for i in order[:total - sum(out)]:
        out[i] += 1
    return out


class PackedStream(torch.utils.data.IterableDataset):
    """Yields dicts ``{"boards": (B, 32) uint8, "score": (B,) float32 centipawns stm POV,
    "result": (B,) float32 in {0, 0.5, 1} stm POV}`` as CPU tensors, plus ``base_eval`` /
    ``teacher_eval`` ((B,) float32 centipawns stm POV, NaN = null) when every part of the
    datasets has that column (``nnue annotate``; listed in ``self.extra_columns``).

    paths: dataset folders. batch_size: rows per batch. shuffle_buffer: rows held for shuffling
    (0 = no shuffle, file order). split/val_fraction: see :func:`split_mask`. filters:
    :class:`Filters`. seed: base seed; epoch ``e`` uses ``seed + e`` (call :meth:`set_epoch`).
    drop_last: drop the final partial batch of a one-pass, single-process epoch.
    rank/world_size: DDP sharding. weights: one positive weight per path to interleave the
    datasets in those proportions (None: pool them). positions_per_epoch: fixed epoch length in
    positions over all ranks (None: one pass). even_batches: with ``world_size > 1``, give
    every rank the same number of batches (default; False: each rank reads its whole shard once,
    for tools that do not synchronise ranks). strict: a damaged part raises its PartError
    (naming the file, and the row group and row where known) instead of being quarantined, for
    commands that promise every row (``nnue eval --dataset``, ``nnue export --data``). See the
    module docstring for the rules.
    ``counts`` holds, after an epoch in this process, rows read and rows skipped per filter.
    Raises ValueError on bad arguments, ManifestError on a folder that is not a dataset.
    """

    def __init__(self, paths: Sequence[str | Path], batch_size: int, shuffle_buffer: int = 1 << 20,
                 split: str = "train", val_fraction: float = 0.05, filters: Filters = Filters(),
                 seed: int = 0, drop_last: bool = True, rank: int = 0, world_size: int = 1,
                 weights: Sequence[float] | None = None, positions_per_epoch: int | None = None,
                 even_batches: bool = True, parts_log: str | Path | None = None, strict: bool = False):
        super().__init__()
        self.strict = strict
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        if split not in ("train", "val", "all"):
            raise ValueError(f"split {split!r} not one of train, val, all")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} not in 0..world_size-1 ({world_size})")
        paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
        if weights is not None:
            weights = [float(w) for w in weights]
            if len(weights) != len(paths) or min(weights) <= 0:
                raise ValueError(f"weights must be one positive number per dataset path "
                                 f"({len(paths)} paths, weights {weights})")
        if positions_per_epoch is not None and positions_per_epoch < batch_size * world_size:
            raise ValueError(f"positions_per_epoch {positions_per_epoch} is less than one batch per "
                             f"rank ({batch_size} x {world_size})")
        self.parts: list[tuple[Path, float]] = []
        self.units: list[Unit] = []
        self.extra_columns: list[str] = list(ANNOTATION_COLUMNS)  # kept only if every part has them
        self.paths, self._weighted = [Path(p) for p in paths], weights is not None
        self.parts_log = None if parts_log is None else Path(parts_log)
        self._add_parts(self.list_parts())
        if not self.parts:
            self.extra_columns = []
        self.weights = np.array(weights if weights is not None else [1.0])
        for d in range(len(self.weights) if weights is not None else 0):
            if not self._source_units(d):
                raise ValueError(f"dataset {paths[d]} holds no rows: it cannot be interleaved")
        self.batch_size, self.shuffle_buffer = batch_size, shuffle_buffer
        self.split, self.val_fraction, self.filters = split, val_fraction, filters
        self.seed, self.drop_last = seed, drop_last
        self.rank, self.world_size = rank, world_size
        self.positions_per_epoch, self.even_batches = positions_per_epoch, even_batches
        self.epoch = 0
        self.counts: Counter = Counter()
        self._keep: np.ndarray | None = None

    # --- the part files: at construction and after new data arrives ----------------------

    def list_parts(self) -> list[tuple[int, str, float]]:
        """(dataset index, part file, score scale) of every part the manifests list now.
        Raises ManifestError for a folder that is not a dataset."""
        return [(d, str(part), scale) for d, path in enumerate(self.paths)
                for part, scale in dataset_parts([path])]

    def _add_parts(self, listing: Sequence[tuple[int, str, float]]) -> tuple[int, int]:
        # one dataset may be given twice (two weighted sources): a part is known per source
        known = self.__dict__.setdefault("_known", set())
        order = self.__dict__.setdefault("_listing", [])
        new_parts = rows = 0
        for d, part, scale in listing:
            if (d, part) in known:
                continue
            order.append((d, str(part), scale))
            known.add((d, part))
            try:
                pfile = open_part(part)
            except PartError as e:  # missing, not Parquet: quarantined whole (it has no units)
                self._quarantine(None, e)
                continue
            layout(pfile)  # a part of a layout this build does not read: one line, before any epoch
            meta = pfile.metadata
            self.extra_columns = [c for c in self.extra_columns if c in pfile.schema_arrow.names]
            fi = len(self.parts)
            self.parts.append((Path(part), scale))
            source = d if self._weighted else 0
            self.units += [Unit(fi, rg, meta.row_group(rg).num_rows, source)
                           for rg in range(meta.num_row_groups)]
            new_parts += 1
            rows += meta.num_rows
        return new_parts, rows

    def known_parts(self) -> list[tuple[int, str, float]]:
        """(dataset index, part file, score scale) of every part the stream reads, in the order it
        took them in (the order its units are numbered in): with :meth:`restrict_to`, what
        rebuilds this stream's epochs exactly (a resumed run replays an epoch from it)."""
        return [tuple(x) for x in self.__dict__.get("_listing", [])]

    def restrict_to(self, listing: Sequence[tuple[int, str, float]]) -> None:
        """Read exactly the parts of ``listing`` (:meth:`known_parts` of an earlier stream), in its
        order, forgetting the others: parts packed since then join at the next :meth:`refresh`."""
        self.parts, self.units, self._known, self._listing = [], [], set(), []
        self.__dict__.pop("_quarantined", None)  # keyed by file index, which this renumbers
        self.extra_columns = list(ANNOTATION_COLUMNS)
        self._add_parts([(int(d), str(p), float(sc)) for d, p, sc in listing])
        if not self.parts:
            self.extra_columns = []
        self._keep = None
        self.__dict__.pop("_files", None)

    def refresh(self, listing: Sequence[tuple[int, str, float]] | None = None) -> dict:
        """Take in the part files added to the datasets since the stream was built (or last
        refreshed): call between epochs. listing: :meth:`list_parts` as computed elsewhere (under
        DDP rank 0's, broadcast, so that every rank adds the same parts). Returns
        ``{"new_parts", "new_positions"}`` (positions: all rows of the new parts, before the split
        and the filters)."""
        new_parts, rows = self._add_parts(self.list_parts() if listing is None else listing)
        if new_parts:
            self._keep = None  # the estimate covers the new row groups too
            self.__dict__.pop("_files", None)
        return {"new_parts": new_parts, "new_positions": rows}

    # --- planning: which units, how many batches -----------------------------------------

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    @property
    def num_sources(self) -> int:
        return len(self.weights)

    def _source_units(self, source: int) -> list[Unit]:
        return [u for u in self.units if u.source == source]

    @property
    def fixed_length(self) -> bool:
        """Whether an epoch has a batch count fixed in advance (then the shards cycle)."""
        return self.positions_per_epoch is not None or (self.world_size > 1 and self.even_batches)

    def shard_units(self, rank: int, wid: int = 0, workers: int = 1) -> list[list[Unit]]:
        """Units of each source for DataLoader worker ``wid`` of ``workers`` on ``rank``:
        round-robin; a source with fewer units than shards is read whole by every shard when
        sources are weighted or the epoch has a fixed length (a one-pass, pooled epoch keeps
        every row exactly once, so some shards may then have nothing)."""
        shards, shard = self.world_size * workers, rank * workers + wid
        share_small = self.num_sources > 1 or self.fixed_length
        out = []
        for d in range(self.num_sources):
            units = self._source_units(d)
            out.append(units if share_small and len(units) < shards else units[shard::shards])
        return out

    def keep_fraction(self) -> np.ndarray:
        """Estimated share of each source's rows that survive the split and the filters, from
        row groups chosen by the seed alone, so the same on every rank (at least 4 row groups and
        131,072 rows, at most 16 row groups; no board column). Used only to size fixed-length
        epochs, never to decide what a row is."""
        if self._keep is None:
            keep = []
            for d in range(self.num_sources):
                units = self._source_units(d)
                order = np.random.default_rng([self.seed, 7919, d]).permutation(len(units))
                kept = total = 0
                for n_read, i in enumerate(order[:16]):
                    if n_read >= 4 and total >= 131_072:
                        break
                    if units[i].file in self.quarantined:
                        continue
                    try:
                        cols, score_cp = self._read_columns(units[i])
                    except PartError as e:
                        self._quarantine(units[i].file, e)
                        continue
                    mask = (split_mask(cols["game_id"], self.split, self.val_fraction)
                            if self.split != "all" else np.ones(len(score_cp), bool))
                    no_skip = Filters(**{**self.filters.__dict__, "random_skip": 0.0})
                    mask = filter_mask(cols, no_skip, Counter(), np.random.default_rng(0), score_cp, mask)
                    kept, total = kept + int(mask.sum()), total + len(mask)
                keep.append(kept / max(total, 1) * (1.0 - self.filters.random_skip))
            self._keep = np.array(keep)
        return self._keep

    def _expected_rows(self, units: list[list[Unit]]) -> float:
        """Rows a shard yields before its first source runs out, by the estimate above."""
        w = self.weights / self.weights.sum()
        keep = self.keep_fraction()
        return min(sum(u.rows for u in us) * keep[d] / w[d] for d, us in enumerate(units))

    def batches_per_epoch(self) -> int | None:
        """Batches every rank yields per epoch when that number is fixed (``positions_per_epoch``,
        or DDP with ``even_batches``; the same number on every rank, whatever its shard and its
        number of DataLoader workers); None for a one-pass epoch that ends when the data does."""
        if self.positions_per_epoch is not None:
            return self.positions_per_epoch // (self.batch_size * self.world_size)
        if not self.fixed_length:
            return None
        rows = min(self._expected_rows(self.shard_units(r)) for r in range(self.world_size))
        return int(rows // self.batch_size)

    def _worker_quota(self, wid: int, workers: int) -> int | None:
        total = self.batches_per_epoch()
        if total is None or workers == 1:
            return total
        rows = [self._expected_rows(self.shard_units(self.rank, w, workers)) for w in range(workers)]
        return _largest_remainder(total, rows)[wid]

    def __len__(self) -> int:
        n = self.batches_per_epoch()
        if n is None:
            raise TypeError("a one-pass epoch has no length known in advance")
        return n

    # --- reading --------------------------------------------------------------------------

    def _columns(self) -> list[str]:
        """The columns the split and the filters need, besides board, score and result."""
        f, cols = self.filters, ["score", "result"]
        cols += ["game_id"] if self.split != "all" else []
        cols += ["flags"] if f.skip_score_none or f.skip_mate else []
        cols += ["in_check"] if f.skip_in_check else []
        cols += ["best_move_is_capture"] if f.skip_capture else []
        cols += ["ply"] if f.min_ply else []
        cols += ["piece_count"] if f.min_pieces else []
        return cols

    def _parquet(self, fi: int) -> pq.ParquetFile:
        files = self.__dict__.setdefault("_files", {})  # per process: dropped when pickled
        if fi not in files:
            files[fi] = open_part(self.parts[fi][0])
        return files[fi]

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_files", None)
        return state

    def _read_columns(self, unit: Unit, with_board: bool = False):
        """One row group as a :class:`~nnue.pipeline.parts.Group` (its columns as numpy arrays;
        the boards, when ``with_board``, decoded from a chained part's chains when asked for) and
        its scores in cp. Raises PartError (ChainError included)."""
        scale = self.parts[unit.file][1]
        wanted = self._columns() + (self.extra_columns if with_board else [])
        g = Group(self._parquet(unit.file), unit.row_group, wanted, with_board=with_board)
        score_cp = g["score"].astype(np.float32) * np.float32(scale)
        return g, score_cp

    @property
    def quarantined(self) -> dict:
        """{file index (None: a part that did not open): the reason} of the parts found damaged in
        this process (:meth:`_quarantine`)."""
        return self.__dict__.setdefault("_quarantined", {})

    def _quarantine(self, fi: int | None, e: PartError) -> None:
        """A damaged part (a page or footer pyarrow cannot read, a chain that does not decode,
        a file that is missing or not Parquet) is quarantined whole, never half-read in silence:
        one line on stderr naming it (and where and why), and from then on, every epoch, each of
        its row groups is skipped and its rows counted under ``damaged`` (:meth:`_read_unit`).
        Row groups read before the damage was found stay read (they decoded whole). With
        ``strict``, raises ``e`` instead."""
        if self.strict:
            raise e
        if fi is not None and fi in self.quarantined:
            return
        self.quarantined[fi if fi is not None else f"unopened {len(self.quarantined)}"] = str(e)
        rows = "" if fi is None else f" ({sum(u.rows for u in self.units if u.file == fi):,} rows)"
        print(f"nnue stream: quarantined a damaged part{rows}, skipped from here on: {e}", file=sys.stderr)

    def _read_unit(self, unit: Unit, rng) -> tuple[np.ndarray, ...]:
        empty = np.zeros(0, np.float32)
        if unit.file in self.quarantined:
            self.counts["damaged"] += unit.rows
            return (np.zeros((0, 32), np.uint8), empty, empty, *[empty for _ in self.extra_columns])
        try:
            cols, score_cp = self._read_columns(unit, with_board=True)
            n = len(score_cp)
            if self.split != "all":
                keep = split_mask(cols["game_id"], self.split, self.val_fraction)
                other = int(n - keep.sum())
            else:
                keep, other = np.ones(n, bool), 0
            counts = Counter()
            keep = filter_mask(cols, self.filters, counts, rng, score_cp, keep)
            idx = None if keep.all() else np.flatnonzero(keep)
            # a chained part writes only the kept rows' boards (given as a mask); a flat part takes them
            boards = cols.boards(None if idx is None else keep if cols.chained else idx)
        except PartError as e:
            self._quarantine(unit.file, e)
            self.counts["damaged"] += unit.rows
            return (np.zeros((0, 32), np.uint8), empty, empty, *[empty for _ in self.extra_columns])
        self.counts["read"] += n
        self.counts["other_split"] += other
        self.counts.update(counts)
        if self._part_rows is not None:
            self._part_rows[self.parts[unit.file][0].name] += n
        result = cols["result"]
        extra = [cols[c] for c in self.extra_columns]
        if idx is not None:
            score_cp, result = score_cp[idx], result[idx]
            extra = [e[idx] for e in extra]
        return (boards, score_cp, (result.astype(np.float32) + 1) / 2, *extra)

    def _unit_sequence(self, units: list[Unit], d: int, wid: int, cyclic: bool, start: int):
        """Units of one source in visiting order: seeded permutations, one per pass, from the
        ``start``-th unit of the concatenated passes; endless when ``cyclic``."""
        if not units:
            return
        n = len(units)
        q, offset = divmod(start, n)
        epoch_key = 0 if self.positions_per_epoch is not None else self.epoch
        while True:
            if self.shuffle_buffer:
                order = np.random.default_rng([self.seed, epoch_key, self.rank, wid, d, q]).permutation(n)
            else:
                order = np.arange(n)
            for i in order[offset:]:
                yield units[i]
            if not cyclic:
                return
            q, offset = q + 1, 0

    _part_rows: Counter | None = None

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        if self.parts_log is None:
            yield from self._iter()
            return
        info = torch.utils.data.get_worker_info()
        self._part_rows = Counter()
        try:
            yield from self._iter()
        finally:
            line = {"epoch": self.epoch + 1, "split": self.split, "rank": self.rank,  # from 1, as the trainer counts
                    "worker": info.id if info else 0, "pid": os.getpid(),
                    "known_parts": sorted(p.name for p, _ in self.parts),
                    "rows_read": dict(sorted(self._part_rows.items()))}
            self._part_rows = None
            with open(self.parts_log, "a") as f:  # O_APPEND, one write a line
                f.write(json.dumps(line) + "\n")

    def _iter(self) -> Iterator[dict[str, torch.Tensor]]:
        info = torch.utils.data.get_worker_info()
        workers, wid = (info.num_workers, info.id) if info else (1, 0)
        rng = np.random.default_rng([self.seed, self.epoch, self.rank, wid])
        units = self.shard_units(self.rank, wid, workers)
        quota = self._worker_quota(wid, workers)
        if quota == 0 or not any(units):
            return
        cyclic = quota is not None
        w = self.weights / self.weights.sum()
        starts = [0] * len(units)
        if self.positions_per_epoch is not None:  # continue where the previous epoch stopped
            keep = self.keep_fraction()
            for d, us in enumerate(units):
                mean_rows = max(sum(u.rows for u in us) / max(len(us), 1) * keep[d], 1.0)
                per_epoch = int(np.ceil(quota * self.batch_size * w[d] / mean_rows))
                starts[d] = self.epoch * per_epoch
        feeds = [self._unit_sequence(us, d, wid, cyclic, starts[d]) for d, us in enumerate(units)]
        fed = np.zeros(len(units))
        empty_run = [0] * len(units)
        buf: list[list[np.ndarray]] = [[] for _ in range(3 + len(self.extra_columns))]
        held = yielded = 0
        B = self.batch_size
        while True:
            d = int(np.argmin(fed / w))
            unit = next(feeds[d], None)
            if unit is None:
                break  # a one-pass source ran out: the epoch ends
            arrays = self._read_unit(unit, rng)
            n = len(arrays[0])
            empty_run[d] = empty_run[d] + 1 if n == 0 else 0
            if empty_run[d] > len(units[d]):
                raise RuntimeError(f"source {d} yields no rows after the split and filters")
            fed[d] += n
            for b, a in zip(buf, arrays):
                b.append(a)
            held += n
            if held >= max(self.shuffle_buffer, B):
                for batch in self._emit(buf, rng, held - self.shuffle_buffer // 2, final=False):
                    yield batch
                    yielded += 1
                    if quota is not None and yielded >= quota:
                        return
                held = len(buf[0][0]) if buf[0] else 0
        if quota is None:
            yield from self._emit(buf, rng, held, final=True)

    def _emit(self, buf, rng, n_out: int, final: bool):
        if not buf[0]:
            return
        arrays = [np.concatenate(b) if len(b) > 1 else b[0] for b in buf]
        if self.shuffle_buffer:
            perm = rng.permutation(len(arrays[0]))
            arrays = [np.take(a, perm, axis=0) for a in arrays]  # take: ~30x faster than a[perm] on (N, 32)
        B = self.batch_size
        n_batches = n_out // B
        if final and not self.drop_last and n_out % B:
            n_batches += 1
        end = min(n_batches * B, len(arrays[0]))
        for i, b in enumerate(buf):  # keep the rest before handing out views of this round
            b.clear()
            if not final and end < len(arrays[i]):
                b.append(arrays[i][end:])
        for s in range(0, end, B):
            yield {
                "boards": torch.from_numpy(np.ascontiguousarray(arrays[0][s:s + B])),
                "score": torch.from_numpy(np.ascontiguousarray(arrays[1][s:s + B])),
                "result": torch.from_numpy(np.ascontiguousarray(arrays[2][s:s + B])),
                **{c: torch.from_numpy(np.ascontiguousarray(a[s:s + B]))
                   for c, a in zip(self.extra_columns, arrays[3:])},
            }
