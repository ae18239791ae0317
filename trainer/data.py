"""LightningDataModule over packed Parquet datasets (:class:`~nnue.pipeline.stream.PackedStream`).

Batches stay packed (32 bytes a position) through the DataLoader; with CUDA the DataLoader pins
them and Lightning copies them to the device with ``non_blocking=True``, so the copy of the next
batch overlaps the current step; the LightningModule expands them into features on the device.

``data.prefetch`` (default 2): a background thread reads that many batches ahead of the step
(:class:`Prefetcher`) and, when the model trains on the CPU, also encodes their features (the
LightningModule's ``encode_batch``), so that reading and encoding overlap the step instead of
running inside it. The batches and their order are the same as without it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import dataclasses
import logging
import queue
import threading
import weakref

import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader

from nnue.pipeline.stream import Filters, PackedStream

log = logging.getLogger(__name__)


_END = object()


class _Failed:
    def __init__(self, error: BaseException):
        self.error = error


def _produce(it, encode, q: queue.Queue, stop: threading.Event) -> None:
    """The prefetch thread: items of ``it`` (``encode``d) into ``q``, then _END, or the error that
    stopped it; returns when ``stop`` is set (the consumer is gone). It holds no reference to the
    :class:`Prefetcher`, so that dropping the iterator ends it."""
    def put(item) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    try:
        for item in it:
            if stop.is_set() or not put(encode(item) if encode is not None else item):
                return
        put(_END)
    except BaseException as e:  # handed to the consumer, raised there
        put(_Failed(e))


class Prefetcher(Iterator):
    """Iterate ``it`` in a background thread, ``depth`` items ahead, applying ``encode`` (or
    nothing) to each there: the items and their order are those of ``it``, and an error of ``it``
    or ``encode`` is raised by ``next`` at the item where it happened. Torch ops, pyarrow's reads
    and the numba kernels release the GIL, so the thread's work overlaps the training step's.

    The thread starts at the first ``next`` (Lightning calls ``iter()`` on a loader only to check
    it, and drops that iterator: it must not start reading). :meth:`close`, or dropping the
    iterator, stops the thread after the item it is on. A source such as a
    :class:`~nnue.pipeline.stream.PackedStream` must not be read by two threads at once (pyarrow's
    ParquetFile is not thread-safe): :class:`EpochLoader` stops the thread reading its stream and
    waits for it (:meth:`stopper`) before it starts another iterator over that stream."""

    def __init__(self, it, encode: Callable | None = None, depth: int = 2):
        if depth < 1:
            raise ValueError(f"prefetch depth must be >= 1, got {depth}")
        self._q: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=_produce, args=(it, encode, self._q, self._stop),
                                        name="nnue-prefetch", daemon=True)

    def __next__(self):
        if self._done:
            raise StopIteration
        if self._thread.ident is None:
            self._thread.start()
        while True:
            try:
                item = self._q.get(timeout=0.1)
                break
            except queue.Empty:
                if not self._thread.is_alive():  # stopped from outside (stopper()), nothing left
                    self._done = True
                    raise StopIteration from None
        if item is _END or isinstance(item, _Failed):
            self._done = True
            self._thread.join()
            if isinstance(item, _Failed):
                raise item.error
            raise StopIteration
        return item

    def close(self) -> None:
        """Stop the thread (it finishes the item it is on: :meth:`stopper` waits for that); idempotent."""
        self._stop.set()
        self._done = True

    def stopper(self) -> Callable[[], None]:
        """A function that stops the thread and returns when it has finished; it holds no
        reference to this iterator, so that dropping the iterator still stops the thread."""
        stop, thread = self._stop, self._thread

        def stop_and_wait() -> None:
            stop.set()
            if thread.ident is not None and thread is not threading.current_thread():
                thread.join()
        return stop_and_wait

    def __del__(self):
        self.close()


#: stream -> the stopper of the prefetch thread reading it (:meth:`Prefetcher.stopper`)
_READERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class EpochLoader(DataLoader):
    """A DataLoader that tells its stream the epoch before every pass.

    Lightning builds the loader once and calls ``set_epoch`` only on samplers, which a stream
    does not have; without this every epoch would replay the first epoch's shuffle.
    ``epoch``: returns the current epoch (the trainer's, so a resumed run continues its order).
    ``prefetch``: batches a background thread prepares ahead (0: none, :class:`Prefetcher`);
    ``encode``: returns the encoder it applies to each batch (or None: batches stay packed).
    """

    def __init__(self, dataset: PackedStream, epoch: Callable[[], int], refresh: Callable[[PackedStream], None]
                 | None = None, prefetch: int = 0, encode: Callable[[], Callable | None] | None = None, **kwargs):
        super().__init__(dataset, batch_size=None, **kwargs)
        self._epoch, self._refresh = epoch, refresh
        self._prefetch, self._encode = int(prefetch or 0), encode
        self._skip = 0

    def __iter__(self):
        # one reader of a stream at a time: the prefetch thread of its previous iterator (this
        # loader's or an earlier one's: Lightning builds a loader per epoch) stops first
        stop_previous = _READERS.pop(self.dataset, None)
        if stop_previous is not None:
            stop_previous()
        if self._refresh is not None and not self._skip:  # epoch boundary: take in part files packed since
            self._refresh(self.dataset)  # (not at a mid-epoch resume: that epoch replays the parts it had)
        self.dataset.set_epoch(self._epoch())
        it = super().__iter__()
        skip, self._skip = self._skip, 0
        for _ in range(skip):  # resumed mid-epoch: replay the epoch's seeded order up to where it stopped
            next(it, None)
        if self._prefetch > 0:
            ahead = Prefetcher(it, self._encode() if self._encode is not None else None, self._prefetch)
            _READERS[self.dataset] = ahead.stopper()
            return ahead
        return it


class ResumableLoader(EpochLoader):
    """The training loader: Lightning stores :meth:`state_dict` in every checkpoint and, when a
    run resumes from a checkpoint saved in the middle of an epoch (an interrupt), hands it back,
    so that the epoch continues at the batch after the last one trained (exact resume).
    ``done``: returns the batches trained so far in this epoch."""

    def __init__(self, dataset: PackedStream, epoch: Callable[[], int], done: Callable[[], int], **kwargs):
        super().__init__(dataset, epoch, **kwargs)
        self._done = done

    def state_dict(self) -> dict:
        return {"epoch": self._epoch(), "batches_done": int(self._done())}

    def load_state_dict(self, state: dict) -> None:
        self._skip = int(state.get("batches_done", 0))


class NNUEDataModule(pl.LightningDataModule):
    """path: one dataset folder or a list. weights: one positive weight per path to interleave
    the training datasets in those proportions (None: pool them; validation always pools).
    batch_size / val_batch_size: positions per batch (per rank). shuffle_buffer: rows held for shuffling. val_fraction: share of games
    held out (by game id). filters: :class:`~nnue.pipeline.stream.Filters` fields, applied to
    train and validation. num_workers: DataLoader workers (row groups are sharded across them).
    positions_per_epoch: training epoch length in positions over all ranks, cycling the data as
    needed (None: one pass). batches_per_superbatch: the same in steps, bullet-style: an epoch is
    one superbatch of this many batches per rank (positions_per_epoch = batches_per_superbatch ·
    batch_size · world_size; give one of the two). pin_memory: pin batches for the host-to-device
    copy (None: when CUDA is available). prefetch: batches a background thread reads (and, for a
    model on the CPU, encodes) ahead of the step (0: none; module docstring). Raises ValueError on
    inconsistent settings."""

    def __init__(self, path, batch_size: int = 16384, val_batch_size: int = 16384,
                 shuffle_buffer: int = 1 << 20, val_fraction: float = 0.05, num_workers: int = 0,
                 seed: int = 0, filters: dict | None = None, weights: list[float] | None = None,
                 positions_per_epoch: int | None = None, batches_per_superbatch: int | None = None,
                 pin_memory: bool | None = None, refresh_manifest: bool = True, parts_log: str | None = None,
                 refresh_val: bool = False, wait_for_data_s: float = 600.0, prefetch: int = 2):
        super().__init__()
        from .callbacks import plain

        path, filters, weights = plain(path), plain(filters), plain(weights)
        # absolute, so that export and report find the data from any working directory
        path = str(Path(path).resolve()) if isinstance(path, str) else [str(Path(p).resolve()) for p in path]
        self.save_hyperparameters()  # lands in checkpoints: export finds its validation data here
        self.paths = [str(path)] if isinstance(path, str) else [str(p) for p in path]
        if weights is not None and len(weights) != len(self.paths):
            raise ValueError(f"data.weights has {len(weights)} entries for {len(self.paths)} paths")
        self.weights = weights
        self.batch_size, self.val_batch_size = batch_size, val_batch_size
        self.shuffle_buffer, self.val_fraction = shuffle_buffer, val_fraction
        self.num_workers, self.seed = num_workers, seed
        self.filters = Filters(**dict(filters or {}))
        self.positions_per_epoch, self.batches_per_superbatch = positions_per_epoch, batches_per_superbatch
        self.pin_memory = torch.cuda.is_available() if pin_memory is None else pin_memory
        # refresh_manifest: at each epoch boundary, add the part files packed since (PackedStream.refresh)
        # to training; refresh_val: to validation too (off: the validation set is the one of the
        # run's start, so that val_loss and the best checkpoint compare one set across epochs)
        self.refresh_manifest, self.parts_log, self.refresh_val = refresh_manifest, parts_log, refresh_val
        self.wait_for_data_s = wait_for_data_s  # nnue train: wait this long for a first part (wait_for_first_part)
        self.replay_parts: list | None = None  # a mid-epoch resume over grown data (trainer/resume.py)
        if not isinstance(prefetch, int) or isinstance(prefetch, bool) or prefetch < 0:
            raise ValueError(f"data.prefetch={prefetch!r}: batches to prepare ahead, an integer >= 0")
        self.prefetch = prefetch
        #: the prefetch thread's encoder when set (a plain loop without Lightning sets it); else the
        #: LightningModule's ``encode_batch`` when the model is on the CPU (:meth:`_encoder`)
        self.encode: Callable | None = None
        self.train_set: PackedStream | None = None
        self.probe: PackedStream | None = None
        self.val_set: PackedStream | None = None

    def _rank(self) -> tuple[int, int]:
        t = self.trainer
        return (t.global_rank, t.world_size) if t is not None else (0, 1)

    def _epoch(self) -> int:
        return self.trainer.current_epoch if self.trainer is not None else 0

    def train_positions_per_epoch(self, world_size: int) -> int | None:
        """Positions per training epoch over all ranks, from either setting (None: one pass)."""
        ppe, bps = self.positions_per_epoch, self.batches_per_superbatch
        if bps is not None:
            from_bps = bps * self.batch_size * world_size
            if ppe is not None and ppe != from_bps:
                raise ValueError(f"data.positions_per_epoch {ppe} disagrees with batches_per_superbatch "
                                 f"{bps} x batch_size {self.batch_size} x world size {world_size}")
            return from_bps
        return ppe

    def setup(self, stage: str | None = None) -> None:
        rank, world = self._rank()
        common = dict(val_fraction=self.val_fraction, filters=self.filters, seed=self.seed, rank=rank,
                      world_size=world, parts_log=self.parts_log)
        self.train_set = PackedStream(self.paths, self.batch_size, self.shuffle_buffer, "train",
                                      drop_last=True, weights=self.weights,
                                      positions_per_epoch=self.train_positions_per_epoch(world), **common)
        if self.replay_parts is not None:  # the interrupted epoch on its own parts; new ones at the next epoch
            self.train_set.restrict_to(self.replay_parts)
            if rank == 0:
                log.info("resuming mid-epoch: the epoch is replayed on its %d part file(s); the %d packed since "
                         "join at the next epoch", len(self.train_set.parts),
                         len(self.train_set.list_parts()) - len(self.train_set.parts))
        # validation: every held-out row of every dataset exactly once (pooled, not weighted), whatever
        # the world size: each rank reads its own row groups once, its final batch partial (no equal
        # batch counts: the metrics are summed over ranks at the epoch's end, trainer/val_metrics.py)
        self.val_set = PackedStream(self.paths, self.val_batch_size, 0, "val", drop_last=False, even_batches=False,
                                    **common)
        if self.refresh_manifest and rank == 0 and stage in (None, "fit"):
            n = len(self.val_set.parts)
            if self.refresh_val:
                log.info("streaming: new part files join training and validation at each epoch boundary "
                         "(data.refresh_val=true: val_loss compares different sets across epochs)")
            else:
                log.info("streaming: validation set fixed at the start of the run (%d part file(s)); new part "
                         "files join training only (data.refresh_val=true adds them to validation too)", n)

    def transfer_batch_to_device(self, batch, device: torch.device, dataloader_idx: int):
        """Packed batch -> training device. From pinned memory to CUDA the copy is non-blocking,
        so it overlaps the step already queued; the LightningModule then builds the features. A
        batch the prefetch thread encoded already (a SparseBatch, on the CPU) is moved as it is."""
        non_blocking = torch.device(device).type == "cuda"
        if not isinstance(batch, dict):  # a SparseBatch
            return type(batch)(**{f.name: None if getattr(batch, f.name) is None else
                                  getattr(batch, f.name).to(device, non_blocking=non_blocking)
                                  for f in dataclasses.fields(batch)})
        return {k: v.to(device, non_blocking=non_blocking) for k, v in batch.items()}

    def _encoder(self) -> Callable | None:
        """What the prefetch thread applies to each batch: :attr:`encode` if set, else the
        LightningModule's ``encode_batch`` when the model trains on the CPU (on a GPU the
        features are encoded there, after the copy), else None."""
        if self.encode is not None:
            return self.encode
        lm = getattr(self.trainer, "lightning_module", None)  # None: no trainer, or a stand-in without one
        if lm is None or lm.device.type != "cpu":
            return None
        return getattr(lm, "encode_batch", None)

    def _refresh(self, ds: PackedStream) -> None:
        """Re-read the manifests; every rank adds the part list rank 0 saw (one broadcast)."""
        t = self.trainer
        listing = ds.list_parts() if t is None or t.global_rank == 0 else None
        if t is not None and t.world_size > 1:
            listing = t.strategy.broadcast(listing, src=0)
        info = ds.refresh(listing)
        if info["new_parts"] and (t is None or t.global_rank == 0):
            # epochs count from 1 here as in the progress line (trainer.current_epoch + 1)
            log.info("epoch %d, %s: %d new part file(s), %s new positions (before the split and filters)%s",
                     self._epoch() + 1, ds.split, info["new_parts"], f"{info['new_positions']:,}",
                     "; validation keeps the set of the run's start" if ds.split == "train" and not self.refresh_val
                     else "")

    def _loader(self, ds: PackedStream) -> EpochLoader:  # validation
        return EpochLoader(ds, self._epoch, self._refresh if self.refresh_manifest and self.refresh_val else None,
                           prefetch=self.prefetch, encode=self._encoder, num_workers=self.num_workers,
                           pin_memory=self.pin_memory, persistent_workers=False)

    def _batches_done(self) -> int:
        return self.trainer.fit_loop.epoch_loop.batch_progress.current.processed if self.trainer else 0

    def train_dataloader(self):
        return ResumableLoader(self.train_set, self._epoch, self._batches_done,
                               refresh=self._refresh if self.refresh_manifest else None, prefetch=self.prefetch,
                               encode=self._encoder, num_workers=self.num_workers, pin_memory=self.pin_memory,
                               persistent_workers=False)

    def steps_per_epoch(self, world_size: int = 1) -> tuple[int, bool]:
        """Training batches per epoch and rank, and whether that number is exact. Fixed-length
        epochs (positions_per_epoch, batches_per_superbatch): exact. A one-pass epoch: the
        manifest's row counts × the share of rows kept by the split and filters (estimated on a
        seeded sample of row groups, :meth:`PackedStream.keep_fraction`) ÷ (batch_size × world_size),
        rounded down (the final partial batch is dropped). Builds the training stream if needed."""
        ds = self.train_set
        if ds is None or ds.world_size != world_size:
            ds = PackedStream(self.paths, self.batch_size, self.shuffle_buffer, "train", drop_last=True,
                              weights=self.weights, positions_per_epoch=self.train_positions_per_epoch(world_size),
                              val_fraction=self.val_fraction, filters=self.filters, seed=self.seed,
                              rank=0, world_size=world_size)
        self.probe = ds  # the training stream this count was made on (its parts: trainer/resume.py)
        n = ds.batches_per_epoch()
        if n is not None:
            return int(n), ds.positions_per_epoch is not None
        if not ds.units:
            return 0, False
        return int(ds._expected_rows(ds.shard_units(0)) // self.batch_size), False

    def manifest_rows(self) -> int:
        """Rows in the training datasets' part files (before the split and filters)."""
        from nnue.pipeline.stream import dataset_parts
        import pyarrow.parquet as pq

        return int(sum(pq.ParquetFile(part).metadata.num_rows for part, _ in dataset_parts(self.paths)))

    def val_dataloader(self):
        return self._loader(self.val_set)
