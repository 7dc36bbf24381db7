"""PatternDataset: correct windows (vs the container reader), padding, batching, DataLoader
with workers / pin_memory / persistent workers, reads through the page cache."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from robodata.cache import PageCache, PageCacheConfig
from robodata.container import EpisodeReader, Layout, TopicGroup, VideoSettings
from robodata.dataset import Anchor, PatternDataset, PatternSampler, ReadPattern, StreamWindow
from tests.core.helpers_container import CAMS, write_small
from tests.core.helpers_dataset import manifest

PATTERN = ReadPattern(
    "t",
    (
        StreamWindow("cameras", CAMS, "video", length=4, every=2, offset=-2),
        StreamWindow("state", ("joint_pos",), "array", length=3, every=5),
        StreamWindow("action", ("cmd",), "array", length=10),
    ),
    anchor_stride_s=0.25,
)


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    root = tmp_path_factory.mktemp("eps")
    bframes = Layout(
        groups=(
            TopicGroup("cameras", CAMS, 1.0, VideoSettings(gop=10, crf=20, bframes=2)),
            TopicGroup("proprio", ("joint_pos", "cmd"), 2.0),
            TopicGroup("events", ("events",), 60.0),
        )
    )
    paths, durs = [], []
    for i, (d, layout) in enumerate([(3.0, None), (2.0, bframes)]):
        p = root / f"ep{i}.rdep"
        write_small(p, duration_s=d, layout=layout)
        paths.append(str(p))
        durs.append(d)
    hints = [(EpisodeReader.open(p).footer_offset, EpisodeReader.open(p).footer_length) for p in paths]
    return manifest(paths, durs, sizes=[os.path.getsize(p) for p in paths], footers=hints)


def _expected(path, t):
    r = EpisodeReader.open(path)
    out = {}
    for c in CAMS:
        w = r.read_window(t - 2 / 20 - 0.01, t + 4 / 20 + 0.01, [c])[c]
        out[c] = w.data[::2][:4]
    a = r.read_window(0, 10, ["joint_pos", "cmd"])
    jt = np.abs(a["joint_pos"].t[None, :] - (t + np.arange(3)[:, None] * 5 / 100)).argmin(1)
    ct = np.abs(a["cmd"].t[None, :] - (t + np.arange(10)[:, None] / 50)).argmin(1)
    out["joint_pos"] = a["joint_pos"].data[jt]
    out["cmd"] = a["cmd"].data[ct]
    return out


def test_samples_match_the_reader_including_b_frames(episodes):
    ds = PatternDataset(episodes, PATTERN)
    assert len(ds) == sum(ds.index.counts) > 0
    uris = episodes.column("uri").to_pylist()
    keys = [ds.index.locate(i) for i in range(len(ds))]
    got = ds.__getitems__(keys)
    for k, s in zip(keys, got, strict=True):
        exp = _expected(uris[k.row], k.t)
        for c in CAMS:
            assert s[c].dtype == torch.uint8 and tuple(s[c].shape) == (4, 48, 64, 3)
            np.testing.assert_array_equal(s[c].numpy(), exp[c])
            assert not s[f"{c}_is_pad"].any()
        np.testing.assert_array_equal(s["joint_pos"].numpy(), exp["joint_pos"])
        np.testing.assert_array_equal(s["cmd"].numpy(), exp["cmd"])
    one = ds[keys[3]]  # a single __getitem__ agrees with the batched path
    np.testing.assert_array_equal(one["wrist"].numpy(), got[3]["wrist"].numpy())


def test_windows_past_the_episode_are_padded_and_flagged(episodes):
    ds = PatternDataset(episodes, PATTERN)
    s = ds[Anchor(0, 0.0)]  # two frames of history before t=0 do not exist
    assert s["cam_left_is_pad"].tolist() == [True, False, False, False]
    np.testing.assert_array_equal(s["cam_left"][0].numpy(), s["cam_left"][1].numpy())


def test_resize(episodes):
    pat = ReadPattern("r", (StreamWindow("cameras", ("wrist",), "video", length=2, resize=(24, 32)),))
    s = PatternDataset(episodes, pat)[0]
    assert tuple(s["wrist"].shape) == (2, 24, 32, 3)


def test_dataloader_with_workers_pin_memory_persistent_and_cache(episodes, tmp_path):
    cache = PageCache(
        PageCacheConfig(root=str(tmp_path / "cache"), page_size=64 * 1024, budget_bytes=64 << 20, touch_flush_s=0)
    )
    ds = PatternDataset(episodes, PATTERN, cache=cache)
    sampler = PatternSampler(ds.index, seed=5, shuffle="block", block_size=4)
    dl = DataLoader(ds, batch_size=4, sampler=sampler, num_workers=2, pin_memory=True, persistent_workers=True)
    ref = PatternDataset(episodes, PATTERN)
    order = list(PatternSampler(ds.index, seed=5, shuffle="block", block_size=4))
    seen = 0
    for epoch in range(2):
        sampler.set_epoch(0)
        for b, batch in enumerate(dl):
            assert batch["cam_left"].dtype == torch.uint8 and batch["cam_left"].shape[1:] == (4, 48, 64, 3)
            assert batch["cmd"].shape[1:] == (10, 7)
            keys = order[b * 4 : (b + 1) * 4]
            exp = ref.__getitems__(keys)
            np.testing.assert_array_equal(batch["cam_right"].numpy(), np.stack([e["cam_right"].numpy() for e in exp]))
            assert batch["episode_index"].tolist() == [k.row for k in keys]
            seen += len(keys)
        if epoch == 0:
            first = cache.stats()
    assert seen == 2 * len(order)
    s = cache.stats()
    assert first.misses > 0 and s.misses == first.misses and s.hits > first.hits  # second epoch: all from local disk


def test_pattern_loader_resumes_at_the_consumed_batch(episodes):
    from robodata.dataset import LoaderConfig, PatternLoader

    ds = PatternDataset(episodes, PATTERN)
    cfg = LoaderConfig(batch_size=3, num_workers=2, prefetch_factor=2)
    full = [
        (b["episode_index"].tolist(), b["t"].tolist())
        for b in PatternLoader(ds, PatternSampler(ds.index, seed=2, shuffle="block", block_size=3), cfg)
    ]
    loader = PatternLoader(ds, PatternSampler(ds.index, seed=2, shuffle="block", block_size=3), cfg)
    it = iter(loader)
    head = [next(it) for _ in range(2)]
    assert head[0]["cam_left"].is_shared()  # built in the worker, straight in shared memory
    assert head[0]["cam_left"].shape == (3, 4, 48, 64, 3)
    state = loader.state_dict()  # workers have prefetched further than this
    assert state["sampler"]["position"] == 6
    del it
    resumed = PatternLoader(ds, PatternSampler(ds.index, seed=2, shuffle="block", block_size=3), cfg)
    resumed.load_state_dict(state)
    tail = [(b["episode_index"].tolist(), b["t"].tolist()) for b in resumed]
    assert [(h["episode_index"].tolist(), h["t"].tolist()) for h in head] + tail == full


def test_workers_forked_after_the_parent_decoded_do_not_hang(episodes):
    # The parent decodes first (its decode threads own swscale state), then forks workers.
    ds = PatternDataset(episodes, PATTERN)
    ds.batch([ds.index.locate(0)])
    dl = DataLoader(ds, batch_size=2, num_workers=2, timeout=20)
    assert sum(len(b["t"]) for b in dl) == len(ds)
