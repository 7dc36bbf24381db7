"""ReadPattern validation, SampleIndex anchors, PatternSampler order/distribution/resume."""

from __future__ import annotations

import pytest

from robodata.dataset import PatternSampler, ReadPattern, SampleIndex, StreamWindow, preset
from robodata.errors import ConfigError
from tests.core.helpers_dataset import RATES, manifest


def test_presets_and_config_validation():
    wam, vla = preset("wam"), preset("vla")
    cams = wam.video[0]
    assert cams.streams == ("cam_left", "cam_right", "wrist") and cams.every == 3 and cams.length == 40
    assert vla.video[0].length == 2 and [w.length for w in vla.windows if w.name == "action"] == [50]
    with pytest.raises(ConfigError, match="length"):
        StreamWindow("x", ("a",), length=0)
    with pytest.raises(ConfigError, match="resize only applies"):
        StreamWindow("x", ("a",), "array", resize=(8, 8))
    with pytest.raises(ConfigError, match="two windows"):
        ReadPattern("p", (StreamWindow("a", ("s",)), StreamWindow("b", ("s",))))
    with pytest.raises(ConfigError, match="unknown key"):
        ReadPattern.from_dict({"name": "p", "windows": [{"name": "a", "streams": ["s"], "lenght": 3}]})
    p = ReadPattern.from_dict({"name": "p", "windows": [{"name": "a", "streams": ["cam_left"], "kind": "video",
                                                        "length": 4, "every": 2, "resize": [32, 48]}]})
    assert p.windows[0].resize == (32, 48)
    with pytest.raises(ConfigError, match="unknown read pattern"):
        preset("nope")


def test_index_counts_and_anchor_ranges():
    pat = ReadPattern("p", (StreamWindow("cams", ("cam_left",), "video", length=5, every=2, offset=-2),
                            StreamWindow("act", ("cmd",), "array", length=25)), anchor_stride_s=0.5)
    # needs 0.1 s of history (2 frames at 20 Hz) and 0.48 s ahead (24 steps at 50 Hz): anchors in [0.1, d-0.48]
    idx = SampleIndex(manifest(["a", "b", "c"], [3.0, 0.3, 1.0]), pat)
    assert list(idx.counts) == [5, 0, 1]
    assert len(idx) == 6
    for s in range(len(idx)):
        a = idx.locate(s)
        assert 0.1 - 1e-9 <= a.t <= [3.0, 0.3, 1.0][a.row] - 0.48 + 1e-9
        assert abs(a.t * 10 - round(a.t * 10)) < 1e-6  # on the 10 Hz grid (20 fps, every 2)
    with pytest.raises(IndexError):
        idx.locate(6)
    bad = {k: v for k, v in RATES.items() if k != "cmd"}
    with pytest.raises(ConfigError, match="cmd"):
        SampleIndex(manifest(["a"], [3.0], rates=bad), pat)


def test_jittered_anchors_are_seeded():
    pat = ReadPattern("p", (StreamWindow("act", ("cmd",), "array", length=5),), anchor_stride_s=1.0, anchor_jitter=True)
    idx = SampleIndex(manifest(["a"], [20.0]), pat)
    a = [idx.locate(i, seed=1).t for i in range(len(idx))]
    assert a == [idx.locate(i, seed=1).t for i in range(len(idx))]
    assert a != [idx.locate(i, seed=2).t for i in range(len(idx))]
    assert all(i <= t < i + 1 for i, t in enumerate(a))


def _index(n_eps=7, dur=10.0):
    pat = ReadPattern("p", (StreamWindow("act", ("cmd",), "array", length=1),), anchor_stride_s=1.0)
    return SampleIndex(manifest([f"u{i}" for i in range(n_eps)], [dur] * n_eps), pat)


def _ids(sampler):
    idx = sampler.index
    return [int(idx.cum[a.row - 1] if a.row else 0) + int(round(a.t)) for a in sampler]


@pytest.mark.parametrize("shuffle", ["global", "block", "none"])
def test_order_is_a_seeded_permutation(shuffle):
    idx = _index()
    n = len(idx)
    a = _ids(PatternSampler(idx, seed=3, shuffle=shuffle, block_size=4))
    assert sorted(a) == list(range(n))
    assert a == _ids(PatternSampler(idx, seed=3, shuffle=shuffle, block_size=4))
    if shuffle != "none":
        assert a != list(range(n))
        assert a != _ids(PatternSampler(idx, seed=4, shuffle=shuffle, block_size=4))
        s = PatternSampler(idx, seed=3, shuffle=shuffle, block_size=4)
        s.set_epoch(1)
        assert _ids(s) != a


def test_block_shuffle_keeps_neighbours_together():
    idx = _index()
    a = _ids(PatternSampler(idx, seed=0, shuffle="block", block_size=5))
    runs = [a[0] // 5]
    for x in a[1:]:
        if x // 5 != runs[-1]:
            runs.append(x // 5)
    assert len(runs) == len(set(runs)) == -(-len(a) // 5)  # each block is one contiguous run
    assert a[:5] != sorted(a[:5]) or a[5:10] != sorted(a[5:10])   # and shuffled inside


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_split_the_epoch(world):
    idx = _index()  # 77 samples
    parts = [_ids(PatternSampler(idx, seed=1, rank=r, world_size=world, shuffle="block", block_size=4)) for r in range(world)]
    assert len({len(p) for p in parts}) == 1 and -(-len(idx) // world) <= len(parts[0]) <= -(-len(idx) // world) + 4
    assert set().union(*map(set, parts)) == set(range(len(idx)))
    dl = [_ids(PatternSampler(idx, seed=1, rank=r, world_size=world, shuffle="block", block_size=4, drop_last=True))
          for r in range(world)]
    assert len({len(p) for p in dl}) == 1 and len(dl[0]) >= len(idx) // world - 4
    assert len(set().union(*map(set, dl))) == sum(map(len, dl))  # no duplicates with drop_last


@pytest.mark.parametrize("shuffle", ["global", "block"])
def test_resume_continues_the_exact_order(shuffle):
    idx = _index()
    full = _ids(PatternSampler(idx, seed=9, shuffle=shuffle, block_size=3))
    s = PatternSampler(idx, seed=9, shuffle=shuffle, block_size=3)
    it = iter(s)
    head = [next(it) for _ in range(23)]
    state = s.state_dict()
    assert state["position"] == 23
    s2 = PatternSampler(idx, seed=9, shuffle=shuffle, block_size=3)
    s2.load_state_dict(state)
    tail = _ids(s2)
    assert len(head) + len(tail) == len(full) and tail == full[23:]
    with pytest.raises(ConfigError, match="seed"):
        PatternSampler(idx, seed=1, shuffle=shuffle, block_size=3).load_state_dict(state)
