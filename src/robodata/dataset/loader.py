"""PatternLoader: a torch DataLoader over PatternDataset.batch, resumable at the batch the
trainer actually consumed.

Batches are built whole inside the workers (one GOP decode per batch and episode, tensors
written once into shared memory), so the DataLoader runs with batch_size=None over a
BatchSampler. The large tensors go into batch slots each worker reuses
(robodata.dataset.ring): a slot is written again only once nothing in the trainer refers
to the batch it held, so a batch you keep stays intact. `state_dict()` records how many
samples this loader has *handed out*, not how many the sampler has produced (workers
prefetch ahead), so a resumed run continues with exactly the next batch.

`BatchLoader` is the same loader over any iterable of key lists (no resume state).

Both take a MixedDataset (robodata.dataset.mixture: a manifest mixing corpora, read by role) as
they take a PatternDataset, with a PatternSampler over its `index`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, get_worker_info

from robodata.config import require
from robodata.dataset.dataset import PatternDataset
from robodata.dataset.index import Anchor
from robodata.dataset.mixture import MixedDataset
from robodata.dataset.ring import LARGE, Arena, Leases, LocalSlots, SlotPool, SlotRef, large_bytes, slot_size
from robodata.dataset.sampler import PatternSampler
from robodata.errors import ContainerError

Source = PatternDataset | MixedDataset  # what builds the batches


@dataclass(frozen=True)
class LoaderConfig:
    batch_size: int = 32
    num_workers: int = 2
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetch_factor: int = 2
    drop_last: bool = False
    timeout_s: float = 0.0  # seconds to wait for a worker's batch (0: forever); no effect without workers
    # reused shared-memory batch slots per worker; None: prefetch_factor + 1 (+ 1 more with
    # one worker), enough for a loop that drops each batch when it takes the next; without
    # workers, private buffers in this process (None: 2, the batch in hand and the next); 0: off
    batch_slots: int | None = None
    slot_min_bytes: int = LARGE  # smaller batch tensors get their own memory per batch

    def __post_init__(self) -> None:
        require(self.batch_size >= 1, "batch_size must be >= 1")
        require(self.num_workers >= 0, "num_workers must be >= 0")
        require(self.prefetch_factor >= 1, "prefetch_factor must be >= 1")
        require(not self.persistent_workers or self.num_workers > 0, "persistent_workers needs num_workers > 0")
        require(self.batch_slots is None or self.batch_slots >= 0, "batch_slots must be >= 0")
        require(self.timeout_s >= 0, "timeout_s must be >= 0")
        require(self.slot_min_bytes >= 1, "slot_min_bytes must be >= 1")

    @property
    def slots(self) -> int:
        if self.batch_slots is not None:
            return self.batch_slots
        if self.num_workers == 0:
            return 2
        return self.prefetch_factor + (2 if self.num_workers == 1 else 1)


class _Batches(Dataset):
    """What the DataLoader indexes: a key list -> one batch, as (SlotRef, batch) once the
    loader has set `table` (the shared slot table)."""

    def __init__(self, dataset: Source, min_bytes: int = LARGE):
        self.dataset = dataset
        self.min_bytes = min_bytes
        self.table: torch.Tensor | None = None
        self.local: LocalSlots | None = None  # without workers: this process's slots
        self._pool: SlotPool | None = None
        self._pid = -1

    def __getitem__(self, keys: list) -> Any:
        info = get_worker_info()
        if self.table is None:
            return self.dataset.batch(keys)
        if info is None:
            if self.local is None:
                return SlotRef(-1, -1, None), self.dataset.batch(keys)
            if not self.local.need:
                self.local.grow(slot_bytes(self.dataset, keys, self.min_bytes))
            slot = self.local.claim()
            batch = self.dataset.batch(keys, arena=self.local.arena(slot, self.min_bytes))
            self.local.grow(large_bytes(batch.values(), self.min_bytes))
            return SlotRef(-1, slot, None), batch
        if self._pid != os.getpid():
            self._pool, self._pid = SlotPool(self.table, info.id), os.getpid()
        pool = self._pool
        assert pool is not None
        if not pool.need:  # the first batch: size the slots from its episode's streams
            pool.grow(slot_bytes(self.dataset, keys, self.min_bytes))
        ref = pool.claim()
        try:
            arena = Arena(ref.storage, self.min_bytes) if ref.storage is not None else None
            batch = self.dataset.batch(keys, arena=arena)
        except BaseException:
            pool.release(ref)
            raise
        pool.grow(large_bytes(batch.values(), self.min_bytes))
        return ref, batch

    def __len__(self) -> int:
        return len(self.dataset)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_pool": None, "_pid": -1, "local": None}


def slot_bytes(dataset: Source, keys: list, min_bytes: int = LARGE) -> int:
    """What a batch slot needs for a batch of `keys`: its window tensors of at least `min_bytes`,
    sized from the first key's episode (0 when it cannot be opened: the batch then sizes them).
    The slots are made with it before the first batch, so no batch writes into fresh memory
    (and the first is not a fresh batch held beside every slot)."""
    if not keys:
        return 0
    if isinstance(dataset, MixedDataset):
        return dataset.slot_bytes(keys, min_bytes)
    key = keys[0]
    row = key.row if isinstance(key, Anchor) else dataset.index.locate(int(key), dataset.config.seed).row
    try:
        streams = dataset.reader(row).meta.streams
    except (ContainerError, OSError, IndexError):
        return 0
    item = 4 if dataset.config.frames == "float32" else 1
    sizes = []
    for w in dataset.pattern.windows:
        for s in w.streams:
            spec = streams.get(s)
            if spec is None or (w.kind == "video") != (spec.kind == "video"):
                continue
            n = len(keys) * w.length
            if w.kind == "video":
                h, wd = w.resize or spec.shape[:2]
                sizes.append(n * h * wd * 3 * item)
            else:
                sizes.append(n * int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize)
            sizes.append(n)  # <stream>_is_pad
    sizes += [8 * len(keys), 8 * len(keys)]  # episode_index, t: as `large_bytes` counts a batch
    return slot_size(sizes, min_bytes)


class _Draws:
    """The key lists, calling `on_start` when an iteration draws its first one: with
    persistent workers that is after the previous epoch's leftovers were drained."""

    def __init__(self, batches: Iterable[list], on_start: Callable[[], None]):
        self.batches = batches
        self.on_start = on_start

    def __iter__(self) -> Iterator[list]:
        for i, keys in enumerate(self.batches):
            if i == 0:
                self.on_start()
            yield keys

    def __len__(self) -> int:
        return len(self.batches)  # type: ignore[arg-type]


class BatchLoader:
    """A DataLoader over PatternDataset.batch for an iterable of key lists, with batch slots.

    Args:
        dataset: the PatternDataset that builds each batch.
        batches: key lists (e.g. a BatchSampler over a PatternSampler or a list of Anchors).
        config: workers, prefetch, batch slots.
    """

    def __init__(self, dataset: Source, batches: Iterable[list], config: LoaderConfig):
        self.config = cfg = config
        self._batches = _Batches(dataset, cfg.slot_min_bytes)
        self._leases: Leases | None = None
        extra: dict[str, Any] = {}
        if cfg.num_workers > 0:
            extra = {
                "prefetch_factor": cfg.prefetch_factor,
                "persistent_workers": cfg.persistent_workers,
                "timeout": cfg.timeout_s,
            }
        self._dl = DataLoader(
            self._batches,
            batch_size=None,
            sampler=_Draws(batches, self._on_start),
            num_workers=cfg.num_workers,
            pin_memory=cfg.pin_memory,
            **extra,
        )

    def __len__(self) -> int:
        return len(self._dl)

    @property
    def slot_stats(self) -> dict[str, int]:
        """Batches handed out so far (this iteration; all, with persistent workers) that came
        in a reused slot vs in fresh memory."""
        lz = self._leases
        return {"slot_batches": lz.slot_batches if lz else 0, "fresh_batches": lz.fresh_batches if lz else 0}

    def _on_start(self) -> None:
        if self._leases is not None:
            self._leases.reset_stale()

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        cfg = self.config
        if cfg.slots == 0:
            self._batches.table = None
            yield from self._dl
            return
        if self._leases is None or not cfg.persistent_workers:
            # new worker processes start with this iteration: they get a new table
            self._leases = Leases(cfg.num_workers, cfg.slots)
            self._batches.table = self._leases.table
            self._batches.local = LocalSlots(cfg.slots) if cfg.num_workers == 0 else None
        leases = self._leases
        try:
            for ref, batch in self._dl:
                leases.track(ref)
                del ref
                yield batch
                del batch
                leases.release()  # before the DataLoader sends its next index to a worker
        finally:
            if not cfg.persistent_workers:
                leases.unmap()  # these workers are gone: their slots need not stay mapped here


class PatternLoader:
    """Batches of `dataset` in `sampler`'s order, resumable at the batch the trainer consumed.

    Args:
        dataset: the PatternDataset.
        sampler: the PatternSampler (its position is where iteration starts).
        config: batch size, workers and slots; LoaderConfig() if None.
    """

    def __init__(self, dataset: Source, sampler: PatternSampler, config: LoaderConfig | None = None):
        self.dataset = dataset
        self.sampler = sampler
        self.config = cfg = config or LoaderConfig()
        self._consumed = sampler.position
        self._loader = BatchLoader(dataset, BatchSampler(sampler, cfg.batch_size, cfg.drop_last), cfg)  # type: ignore[arg-type]  # groups Anchors

    def __len__(self) -> int:
        return len(self._loader)

    @property
    def slot_stats(self) -> dict[str, int]:
        return self._loader.slot_stats

    def __iter__(self) -> Iterator[dict[str, torch.Tensor]]:
        self._consumed = self.sampler.position
        for batch in self._loader:
            self._consumed += len(batch["t"])
            yield batch
            del batch

    def set_epoch(self, epoch: int) -> None:
        """Start epoch `epoch` (a fresh shuffle) at its first batch."""
        self.sampler.set_epoch(epoch)
        self._consumed = self.sampler.position

    def state_dict(self) -> dict[str, Any]:
        """Resume state at the last batch handed out (not the last one prefetched)."""
        return {"sampler": self.sampler.state_at(self._consumed)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at the batch after the last one handed out when `state` was taken.

        Raises:
            ConfigError: the state belongs to a different sample index (see PatternSampler).
        """
        self.sampler.load_state_dict(state["sampler"])
        self._consumed = self.sampler.position
