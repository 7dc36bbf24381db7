"""Batch slots (robodata.dataset.ring): workers reuse shared-memory batch buffers, and a
batch the trainer still refers to is never overwritten."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from robodata.container import EpisodeReader
from robodata.dataset import LoaderConfig, PatternDataset, PatternLoader, PatternSampler, ReadPattern, StreamWindow
from robodata.dataset.ring import BUSY, FREE, Leases, SlotPool, SlotRef
from tests.core.helpers_container import CAMS, write_small
from tests.core.helpers_dataset import manifest

PATTERN = ReadPattern(
    "s",
    (
        StreamWindow("cameras", CAMS, "video", length=3, every=2),
        StreamWindow("state", ("joint_pos",), "array", length=4, every=5),
    ),
    anchor_stride_s=0.2,
)
# slot_min_bytes=1: every batch tensor of these small episodes goes into a slot
SLOTS = dict(batch_size=2, num_workers=2, prefetch_factor=2, slot_min_bytes=1, timeout_s=60)


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    root = tmp_path_factory.mktemp("slots")
    paths = []
    for i in range(2):
        p = root / f"ep{i}.rdep"
        write_small(p, duration_s=2.0)
        paths.append(str(p))
    hints = [(EpisodeReader.open(p).footer_offset, EpisodeReader.open(p).footer_length) for p in paths]
    return PatternDataset(
        manifest(paths, [2.0, 2.0], sizes=[os.path.getsize(p) for p in paths], footers=hints), PATTERN
    )


def _sampler(ds, epoch: int = 0):
    s = PatternSampler(ds.index, seed=1, shuffle="block", block_size=2)
    s.set_epoch(epoch)
    return s


def _reference(ds, epoch: int = 0):
    keys = list(_sampler(ds, epoch))
    return [ds.batch(keys[i : i + 2], shared=False) for i in range(0, len(keys), 2)]


def _same(batch, ref) -> None:
    assert batch.keys() == ref.keys()
    for k in ref:
        np.testing.assert_array_equal(batch[k].numpy(), ref[k].numpy(), err_msg=k)


def test_batches_the_trainer_keeps_are_never_overwritten(ds):
    ref = _reference(ds)
    assert len(ref) >= 8  # far more batches than the 2 x 2 slots
    loader = PatternLoader(ds, _sampler(ds), LoaderConfig(**SLOTS, batch_slots=2))
    kept = list(loader)  # every batch stays referenced
    assert len(kept) == len(ref)
    for b, r in zip(kept, ref, strict=True):
        _same(b, r)
    stats = loader.slot_stats
    assert stats["slot_batches"] <= 4  # each slot handed out once: it never came free
    assert stats["slot_batches"] + stats["fresh_batches"] == len(ref)


def test_slots_are_reused_once_the_trainer_drops_batches(ds):
    ref = _reference(ds)
    loader = PatternLoader(ds, _sampler(ds), LoaderConfig(**SLOTS))
    ptrs = []
    for b, r in zip(loader, ref, strict=True):
        _same(b, r)
        ptrs.append(b["cam_left"].untyped_storage().data_ptr())
    stats = loader.slot_stats
    assert stats["slot_batches"] >= len(ref) - 2 * SLOTS["num_workers"]
    assert len(set(ptrs)) <= SLOTS["num_workers"] * LoaderConfig(**SLOTS).slots + stats["fresh_batches"] < len(ref)


def test_slots_are_sized_before_the_first_batch_so_none_is_fresh(ds):
    from robodata.dataset.loader import slot_bytes
    from robodata.dataset.ring import large_bytes

    keys = list(_sampler(ds))[:2]
    assert slot_bytes(ds, keys, 1) == large_bytes(ds.batch(keys, shared=False).values(), 1)
    loader = PatternLoader(ds, _sampler(ds), LoaderConfig(**dict(SLOTS, batch_slots=4)))
    n = sum(1 for _ in loader)
    assert loader.slot_stats == {"slot_batches": n, "fresh_batches": 0}


def test_a_view_or_numpy_array_kept_from_a_batch_keeps_it_intact(ds):
    loader = PatternLoader(ds, _sampler(ds), LoaderConfig(**SLOTS, batch_slots=1))
    it = iter(loader)
    for _ in range(4):
        kept = next(it)
    assert loader.slot_stats["slot_batches"] >= 1
    view, arr = kept["wrist"][1], kept["joint_pos"].numpy()
    want_view, want_arr = view.clone(), arr.copy()
    del kept
    rest = sum(1 for _ in it)
    assert rest >= 4
    assert torch.equal(view, want_view) and np.array_equal(arr, want_arr)


def test_persistent_workers_epochs_cut_short_and_pin_memory(ds):
    cfg = LoaderConfig(**{**SLOTS, "num_workers": 1}, persistent_workers=True, pin_memory=True)
    loader = PatternLoader(ds, _sampler(ds), cfg)
    total = 0
    for epoch in range(3):
        loader.set_epoch(epoch)
        ref = _reference(ds, epoch)
        n = 2 if epoch == 0 else len(ref)  # the first epoch stops early: prefetched batches are dropped
        for i, b in zip(range(n), loader, strict=False):
            _same(b, ref[i])
        total += n
    stats = loader.slot_stats
    assert stats["slot_batches"] + stats["fresh_batches"] == total
    assert stats["fresh_batches"] <= 2  # the dropped batches' slots came back for the next epochs


def test_slot_pool_claims_only_free_slots_and_gives_back_a_failed_one():
    leases = Leases(workers=1, slots=2)
    pool = SlotPool(leases.table, worker=0)
    assert pool.claim().slot == -1  # no batch size known yet: fresh memory
    pool.grow(1024)  # after the first batch: every slot is made at once, not by later batches
    made = [st.data_ptr() for st in pool.storages if st is not None and st.nbytes() >= 1024]
    assert len(made) == 2
    a, b = pool.claim(), pool.claim()
    assert [a.storage.data_ptr(), b.storage.data_ptr()] == made
    assert (a.slot, b.slot) == (0, 1) and leases.table[0].tolist() == [BUSY, BUSY]
    assert a.storage.nbytes() >= 1024
    assert pool.claim().slot == -1  # all busy: fresh memory, no waiting
    pool.release(b)  # the batch built in b failed
    assert pool.claim().slot == 1


def test_leases_free_a_slot_only_when_nothing_refers_to_it():
    leases = Leases(workers=1, slots=2)  # as a worker would have sent them:
    refs = [SlotRef(0, i, torch.UntypedStorage._new_shared(4096)) for i in range(2)]
    leases.table[0] = BUSY
    held = torch.empty(0, dtype=torch.uint8).set_(refs[0].storage)[:10].view(torch.int16)
    arr = torch.empty(0, dtype=torch.uint8).set_(refs[1].storage)[:8].numpy()
    for r in refs:
        leases.track(r)
    leases.release()
    assert leases.table[0].tolist() == [BUSY, BUSY]
    del held
    leases.release()
    assert leases.table[0].tolist() == [FREE, BUSY]  # a numpy array still refers to slot 1
    del arr
    leases.release()
    assert leases.table[0].tolist() == [FREE, FREE]
    leases.table[0, 0] = BUSY  # claimed by a worker for a batch that was then discarded
    leases.reset_stale()
    assert leases.table[0].tolist() == [FREE, FREE]


def test_arena_carves_aligned_tensors_and_declines_what_does_not_fit():
    from robodata.dataset.ring import ALIGN, Arena

    arena = Arena(torch.UntypedStorage._new_shared(4096), min_bytes=64)
    a = arena.tensor((10, 3), torch.uint8)  # 30 bytes: below min_bytes, own memory
    assert a is None
    b = arena.tensor((100,), torch.uint8)
    c = arena.tensor((50,), torch.float64)
    assert b is not None and c is not None
    assert c.storage_offset() * 8 % ALIGN == 0 and c.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    b.fill_(7)
    c.fill_(1.5)
    assert int(b.sum()) == 700 and float(c.sum()) == 75.0  # no overlap
    assert arena.tensor((4096,), torch.uint8) is None  # no room left: fresh memory instead


def test_a_timeout_without_workers_is_accepted_and_batches_come_in_order(ds):
    # torch refuses timeout > 0 in its single-process iterator; the config's timeout applies
    # to workers only, so one LoaderConfig serves 0 and N workers alike
    ref = _reference(ds)
    got = list(PatternLoader(ds, _sampler(ds), LoaderConfig(**dict(SLOTS, num_workers=0))))
    assert len(got) == len(ref)
    for b, r in zip(got, ref, strict=True):
        _same(b, r)
    with pytest.raises(Exception, match="timeout_s"):
        LoaderConfig(timeout_s=-1)


def test_float32_frames_are_the_uint8_frames_in_lerobot_layout_and_scale(ds):
    from robodata.dataset import DatasetConfig

    keys = list(_sampler(ds))[:4]
    ref = ds.batch(keys, shared=False)
    fl = PatternDataset(ds.manifest, PATTERN, config=DatasetConfig(frames="float32"))
    got = fl.batch(keys, shared=False)
    for cam in CAMS:
        want = ref[cam].permute(0, 1, 4, 2, 3).float() / 255.0  # what a LeRobot user writes
        assert got[cam].dtype == torch.float32 and got[cam].shape == want.shape
        torch.testing.assert_close(got[cam], want, rtol=0, atol=0)
    for k in ref:
        if k not in CAMS:
            np.testing.assert_array_equal(got[k].numpy(), ref[k].numpy(), err_msg=k)
    chw = PatternDataset(ds.manifest, PATTERN, config=DatasetConfig(frames="uint8_chw")).batch(keys, shared=False)
    for cam in CAMS:  # LeRobot's return_uint8=True layout: the same bytes, channels first
        assert chw[cam].dtype == torch.uint8
        torch.testing.assert_close(chw[cam], ref[cam].permute(0, 1, 4, 2, 3), rtol=0, atol=0)
    with pytest.raises(Exception, match="frames must be one of"):
        DatasetConfig(frames="float16")


def test_without_workers_batches_reuse_buffers_and_a_kept_batch_stays_intact(ds):
    ref = _reference(ds)
    cfg = LoaderConfig(**dict(SLOTS, num_workers=0))
    loader = PatternLoader(ds, _sampler(ds), cfg)
    ptrs = []
    for b, r in zip(loader, ref, strict=True):
        _same(b, r)
        ptrs.append(b["cam_left"].untyped_storage().data_ptr())
    stats = loader.slot_stats
    assert stats == {"slot_batches": len(ref), "fresh_batches": 0}  # sized before the first batch
    assert len(set(ptrs)) == cfg.slots == 2  # the batch in hand and the next one
    loader = PatternLoader(ds, _sampler(ds), cfg)
    kept = list(loader)  # every batch kept: none may be overwritten by a later one
    for b, r in zip(kept, ref, strict=True):
        _same(b, r)
    assert loader.slot_stats["slot_batches"] <= 2
    off = PatternLoader(ds, _sampler(ds), LoaderConfig(**dict(SLOTS, num_workers=0, batch_slots=0)))
    assert sum(1 for _ in off) == len(ref) and off.slot_stats == {"slot_batches": 0, "fresh_batches": 0}


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("first", ["gone", "cut"])
def test_a_first_episode_that_cannot_open_leaves_the_slots_to_the_batch(ds, tmp_path, workers, first):
    from robodata.dataset import Anchor, BatchLoader
    from robodata.dataset.loader import slot_bytes

    bad = tmp_path / "ep-bad.rdep"
    if first == "cut":  # a container cut short: no footer
        good = ds.manifest.column("uri")[0].as_py()
        bad.write_bytes(Path(good).read_bytes()[:300])
    paths = [str(bad), *ds.manifest.column("uri").to_pylist()]
    table = manifest(paths, [2.0, 2.0, 2.0])
    broken = PatternDataset(table, PATTERN)
    keys = [[Anchor(0, 0.6), Anchor(1, 0.6)], [Anchor(2, 0.8), Anchor(0, 0.8)], [Anchor(0, 1.0), Anchor(1, 1.0)]]
    assert slot_bytes(broken, keys[0], 1) == 0  # sized by the batch instead, as before
    with pytest.warns(UserWarning, match="cannot serve"):
        want = [broken.batch(k, shared=False) for k in keys]
    cfg = LoaderConfig(**dict(SLOTS, num_workers=workers))
    got = list(BatchLoader(broken, keys, cfg))
    assert len(got) == len(want)
    for b, r in zip(got, want, strict=True):
        assert 0 not in b["episode_index"].tolist()
        _same(b, r)
