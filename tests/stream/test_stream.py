"""PackedStream: split by game, filters counted, shuffling, sharding, determinism, SparseBatch."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from nnue.pipeline.batch import to_sparse_batch
from nnue.pipeline.features import get_feature_set, parse_output_buckets
from nnue.pipeline.stream import Filters, PackedStream, split_mask
from nnue.pipeline.parts import read_part
from tests.samples import SAMPLE

NO_FILTERS = Filters(skip_in_check=False, skip_capture=False, skip_score_none=False, skip_mate=False)


def _table(ds):
    return read_part(next(ds.glob("part-*.parquet")))


def _rows(stream):
    """All rows of a stream as (board bytes, score) pairs."""
    out = []
    for b in stream:
        out += list(zip(map(bytes, b["boards"].numpy()), b["score"].tolist()))
    return out


def test_split_is_by_game_and_disjoint(selfplay_dataset):
    t = _table(selfplay_dataset)
    gid = t["game_id"].to_numpy()
    val, train = split_mask(gid, "val", 0.1), split_mask(gid, "train", 0.1)
    assert not (val & train).any() and (val | train).all()
    assert set(gid[val]).isdisjoint(set(gid[train]))
    n_games = len(np.unique(gid))
    assert 0.04 < len(np.unique(gid[val])) / n_games < 0.2


def test_no_filter_stream_covers_every_row_once(selfplay_dataset):
    s = PackedStream([selfplay_dataset], 1000, shuffle_buffer=8192, split="all", filters=NO_FILTERS,
                     drop_last=False)
    rows = _rows(s)
    t = _table(selfplay_dataset)
    assert len(rows) == t.num_rows
    assert Counter(b for b, _ in rows) == Counter(t["board"].to_pylist())


def test_filters_are_counted_and_applied(selfplay_dataset):
    s = PackedStream([selfplay_dataset], 512, shuffle_buffer=0, split="all", drop_last=False,
                     filters=Filters(max_abs_score=600, min_pieces=6))
    n = sum(len(b["score"]) for b in s)
    c = s.counts
    skipped = sum(v for k, v in c.items() if k not in ("read", "other_split"))
    assert c["read"] == n + skipped
    t = _table(selfplay_dataset)
    assert c["in_check"] <= int(np.asarray(t["in_check"]).sum())
    assert c["mate"] > 0 and c["capture"] > 0 and c["max_abs_score"] > 0 and c["min_pieces"] > 0
    for b in PackedStream([selfplay_dataset], 512, shuffle_buffer=0, split="all", drop_last=False,
                          filters=Filters(max_abs_score=600)):
        assert b["score"].abs().max() <= 600


def test_quiet_filter_removes_checks_and_captures(selfplay_dataset):
    import chess

    from nnue.pipeline.board import unpack_fen

    s = PackedStream([selfplay_dataset], 4096, shuffle_buffer=0, split="all")
    batch = next(iter(s))
    for row in batch["boards"][:300].numpy():
        assert not chess.Board(unpack_fen(row.tobytes())).is_check()


def test_random_skip_rate(selfplay_dataset):
    s = PackedStream([selfplay_dataset], 512, shuffle_buffer=0, split="all", drop_last=False,
                     filters=Filters(random_skip=0.5, skip_in_check=False, skip_capture=False,
                                     skip_mate=False))
    n = sum(len(b["score"]) for b in s)
    assert abs(s.counts["random_skip"] / s.counts["read"] - 0.5) < 0.02
    assert n + s.counts["random_skip"] == s.counts["read"]


def test_deterministic_for_seed_and_reshuffled_per_epoch(selfplay_dataset):
    mk = lambda seed: PackedStream([selfplay_dataset], 256, shuffle_buffer=4096, seed=seed)  # noqa: E731
    a, b, c = _rows(mk(1)), _rows(mk(1)), _rows(mk(2))
    assert a == b and a != c
    s = mk(1)
    s.set_epoch(1)
    assert _rows(s) != a


def test_shuffle_mixes_games(selfplay_dataset):
    """A dataset written game by game must come out with many games per batch."""
    t = _table(selfplay_dataset)
    game_of = dict(zip(t["board"].to_pylist(), t["game_id"].to_pylist()))
    s = PackedStream([selfplay_dataset], 256, shuffle_buffer=16384, split="all", filters=NO_FILTERS)
    batches = [[game_of[bytes(r)] for r in b["boards"].numpy()] for b in s]
    distinct = [len(set(g)) for g in batches]
    games = len(set(t["game_id"].to_pylist()))
    # 256 rows from a 16k buffer: most of the dataset's games in every batch (112 in the repo's cut)
    assert np.median(distinct) > min(100, 0.6 * games), (np.median(distinct), games)
    unshuffled = PackedStream([selfplay_dataset], 256, shuffle_buffer=0, split="all", filters=NO_FILTERS)
    first = next(iter(unshuffled))
    assert len({game_of[bytes(r)] for r in first["boards"].numpy()}) < 5


def test_rank_shards_are_disjoint_and_cover(tmp_path, layout):
    from nnue.pipeline import pack as pack_mod

    # small row groups so that there is something to shard
    old = pack_mod.ROW_GROUP
    pack_mod.ROW_GROUP = 500
    try:
        pack_mod.pack([SAMPLE], tmp_path / "ds", progress=False, layout=layout)
    finally:
        pack_mod.ROW_GROUP = old
    shards = [_rows(PackedStream([tmp_path / "ds"], 64, shuffle_buffer=1024, split="all",
                                 filters=NO_FILTERS, drop_last=False, rank=r, world_size=3,
                                 even_batches=False))
              for r in range(3)]
    sets = [Counter(b for b, _ in s) for s in shards]
    total = sum(sets, Counter())
    # every row exactly once over the ranks (multiset equality), each rank non-empty
    assert sum(len(s) for s in shards) == 4015 and all(len(s) > 0 for s in shards)
    assert total == Counter(read_part(next((tmp_path / "ds").glob("part-*.parquet")))["board"].to_pylist())


def test_dataloader_workers_shard_row_groups(tmp_path, layout):
    from nnue.pipeline import pack as pack_mod

    old = pack_mod.ROW_GROUP
    pack_mod.ROW_GROUP = 700
    try:
        pack_mod.pack([SAMPLE], tmp_path / "ds", progress=False, layout=layout)
    finally:
        pack_mod.ROW_GROUP = old
    s = PackedStream([tmp_path / "ds"], 100, shuffle_buffer=0, split="all", filters=NO_FILTERS,
                     drop_last=False)
    loader = torch.utils.data.DataLoader(s, batch_size=None, num_workers=2)
    rows = []
    for b in loader:
        rows += list(map(bytes, b["boards"].numpy()))
    assert len(rows) == 4015
    assert Counter(rows) == Counter(read_part(next((tmp_path / "ds").glob("part-*.parquet")))["board"].to_pylist())


def test_sparse_batch_contract(sample_dataset):
    b = next(iter(PackedStream([sample_dataset], 128, shuffle_buffer=0)))
    sb = to_sparse_batch(b, get_feature_set("chess768"), parse_output_buckets("MaterialCount<8>"))
    assert sb.stm_indices.shape == (128, 32) and sb.stm_indices.dtype == torch.int32
    assert sb.nstm_indices.shape == (128, 32) and sb.nstm_indices.dtype == torch.int32
    assert sb.score.dtype == torch.float32 and sb.result.dtype == torch.float32
    assert set(sb.result.tolist()) <= {0.0, 0.5, 1.0}
    assert sb.bucket.dtype == torch.int64 and sb.bucket.min() >= 0 and sb.bucket.max() < 8
    assert len(sb) == 128


def test_bad_arguments(sample_dataset, tmp_path):
    from nnue.pipeline.manifest import ManifestError

    with pytest.raises(ValueError):
        PackedStream([sample_dataset], 0)
    with pytest.raises(ManifestError):
        PackedStream([tmp_path], 10)
    with pytest.raises(ValueError):
        list(PackedStream([sample_dataset], 10, split="test"))
