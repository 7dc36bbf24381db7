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
    assert [(w.length, w.every) for w in wam.windows] == [(40, 3), (40, 10), (40, 10)]
    # odd rates: every window still covers the same 4 s (a camera at 14.96 Hz was 4 s, its state 6 s)
    for fps, state_hz, action_hz in ((14.96, 100.0, None), (15.0, 14.96, 50.0), (29.97, 29.97, None)):
        odd = preset("wam", fps=fps, state_hz=state_hz, action_hz=action_hz)
        rates = (fps, state_hz, action_hz or state_hz)
        spans = [w.length * w.every / hz for w, hz in zip(odd.windows, rates, strict=True)]
        assert all(abs(x - 4.0) <= w.every / hz for x, w, hz in zip(spans, odd.windows, rates, strict=True)), spans
    with pytest.raises(ConfigError, match="length"):
        StreamWindow("x", ("a",), length=0)
    with pytest.raises(ConfigError, match="resize only applies"):
        StreamWindow("x", ("a",), "array", resize=(8, 8))
    with pytest.raises(ConfigError, match="two windows"):
        ReadPattern("p", (StreamWindow("a", ("s",)), StreamWindow("b", ("s",))))
    with pytest.raises(ConfigError, match="unknown key"):
        ReadPattern.from_dict({"name": "p", "windows": [{"name": "a", "streams": ["s"], "lenght": 3}]})
    p = ReadPattern.from_dict(
        {
            "name": "p",
            "windows": [
                {"name": "a", "streams": ["cam_left"], "kind": "video", "length": 4, "every": 2, "resize": [32, 48]}
            ],
        }
    )
    assert p.windows[0].resize == (32, 48)
    with pytest.raises(ConfigError, match="unknown read pattern"):
        preset("nope")


def test_index_counts_and_anchor_ranges():
    pat = ReadPattern(
        "p",
        (
            StreamWindow("cams", ("cam_left",), "video", length=5, every=2, offset=-2),
            StreamWindow("act", ("cmd",), "array", length=25),
        ),
        anchor_stride_s=0.5,
    )
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
    if shuffle == "block":  # 11 anchors per episode padded to 12: one repeat per episode
        assert set(a) == set(range(n)) and len(a) == 7 * 12
    else:
        assert sorted(a) == list(range(n))
    assert a == _ids(PatternSampler(idx, seed=3, shuffle=shuffle, block_size=4))
    if shuffle != "none":
        assert a != list(range(n))
        assert a != _ids(PatternSampler(idx, seed=4, shuffle=shuffle, block_size=4))
        s = PatternSampler(idx, seed=3, shuffle=shuffle, block_size=4)
        s.set_epoch(1)
        assert _ids(s) != a


def test_block_shuffle_keeps_neighbours_together():
    idx = _index()  # 7 episodes x 11 anchors
    a = _ids(PatternSampler(idx, seed=0, shuffle="block", block_size=5))
    assert len(a) == 7 * 15 and set(a) == set(range(len(idx)))
    blocks = [a[i : i + 5] for i in range(0, len(a), 5)]
    for blk in blocks:
        assert len({x // 11 for x in blk}) == 1  # one episode per block
        assert max(blk) - min(blk) < 5 or sorted(x % 11 for x in blk)[:1] == [0]  # neighbours (or the padded tail)
    assert any(blk != sorted(blk) for blk in blocks)  # shuffled inside
    assert [b[0] // 11 for b in blocks] != sorted(b[0] // 11 for b in blocks)  # and blocks shuffled


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_split_the_epoch(world):
    idx = _index()  # 77 samples; in blocks of 4 padded to 7 x 12 = 84
    padded = 84
    parts = [
        _ids(PatternSampler(idx, seed=1, rank=r, world_size=world, shuffle="block", block_size=4)) for r in range(world)
    ]
    assert len({len(p) for p in parts}) == 1 and -(-padded // world) <= len(parts[0]) <= -(-padded // world) + 4
    assert set().union(*map(set, parts)) == set(range(len(idx)))
    dl = [
        _ids(PatternSampler(idx, seed=1, rank=r, world_size=world, shuffle="block", block_size=4, drop_last=True))
        for r in range(world)
    ]
    assert len({len(p) for p in dl}) == 1 and len(dl[0]) >= padded // world - 4
    g = [_ids(PatternSampler(idx, seed=1, rank=r, world_size=world, drop_last=True)) for r in range(world)]
    assert len(set().union(*map(set, g))) == sum(map(len, g))  # global shuffle + drop_last: no duplicates


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


def test_manifest_weights_set_each_episodes_share():
    pat = ReadPattern("p", (StreamWindow("act", ("cmd",), "array", length=1),), anchor_stride_s=1.0)
    m = manifest(["a", "b", "c"], [10.0, 10.0, 10.0])
    m = m.set_column(m.schema.get_field_index("weight"), "weight", __import__("pyarrow").array([0.5, 0.25, 0.25]))
    idx = SampleIndex(m, pat, use_weights=True)
    assert list(idx.native) == [11, 11, 11] and list(idx.counts) == [17, 8, 8]
    rows = [idx.locate(i).row for i in range(len(idx))]
    assert rows.count(0) == 17
    t0 = sorted(idx.locate(i).t for i in range(17))
    assert set(t0) == {float(x) for x in range(11)}  # every anchor of "a" used, some twice
    assert len({idx.locate(i).t for i in range(17, 25)}) == 8  # "b": 8 distinct of its 11 anchors
    assert list(SampleIndex(m, pat).counts) == [11, 11, 11]  # natural counts without weights
    bad = m.set_column(m.schema.get_field_index("weight"), "weight", __import__("pyarrow").array([0.0, 0.0, 0.0]))
    with pytest.raises(ConfigError, match="weights"):
        SampleIndex(bad, pat, use_weights=True)


def test_dataset_keeps_per_row_state_in_arrays_not_python_objects():
    """A 50M-episode manifest must fit a training node: the dataset reads uris and footer hints
    from the manifest's Arrow columns and the index keeps ~28 bytes a row in numpy (~60 at the
    peak of building it), not per-row Python objects (~350 bytes a row traced before)."""
    import tracemalloc

    from robodata.dataset import PatternDataset

    n = 200_000
    m = manifest(
        [f"s3://bucket/containers/day=2026-11-30/ep{i:09d}.rdep" for i in range(n)],
        [30.0] * n,
        sizes=[10_000_000 + i for i in range(n)],
        footers=[(9_000_000 + i, 4000 + i % 7) for i in range(n)],
    )
    tracemalloc.start()
    try:
        ds = PatternDataset(m, preset("vla"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak / n < 120, f"{peak / n:.0f} traced bytes per manifest row"
    assert ds._uris[n - 1].as_py().endswith(f"ep{n - 1:09d}.rdep")
    assert (ds._hint("size_bytes", 7), ds._hint("footer_offset", 7), ds._hint("footer_length", 7)) == (
        10_000_007,
        9_000_007,
        4000,
    )
