"""Loader features: weighted interleaving, equal batch counts for uneven DDP shards, epochs in
positions and superbatches, per-epoch reshuffling through the DataModule, bounded memory."""
from __future__ import annotations

import json
import tracemalloc
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from nnue.pipeline.stream import Filters, PackedStream
from nnue.pipeline.parts import read_part
from tests.samples import SAMPLE, selfplay

NO_FILTERS = Filters(skip_in_check=False, skip_capture=False, skip_score_none=False, skip_mate=False)


def _pack_small_groups(src, out, layout, rows=256):
    from nnue.pipeline import pack as pack_mod

    old = pack_mod.ROW_GROUP
    pack_mod.ROW_GROUP = rows
    try:
        pack_mod.pack([src], out, progress=False, layout=layout)
    finally:
        pack_mod.ROW_GROUP = old
    return out


@pytest.fixture(scope="module")
def two_sources(tmp_path_factory, layout):
    """Two datasets with disjoint boards and small row groups: the standard-chess sample
    (4,015 rows) and the Chess960 self-play file."""
    base = tmp_path_factory.mktemp("sources")
    a = _pack_small_groups(SAMPLE, base / "a", layout)
    b = _pack_small_groups(selfplay("sf15-960-xfen-s2.plain"), base / "b", layout)
    boards = [set(read_part(next(d.glob("part-*.parquet")))["board"].to_pylist()) for d in (a, b)]
    return a, b, boards[0] - boards[1], boards[1] - boards[0]


def _boards(batches):
    out = []
    for b in batches:
        out += list(map(bytes, b["boards"].numpy()))
    return out


def _share_of_a(rows, only_a, only_b):
    na, nb = sum(r in only_a for r in rows), sum(r in only_b for r in rows)
    return na / (na + nb)


# --- weighted interleaving ----------------------------------------------------------------

@pytest.mark.parametrize("weights", [(3, 1), (1, 1), (1, 4)])
def test_weighted_interleave_proportions_one_pass(two_sources, weights):
    a, b, only_a, only_b = two_sources
    s = PackedStream([a, b], 128, shuffle_buffer=2048, split="all", filters=NO_FILTERS, weights=weights)
    batches = list(s)
    share = _share_of_a(_boards(batches), only_a, only_b)
    want = weights[0] / sum(weights)
    assert abs(share - want) < 0.04, (share, want)
    # batches are mixed, not runs of one source
    per_batch = [_share_of_a(_boards([bt]), only_a, only_b) for bt in batches[len(batches) // 4:]]
    assert np.median(np.abs(np.array(per_batch) - want)) < 0.15
    # one-pass: ends when the first source runs out (the heavier one here), not later
    n_a = sum(r in only_a for r in _boards(batches))
    if weights == (3, 1):
        assert n_a > 0.8 * len(only_a)


def test_weighted_interleave_cycles_in_fixed_epochs(two_sources):
    a, b, only_a, only_b = two_sources
    # 40 batches of 256 = 10,240 positions: more than either source holds, so both cycle
    s = PackedStream([a, b], 256, shuffle_buffer=2048, split="all", filters=NO_FILTERS, weights=[1, 3],
                     positions_per_epoch=40 * 256)
    batches = list(s)
    assert len(batches) == 40 == len(s)
    assert abs(_share_of_a(_boards(batches), only_a, only_b) - 0.25) < 0.04


def test_weights_must_match_paths(two_sources):
    a, b, *_ = two_sources
    with pytest.raises(ValueError):
        PackedStream([a, b], 10, weights=[1])
    with pytest.raises(ValueError):
        PackedStream([a, b], 10, weights=[1, 0])


# --- DDP: equal batch counts --------------------------------------------------------------

@pytest.mark.parametrize("world", [2, 3, 5])
@pytest.mark.parametrize("split", ["train", "val"])
def test_uneven_ddp_shards_yield_equal_batch_counts(two_sources, world, split):
    a, *_ = two_sources  # 16 row groups: uneven over 3 and 5 ranks
    # ~3 row groups (~8 games) a rank at 5 ranks: a large validation share keeps every rank's
    # validation shard non-empty (a rank with no rows at all is refused, by design)
    frac = 0.5 if split == "val" else 0.2
    mk = lambda r: PackedStream([a], 64, shuffle_buffer=512, split=split, val_fraction=frac,  # noqa: E731
                                rank=r, world_size=world, seed=3)
    streams = [mk(r) for r in range(world)]
    raw = [sum(u.rows for u in s.shard_units(r)[0]) for r, s in enumerate(streams)]
    counts = [sum(1 for _ in s) for s in streams]
    assert len(set(counts)) == 1 and counts[0] > 0, (counts, raw)
    assert all(len(s) == counts[0] for s in streams)  # known in advance, identical on every rank
    if world == 3:
        assert len(set(raw)) > 1  # the shards really are uneven


def test_equal_batch_counts_with_dataloader_workers(two_sources):
    a, *_ = two_sources
    counts = []
    for r in range(3):
        s = PackedStream([a], 64, shuffle_buffer=512, split="all", filters=NO_FILTERS, rank=r, world_size=3)
        loader = torch.utils.data.DataLoader(s, batch_size=None, num_workers=2)
        counts.append(sum(1 for _ in loader))
    assert len(set(counts)) == 1 and counts[0] == len(s)


def test_positions_per_epoch_over_ranks(two_sources):
    a, *_ = two_sources
    for world in (1, 2, 3):
        streams = [PackedStream([a], 100, shuffle_buffer=512, split="all", rank=r, world_size=world,
                                positions_per_epoch=9000) for r in range(world)]
        assert [sum(1 for _ in s) for s in streams] == [9000 // (100 * world)] * world


def test_fixed_epochs_continue_through_the_data(two_sources):
    """Epoch e of a fixed-length stream starts about where epoch e−1 stopped, so consecutive
    short epochs see mostly different positions (bullet's superbatches)."""
    a, _, only_a, _ = two_sources
    s = PackedStream([a], 128, shuffle_buffer=512, split="all", filters=NO_FILTERS, positions_per_epoch=1280)
    seen = []
    for e in range(3):
        s.set_epoch(e)
        seen.append(set(_boards(s)))
    assert len(seen[0] & seen[1]) < 0.35 * len(seen[0]) and len(seen[1] & seen[2]) < 0.35 * len(seen[1])
    s.set_epoch(1)
    assert set(_boards(s)) == seen[1]  # deterministic per epoch


def test_a_resumed_stream_replays_its_epochs_exactly(two_sources):
    """A stream built afresh and set to epoch e (what a resume does) yields, batch for batch, what
    the first stream yielded in its epoch e (one-pass and fixed-length epochs, both layouts)."""
    a, *_ = two_sources
    for kw in ({}, {"positions_per_epoch": 1280}):
        def batches(s):
            return [(b["boards"].numpy().tobytes(), b["score"].numpy().tobytes(), b["result"].numpy().tobytes())
                    for b in s]

        first = PackedStream([a], 128, shuffle_buffer=512, seed=4, **kw)
        epochs = []
        for e in range(3):
            first.set_epoch(e)
            epochs.append(batches(first))
        resumed = PackedStream([a], 128, shuffle_buffer=512, seed=4, **kw)
        resumed.set_epoch(2)
        assert batches(resumed) == epochs[2] and epochs[2] != epochs[1] and len(epochs[2]) >= 5


def test_refresh_takes_in_new_parts_between_epochs(tmp_path, layout):
    """Parts packed into the dataset after the stream was built join it at refresh, in the
    dataset's own layout; the parts known before keep their units."""
    from nnue.pipeline.pack import pack
    from nnue.pipeline.parts import LAYOUT_NAMES, layout as part_layout, open_part

    ds = tmp_path / "ds"
    pack([SAMPLE], ds, progress=False, layout=layout)
    s = PackedStream([ds], 256, shuffle_buffer=1024, split="all", filters=NO_FILTERS, drop_last=False)
    before = sum(len(b["score"]) for b in s)
    units = list(s.units)
    pack([selfplay("sf15-960-xfen-s2.plain")], ds, progress=False)
    assert {LAYOUT_NAMES[part_layout(open_part(p))] for p in ds.glob("part-*.parquet")} == {layout}
    got = s.refresh()
    assert got["new_parts"] == 1 and got["new_positions"] == 4586 and s.units[:len(units)] == units
    s.set_epoch(1)
    assert sum(len(b["score"]) for b in s) == before + 4586


# --- DataModule ---------------------------------------------------------------------------

def test_datamodule_superbatches_and_epoch_reshuffle(sample_dataset):
    from nnue.trainer.data import NNUEDataModule

    dm = NNUEDataModule(str(sample_dataset), batch_size=64, val_batch_size=256, shuffle_buffer=1024,
                        val_fraction=0.2, batches_per_superbatch=5, seed=1)
    dm.trainer = SimpleNamespace(global_rank=0, world_size=1, current_epoch=0)
    dm.setup("fit")
    loader = dm.train_dataloader()
    assert len(loader) == 5 and loader.pin_memory == torch.cuda.is_available()
    first = _boards(loader)
    assert len(first) == 5 * 64 and _boards(loader) == first
    dm.trainer.current_epoch = 1  # Lightning builds the loader once; the epoch must still reach the stream
    assert _boards(loader) != first
    val = _boards(dm.val_dataloader())
    assert val and not set(val) & set(first)


def test_datamodule_epoch_settings_and_weights(sample_dataset):
    from nnue.trainer.data import NNUEDataModule

    dm = NNUEDataModule(str(sample_dataset), batch_size=64, positions_per_epoch=640, batches_per_superbatch=10)
    assert dm.train_positions_per_epoch(1) == 640
    with pytest.raises(ValueError):
        dm.train_positions_per_epoch(2)  # 10 batches x 64 x 2 ranks != 640
    with pytest.raises(ValueError):
        NNUEDataModule([str(sample_dataset)] * 2, weights=[1.0])
    dm = NNUEDataModule([str(sample_dataset)] * 2, batch_size=64, weights=[1, 2], pin_memory=False)
    dm.setup("fit")
    assert dm.train_set.num_sources == 2 and next(iter(dm.train_dataloader()))["boards"].shape == (64, 32)


# --- shuffle quality and memory -----------------------------------------------------------

def test_output_order_is_uncorrelated_with_file_order(two_sources):
    a, *_ = two_sources
    table = read_part(next(a.glob("part-*.parquet")))
    pos = {b: i for i, b in enumerate(table["board"].to_pylist())}
    rows = _boards(PackedStream([a], 128, shuffle_buffer=4096, split="all", filters=NO_FILTERS, drop_last=False))
    where = np.array([pos[r] for r in rows])
    rho = np.corrcoef(np.argsort(np.argsort(where)), np.arange(len(where)))[0, 1]
    assert abs(rho) < 0.1, rho
    # neighbours in the output come from far apart in the file
    assert np.median(np.abs(np.diff(where))) > 500


def _big_dataset(src, out, copies=100, rows_per_group=2000):
    """The packed sample tiled ``copies`` times (distinct game ids), in small row groups."""
    out.mkdir()
    part = next(src.glob("part-*.parquet"))
    t = read_part(part)
    tables = []
    for k in range(copies):
        gid = pa.array(t["game_id"].to_numpy() + np.uint64(k * 1_000_003), pa.uint64())
        tables.append(t.set_column(t.schema.get_field_index("game_id"), "game_id", gid))
    big = pa.concat_tables(tables)
    from nnue.pipeline import parts

    if parts.layout(parts.open_part(part)) == parts.CHAINED:  # the part's own layout
        big_c = parts.encode(big, rows_per_group)
        with parts.writer(out / part.name, big_c.schema) as w:
            w.write_table(big_c, row_group_size=rows_per_group)
    else:
        pq.write_table(big, out / part.name, row_group_size=rows_per_group, compression="zstd")
    m = json.loads((src / "manifest.json").read_text())
    for f in m["files"].values():
        f["read"] = f["packed"] = big.num_rows
        f["rejected"] = {}
    (out / "manifest.json").write_text(json.dumps(m))
    return out, big.num_rows


def test_memory_bounded_by_buffer_not_dataset(sample_dataset, tmp_path):
    ds, n_rows = _big_dataset(sample_dataset, tmp_path / "big")
    s = PackedStream([ds], 512, shuffle_buffer=4096, split="all", filters=NO_FILTERS)
    assert len(s.units) > 100
    dataset_bytes = n_rows * (32 + 4 + 4)
    tracemalloc.start()
    try:
        seen = 0
        for b in s:
            seen += len(b["score"])
            del b
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen > n_rows - 4096 and dataset_bytes > 9e6
    # buffer (4,096 rows) + one row group (2,000) + the shuffled copy, at ~45 B a row: well under 3 MB
    assert peak < 3e6, peak
    assert pa.total_allocated_bytes() < 4e6  # Arrow frees each row group after use


def test_len_only_when_fixed(sample_dataset):
    s = PackedStream([sample_dataset], 64)
    with pytest.raises(TypeError):
        len(s)
    assert len(PackedStream([sample_dataset], 64, positions_per_epoch=6400)) == 100
    with pytest.raises(ValueError):
        PackedStream([sample_dataset], 64, positions_per_epoch=10)


def test_transfer_is_non_blocking_to_cuda(sample_dataset):
    from nnue.trainer.data import NNUEDataModule

    class Recorder:
        def __init__(self):
            self.calls = []

        def to(self, device, non_blocking=False):
            self.calls.append((str(device), non_blocking))
            return self

    dm = NNUEDataModule(str(sample_dataset), pin_memory=True)
    assert dm.pin_memory and dm._loader(PackedStream([sample_dataset], 64)).pin_memory
    batch = {"boards": Recorder(), "score": Recorder()}
    dm.transfer_batch_to_device(batch, torch.device("cuda", 0), 0)
    dm.transfer_batch_to_device(batch, torch.device("cpu"), 0)
    assert batch["boards"].calls == [("cuda:0", True), ("cpu", False)]
