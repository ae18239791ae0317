"""data.prefetch: a background thread reads (and on the CPU encodes) batches ahead of the step. The
batches and their order are those without it, errors surface at the batch that raised, an abandoned
iterator stops its thread, and a training run ends with the same weights bit for bit."""
from __future__ import annotations

import gc
import threading
import time

import pytest
import torch

from nnue.pipeline.batch import SparseBatch, to_sparse_batch
from nnue.pipeline.features import get_feature_set, parse_output_buckets
from nnue.trainer.data import NNUEDataModule, Prefetcher
from tests.trainer.test_train_runs import ckpt, train

FS, BUCKETS = get_feature_set("chess768"), parse_output_buckets("MaterialCount<8>")


def encode(batch):
    return to_sparse_batch(batch, FS, BUCKETS)


def _module(ds, prefetch: int) -> NNUEDataModule:
    dm = NNUEDataModule(str(ds), batch_size=96, val_batch_size=500, shuffle_buffer=700, val_fraction=0.2,
                        positions_per_epoch=96 * 7, prefetch=prefetch)
    dm.setup("fit")
    dm.encode = encode
    return dm


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "nnue-prefetch"]


def test_the_same_batches_in_the_same_order(sample_dataset):
    """Two epochs of training batches and the validation batches: prefetch 3 (encoded in the thread)
    equals prefetch 0 (encoded here), field by field."""
    fields = ("stm_indices", "nstm_indices", "score", "result", "bucket")
    ahead, inline = _module(sample_dataset, 3), _module(sample_dataset, 0)
    for loaders in ((ahead.train_dataloader(), inline.train_dataloader()),
                    (ahead.val_dataloader(), inline.val_dataloader())):
        for _ in range(2):
            got = list(loaders[0])
            want = [encode(b) for b in loaders[1]]
            assert len(got) == len(want) > 1
            for g, w in zip(got, want):
                assert isinstance(g, SparseBatch)
                assert all(torch.equal(getattr(g, f), getattr(w, f)) for f in fields)


def test_errors_surface_at_the_batch_that_raised():
    def encode_until_3(x):
        if x == 3:
            raise ValueError("bad batch 3")
        return x * 10

    it = Prefetcher(iter(range(6)), encode_until_3, depth=2)
    assert [next(it), next(it), next(it)] == [0, 10, 20]
    with pytest.raises(ValueError, match="bad batch 3"):
        next(it)
    with pytest.raises(StopIteration):
        next(it)


def test_an_abandoned_iterator_stops_its_thread():
    before = len(_prefetch_threads())
    it = Prefetcher(iter(range(10**9)), None, depth=2)
    assert next(it) == 0 and len(_prefetch_threads()) == before + 1
    del it
    gc.collect()
    deadline = time.monotonic() + 10
    while len(_prefetch_threads()) > before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert len(_prefetch_threads()) == before


@pytest.fixture
def overlaps(monkeypatch) -> list:
    """Records every read of a stream's row group that starts while another thread is reading the
    same stream (pyarrow's ParquetFile is not thread-safe: such reads failed with 'ReadRangeCache did
    not find matching cache entry', or crashed the process). Each read is slowed down, so that
    overlaps happen if they can."""
    from nnue.pipeline.stream import PackedStream

    read, busy, seen, lock = PackedStream._read_columns, {}, [], threading.Lock()

    def reading(self, unit, with_board=False):
        me = threading.get_ident()
        with lock:
            if busy.get(id(self), me) != me:
                seen.append((self.split, threading.current_thread().name))
            busy[id(self)] = me
        try:
            time.sleep(0.01)
            return read(self, unit, with_board)
        finally:
            with lock:
                busy.pop(id(self), None)

    monkeypatch.setattr(PackedStream, "_read_columns", reading)
    return seen


def test_one_reader_of_a_stream_at_a_time(sample_dataset, overlaps):
    """Lightning calls iter() on a loader to check it and drops that iterator, and builds a new loader
    every epoch: the prefetch thread starts at the first batch, and a new iterator over a stream stops
    (and waits for) the thread still reading it, whichever loader started it."""
    dm = _module(sample_dataset, 2)
    loader = dm.train_dataloader()
    checked = iter(loader)  # Lightning's check, never advanced: no thread, no read
    time.sleep(0.2)
    assert not _prefetch_threads() and overlaps == []
    first = iter(loader)
    next(first)  # started, reading ahead
    second = iter(dm.train_dataloader())  # at once, another loader over the same stream (the next epoch)
    assert len(list(second)) == 7
    with pytest.raises(StopIteration):  # the first was stopped for it
        for _ in range(10):
            next(first)
    assert overlaps == []
    del checked


def test_bad_prefetch_is_refused(sample_dataset):
    with pytest.raises(ValueError, match="data.prefetch"):
        NNUEDataModule(str(sample_dataset), prefetch=-1)
    from nnue.trainer.checks import check_train_args

    err = check_train_args(["experiment=demo", f"data.path={sample_dataset}", "data.prefetch=-1"])
    assert err and "data.prefetch" in err and "\n" not in err


def test_training_with_and_without_prefetch_ends_with_the_same_weights(sample_dataset, tmp_path):
    """The CPU default path (compiled FT, row-sparse AdamW) with features encoded in the prefetch
    thread: the same weights bit for bit as encoding inside the step."""
    outs = {p: tmp_path / f"p{p}" for p in (0, 2)}
    for p, out in outs.items():
        train(sample_dataset, out, **{"data.prefetch": p, "trainer.max_epochs": 2})
    a, b = (ckpt(outs[p])["state_dict"] for p in (0, 2))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
