"""Stream shuffled, filtered batches of packed boards from Parquet datasets.

:class:`PackedStream` is a torch ``IterableDataset`` that yields *packed* batches (32 bytes a
position); :func:`nnue.pipeline.batch.to_sparse_batch` expands them into feature indices on the
training device (DESIGN.md: ship packed boards as far as possible).

Order of work per epoch: list every (file, row group) of every dataset; shard them over DDP ranks
and DataLoader workers (disjoint, round-robin); visit them in a seeded random order; apply the
train/validation split (by game id) and the filters (vectorised over the row group); push the
surviving rows into a shuffle buffer; emit batches of a fixed size from the shuffled buffer.
Memory is bounded by the shuffle buffer plus one row group, whatever the dataset size.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import pyarrow.parquet as pq
import torch

from . import manifest as mf
from .board import boards_from_bytes
from .schema import FLAG_SCORE_MATE, FLAG_SCORE_NONE

# Stockfish's generator writes internal units; nnue-pytorch converts with cp = 100·score/208.
SF_INTERNAL_PER_PAWN = 208
_COLUMNS = ["board", "score", "result", "ply", "piece_count", "in_check",
            "best_move_is_capture", "game_id", "flags"]


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

    flags = cols["flags"]
    if f.skip_score_none:
        drop("score_none", (flags & FLAG_SCORE_NONE) != 0)
    if f.skip_mate:
        drop("mate", (flags & FLAG_SCORE_MATE) != 0)
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
        for entry in sorted(m["files"].values(), key=lambda e: e["part"]):
            if entry["packed"]:
                out.append((d / entry["part"], scale))
    return out


class PackedStream(torch.utils.data.IterableDataset):
    """Yields dicts ``{"boards": (B, 32) uint8, "score": (B,) float32 centipawns stm POV,
    "result": (B,) float32 in {0, 0.5, 1} stm POV}`` as CPU tensors.

    paths: dataset folders. batch_size: rows per batch. shuffle_buffer: rows held for shuffling
    (0 = no shuffle, file order). split/val_fraction: see :func:`split_mask`. filters:
    :class:`Filters`. seed: base seed; epoch ``e`` uses ``seed + e`` (call :meth:`set_epoch`).
    drop_last: drop the final partial batch. rank/world_size: DDP sharding.
    ``counts`` holds, after an epoch in this process, rows read and rows skipped per filter.
    """

    def __init__(self, paths: Sequence[str | Path], batch_size: int, shuffle_buffer: int = 1 << 20,
                 split: str = "train", val_fraction: float = 0.05, filters: Filters = Filters(),
                 seed: int = 0, drop_last: bool = True, rank: int = 0, world_size: int = 1):
        super().__init__()
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        self.parts = dataset_parts(paths)
        self.batch_size, self.shuffle_buffer = batch_size, shuffle_buffer
        self.split, self.val_fraction, self.filters = split, val_fraction, filters
        self.seed, self.drop_last = seed, drop_last
        self.rank, self.world_size = rank, world_size
        self.epoch = 0
        self.counts: Counter = Counter()
        self.units = []
        for fi, (path, _) in enumerate(self.parts):
            n = pq.ParquetFile(path).metadata.num_row_groups
            self.units += [(fi, rg) for rg in range(n)]

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _my_units(self) -> list[tuple[int, int]]:
        info = torch.utils.data.get_worker_info()
        workers, wid = (info.num_workers, info.id) if info else (1, 0)
        shards, shard = self.world_size * workers, self.rank * workers + wid
        return [u for i, u in enumerate(self.units) if i % shards == shard]

    def _read_unit(self, unit, rng) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        fi, rg = unit
        path, scale = self.parts[fi]
        table = pq.ParquetFile(path).read_row_group(rg, columns=_COLUMNS)
        cols = {c: table.column(c).to_numpy(zero_copy_only=False) for c in _COLUMNS if c != "board"}
        for c in ("in_check", "best_move_is_capture"):
            cols[c] = np.asarray(np.nan_to_num(cols[c].astype(float)), bool)  # nulls -> False
        score_cp = cols["score"].astype(np.float32) * np.float32(scale)
        self.counts["read"] += len(score_cp)
        keep = split_mask(cols["game_id"], self.split, self.val_fraction)
        self.counts["other_split"] += int((~keep).sum())
        keep = filter_mask(cols, self.filters, self.counts, rng, score_cp, keep)
        idx = np.nonzero(keep)[0]
        boards = boards_from_bytes(table.column("board"))[idx]
        result = (cols["result"][idx].astype(np.float32) + 1) / 2
        return boards, score_cp[idx], result

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        info = torch.utils.data.get_worker_info()
        wid = info.id if info else 0
        rng = np.random.default_rng([self.seed, self.epoch, self.rank, wid])
        units = self._my_units()
        if self.shuffle_buffer:
            units = [units[i] for i in rng.permutation(len(units))]
        buf: list[list[np.ndarray]] = [[], [], []]
        held = 0
        B = self.batch_size
        for unit in units:
            arrays = self._read_unit(unit, rng)
            for b, a in zip(buf, arrays):
                b.append(a)
            held += len(arrays[0])
            if held >= max(self.shuffle_buffer, B):
                keep_back = self.shuffle_buffer // 2
                yield from self._emit(buf, rng, held - keep_back, final=False)
                held = len(buf[0][0]) if buf[0] else 0
        yield from self._emit(buf, rng, held, final=True)

    def _emit(self, buf, rng, n_out: int, final: bool):
        if not buf[0]:
            return
        arrays = [np.concatenate(b) for b in buf]
        if self.shuffle_buffer:
            perm = rng.permutation(len(arrays[0]))
            arrays = [a[perm] for a in arrays]
        B = self.batch_size
        n_batches = n_out // B
        if final and not self.drop_last and n_out % B:
            n_batches += 1
        end = min(n_batches * B, len(arrays[0]))
        for s in range(0, end, B):
            yield {
                "boards": torch.from_numpy(np.ascontiguousarray(arrays[0][s:s + B])),
                "score": torch.from_numpy(arrays[1][s:s + B].copy()),
                "result": torch.from_numpy(arrays[2][s:s + B].copy()),
            }
        for i, b in enumerate(buf):
            b.clear()
            if not final and end < len(arrays[i]):
                b.append(arrays[i][end:])
