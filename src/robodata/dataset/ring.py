"""Batch slots: shared-memory batch buffers that each dataloader worker reuses.

A fresh shared-memory tensor per batch is slow for video batches: every 4 KiB page of a
new segment is faulted in and zeroed when the worker first writes it, and given back when
the trainer drops the batch. Copying a 640x480 frame into fresh shared memory measured
~0.8 ms here, about as long as decoding it, against ~0.05 ms into pages already mapped;
a wam batch of 4 is 440 MB. So each worker keeps a few batch-sized slots of shared
memory, made once, and writes every large batch tensor into one of them.

Protocol (a slot is never written while the trainer can still see it):

* `Leases` is a small shared int32 table (worker x slot) made by the main process before
  the workers start. FREE: the slot's worker may claim it. BUSY: claimed by its worker;
  only the main process sets it FREE again.
* Worker (`SlotPool.claim`): takes a FREE slot, marks it BUSY and sends a `SlotRef`
  (worker, slot, storage) with the batch. No FREE slot: the batch gets fresh shared
  memory, as without slots (it never waits, never overwrites). If building the batch
  fails, the slot is FREE again. Before its first batch a worker makes all its slots,
  sized from the pattern and the first episode's streams (robodata.dataset.loader.slot_bytes),
  and touches their pages (`SlotPool.grow`): no batch pays for first-touch page faults, and the
  first is not a fresh batch held beside every slot. A batch that needs more makes the slots
  grow (its own tensors that do not fit get fresh memory).
* Without workers (`LocalSlots`): the loader's own process reuses a few private buffers
  the same way, each taken again only once nothing but the loader refers to it.
* Main (`Leases.track`, `Leases.release`): keeps each slot's storage mapped and frees a
  slot it has handed out once nothing but the loader refers to that storage: its C++ use
  count (every tensor, view and numpy array over it holds one) and the Python refcount of
  the storage object are back to the loader's own. Checked every time the trainer asks
  for the next batch, before a new index goes to the workers. A batch, a view of it or a
  numpy array over it that the trainer keeps is therefore never overwritten; its slot
  stays BUSY and that worker uses its other slots, or fresh memory.
* pin_memory: the trainer gets a pinned copy, so the slot is free at the next check.
* persistent workers: a new epoch throws away the batches prefetched for the old one;
  their slots (BUSY, never handed out) are freed when the new epoch draws its first
  index, after that drain and before any new work is sent (`Leases.reset_stale`).

Not visible to the check: a batch sent on to another process, or memory used through a
raw `data_ptr()`: clone such a batch first. Tensors under `LARGE` bytes (timestamps,
flags, joint windows) get their own memory per batch as before, so keeping one of them
does not hold a slot.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import torch

FREE, BUSY = 0, 1
ALIGN = 64  # byte alignment of each tensor inside a slot
LARGE = 1 << 20  # default: tensors of at least this many bytes go into a slot


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def large_bytes(tensors, min_bytes: int = LARGE) -> int:
    """Bytes a slot needs for these batch tensors (those of at least `min_bytes`)."""
    return slot_size([t.nbytes for t in tensors], min_bytes)


def slot_size(sizes: list[int], min_bytes: int = LARGE) -> int:
    """Bytes a slot needs for tensors of these sizes (those of at least `min_bytes`)."""
    return sum(_aligned(n) for n in sizes if n >= min_bytes)


@dataclass
class SlotRef:
    """Travels with a batch from its worker: which slot holds it (-1: fresh memory)."""

    worker: int
    slot: int
    storage: torch.UntypedStorage | None


class Arena:
    """Carves the large tensors of one batch out of one slot's storage, in order."""

    def __init__(self, storage: torch.UntypedStorage, min_bytes: int = LARGE):
        self.storage = storage
        self.min_bytes = min_bytes
        self.used = 0

    def tensor(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor | None:
        nbytes = int(np.prod(shape)) * torch.empty(0, dtype=dtype).element_size()
        if nbytes < self.min_bytes:
            return None
        off = _aligned(self.used)
        if off + nbytes > self.storage.nbytes():
            return None  # a bigger batch than this slot was made for
        self.used = off + nbytes
        return torch.empty(0, dtype=torch.uint8).set_(self.storage, off, (nbytes,), (1,)).view(dtype).view(shape)


class SlotPool:
    """Worker side: this worker's slots, made (pages touched) once a batch size is known."""

    def __init__(self, table: torch.Tensor, worker: int):
        self.state = table[worker].numpy()  # a view of the shared table
        self.worker = worker
        self.storages: list[torch.UntypedStorage | None] = [None] * len(self.state)
        self.need = 0  # large bytes of the largest batch so far

    def claim(self) -> SlotRef:
        if self.need:
            for i in range(len(self.state)):
                if self.state[i] == FREE:
                    st = self.storages[i]
                    if st is None or st.nbytes() < self.need:
                        st = self.storages[i] = torch.UntypedStorage._new_shared(self.need)
                    self.state[i] = BUSY
                    return SlotRef(self.worker, i, st)
        return SlotRef(self.worker, -1, None)

    def grow(self, nbytes: int) -> None:
        """The batch just built needs `nbytes` in a slot: make every FREE slot that is missing
        or smaller, its pages touched now (one zero fill) rather than by the next batches."""
        if nbytes <= self.need:
            return
        self.need = nbytes
        for i in range(len(self.state)):
            st = self.storages[i]
            if self.state[i] == FREE and (st is None or st.nbytes() < nbytes):
                self.storages[i] = None  # the old one is unmapped before the new one is made
                self.storages[i] = _touched(torch.UntypedStorage._new_shared(nbytes))

    def release(self, ref: SlotRef) -> None:
        if ref.slot >= 0:
            self.state[ref.slot] = FREE


class LocalSlots:
    """Batch slots of a loader without workers: private buffers in the loader's own process,
    each reused once nothing but this object refers to it (the `Leases` check)."""

    def __init__(self, slots: int):
        self.anchors: list[torch.Tensor | None] = [None] * slots
        self.need = 0
        self._free = _baseline(shared=False)

    def claim(self) -> int:
        """A slot no batch refers to any more (-1: none, or no batch size known yet)."""
        for i, anchor in enumerate(self.anchors):
            if anchor is not None and anchor.untyped_storage().nbytes() >= self.need and _refs(anchor) == self._free:
                return i
        return -1

    def arena(self, slot: int, min_bytes: int = LARGE) -> Arena | None:
        anchor = self.anchors[slot] if slot >= 0 else None
        return Arena(anchor.untyped_storage(), min_bytes) if anchor is not None else None

    def grow(self, nbytes: int) -> None:
        """As `SlotPool.grow`: make the missing or smaller slots that nothing refers to."""
        if nbytes <= self.need:
            return
        self.need = nbytes
        for i, anchor in enumerate(self.anchors):
            if anchor is None or (anchor.untyped_storage().nbytes() < nbytes and _refs(anchor) == self._free):
                self.anchors[i] = None
                self.anchors[i] = torch.empty(0, dtype=torch.uint8).set_(_touched(torch.UntypedStorage(nbytes)))


def _touched(storage: torch.UntypedStorage) -> torch.UntypedStorage:
    torch.empty(0, dtype=torch.uint8).set_(storage).fill_(0)  # fault every page in now
    return storage


def _refs(anchor: torch.Tensor) -> tuple[int, int]:
    st = anchor.untyped_storage()
    return torch._C._storage_Use_Count(st._cdata), sys.getrefcount(st)


def _baseline(shared: bool = True) -> tuple[int, int]:
    """What `_refs` reads for a slot storage that only the loader refers to."""
    st = torch.UntypedStorage._new_shared(ALIGN) if shared else torch.UntypedStorage(ALIGN)
    anchor = torch.empty(0, dtype=torch.uint8).set_(st)
    del st
    return _refs(anchor)


class Leases:
    """Main side: the shared slot table, and the slots handed to the trainer."""

    def __init__(self, workers: int, slots: int):
        self.table = torch.zeros((workers, slots), dtype=torch.int32).share_memory_()
        self._state = self.table.numpy()
        self._mapped: dict[tuple[int, int], torch.Tensor] = {}  # keeps each slot mapped here
        self._held: set[tuple[int, int]] = set()  # handed out, not yet free
        self._free = _baseline()
        self.slot_batches = 0  # batches that came in a slot
        self.fresh_batches = 0  # ... and in fresh memory

    def track(self, ref: SlotRef) -> None:
        """A batch from `ref` is about to be handed to the trainer."""
        if ref.worker < 0 and ref.slot >= 0:  # a LocalSlots slot (no workers): nothing to map
            self.slot_batches += 1
            return
        if ref.slot < 0 or ref.storage is None:
            self.fresh_batches += 1
            return
        self.slot_batches += 1
        key = (ref.worker, ref.slot)
        self._mapped[key] = torch.empty(0, dtype=torch.uint8).set_(ref.storage)
        ref.storage = None
        self._held.add(key)

    def release(self) -> None:
        """Free every handed-out slot that nothing outside the loader refers to."""
        for key in list(self._held):
            if _refs(self._mapped[key]) == self._free:
                self._held.discard(key)
                self._state[key] = FREE

    def unmap(self) -> None:
        """Drop this process's mappings of the slots (after the workers have gone)."""
        self._mapped.clear()
        self._held.clear()

    def reset_stale(self) -> None:
        """Free BUSY slots that were never handed out (their batches were discarded)."""
        self.release()
        for w, s in zip(*np.nonzero(self._state == BUSY), strict=True):
            if (int(w), int(s)) not in self._held:
                self._state[w, s] = FREE
