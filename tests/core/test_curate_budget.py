"""The linear-time budget (`fast_keep`) decides exactly as the full-sort rule manifests were written
with (`exact_keep`), or declines; and the fixed-width hash path equals the reference hash."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robodata.curate import budget, stablehash
from robodata.curate.stablehash import stable_hash64, stable_hash64_py


@st.composite
def candidates(draw):
    n = draw(st.integers(1, 400))
    groups = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    ids = pl.Series("episode_id", [f"ep-{i:06d}-{rng.integers(0, 10**6)}" for i in rng.permutation(n)])
    codes = rng.integers(0, groups, n).astype(np.int64)
    kind = draw(st.sampled_from(["uniform", "integers", "zeros", "hostile"]))
    if kind == "uniform":
        dur = rng.uniform(0, 200, n)
    elif kind == "integers":  # exact sums: running sums land exactly on caps
        dur = rng.integers(0, 4, n).astype(np.float64) * 10.0
    elif kind == "zeros":
        dur = np.where(rng.random(n) < 0.5, 0.0, rng.uniform(0, 10, n))
    else:
        dur = rng.uniform(-50, 200, n)
        dur[rng.random(n) < 0.05] = np.nan
    caps = np.array(
        [draw(st.sampled_from([np.inf, 0.0, 10.0, 30.0, 100.0, 1e3, 1e4, 1e9])) for _ in range(groups)],
        dtype=np.float64,
    )
    return ids, codes, dur, caps, kind


@settings(max_examples=300, deadline=None, derandomize=True)
@given(candidates())
def test_fast_budget_equals_the_full_sort_rule_or_declines(case):
    ids, codes, dur, caps, kind = case
    hashes = budget.id_hashes(ids, "s/budget")
    exact = budget.exact_keep(codes, dur, caps, hashes, ids)
    fast = budget.fast_keep(codes, dur, caps, hashes)
    if kind == "uniform" and (caps > 0).all():  # no running sum lands within rounding of a cap
        assert fast is not None
    if kind == "hostile":  # negative or NaN durations: not monotone, always the full sort
        assert fast is None or (np.isfinite(dur).all() and dur.min() >= 0)
    if fast is not None:
        assert np.array_equal(fast, exact)


def test_fast_budget_decides_large_groups_without_falling_back():
    rng = np.random.default_rng(3)
    n = 200_000
    ids = pl.Series([f"ep-{i:010d}" for i in range(n)])
    codes = rng.integers(0, 4, n).astype(np.int64)
    dur = rng.uniform(20, 180, n)
    caps = np.array([3.6e5, 1e5, np.inf, 5e9])  # two binding caps, one none, one above the group's hours
    hashes = budget.id_hashes(ids, "bench/budget")
    fast = budget.fast_keep(codes, dur, caps, hashes)
    assert fast is not None
    assert np.array_equal(fast, budget.exact_keep(codes, dur, caps, hashes, ids))
    assert fast[codes == 2].all() and fast[codes == 3].all() and 0 < fast[codes == 1].sum() < (codes == 1).sum()


def test_fixed_width_hash_path_equals_the_reference():
    ids = pa.array([f"ep-{i:010d}" for i in range(70_000)] + ["ep-9999999999"])  # crosses a block
    got = stable_hash64(ids, "bench/budget")
    for i in (0, 1, 65_535, 65_536, 70_000):
        assert int(got[i]) == stable_hash64_py(ids[i].as_py(), "bench/budget")
    part = ids.slice(65_530, 20)  # an offset into the buffers
    assert [int(h) for h in stable_hash64(part, "x")] == [stable_hash64_py(v.as_py(), "x") for v in part]
    same = pa.array(["abc", "abc", "abd"])  # every byte but the last shared
    assert [int(h) for h in stable_hash64(same)] == [stable_hash64_py(v) for v in ["abc", "abc", "abd"]]


def test_chunked_input_hashes_as_the_reference_in_any_layout(monkeypatch):
    rng = np.random.default_rng(1)
    chunks = [pa.array([f"ep-{rng.integers(10**9):010d}" for _ in range(rng.integers(0, 50))]) for _ in range(40)]
    values = pa.chunked_array([*chunks, pa.array(["x", None, "abcdef"])], pa.string())
    ref = np.array([stable_hash64_py(v or "", "salt") for v in values.to_pylist()], dtype=np.uint64)
    assert (stable_hash64(values, "salt") == ref).all()
    assert (stable_hash64(values.cast(pa.large_string()), "salt") == ref).all()
    assert (stable_hash64(values.cast(pa.string_view()), "salt") == ref).all()
    series = pl.Series(values.to_pylist())  # Polars' string views, shared
    assert (stable_hash64(series, "salt") == ref).all()
    monkeypatch.setattr(stablehash, "_SPLIT", 8)  # rows split over threads inside a chunk
    assert (stable_hash64(pl.concat([series, series]), "salt") == np.concatenate([ref, ref])).all()


def test_hash_refuses_views_pointing_outside_their_buffers():
    good = pa.array(["a" * 20, "b" * 20], pa.string_view())
    views = np.frombuffer(good.buffers()[1], np.int32).copy().reshape(2, 4)
    views[1, 3] = 1 << 20  # the second string's offset, far past its buffer
    bad = pa.Array.from_buffers(pa.string_view(), 2, [None, pa.py_buffer(views.tobytes()), *good.buffers()[2:]])
    with pytest.raises(ValueError, match="row 1 points outside"):
        stable_hash64(bad)
    from robodata.curate import kernels  # Arrow refuses to build such offsets: the kernel itself

    out = np.zeros(2, np.uint64)
    data, valid = np.frombuffer(b"x" * 40, np.uint8), np.zeros(0, np.uint8)
    assert kernels.offsets(np.array([0, 20, 40_000]), data, valid, np.uint64(1), out) == 1
    assert kernels.offsets(np.array([0, 20, 10]), data, valid, np.uint64(1), out) == 1
    assert kernels.offsets(np.array([0, 20, 40]), data, valid, np.uint64(1), out) == -1


def test_equal_hashes_need_the_ids_and_follow_the_old_rule_with_them():
    ids = pl.Series(["ep-c", "ep-a", "ep-b", "ep-d"])
    codes = np.zeros(4, dtype=np.int64)
    dur = np.array([10.0, 20.0, 30.0, 40.0])
    caps = np.array([35.0])
    same = lambda at: np.zeros(4 if at is None else len(at), dtype=np.uint64)  # noqa: E731
    with pytest.raises(budget.NeedsIds):
        budget.exact_keep(codes, dur, caps, same, None)
    assert budget.fast_keep(codes, dur, caps, same) is None  # declines: equal hashes
    # equal hashes: episode_id order (ep-a 20 s, ep-b 30 s: over the cap)
    assert budget.exact_keep(codes, dur, caps, same, ids).tolist() == [False, True, False, False]


@pytest.mark.parametrize("dense", [True, False])
def test_group_codes_are_ranks_of_the_sorted_groups_nulls_as_empty(monkeypatch, dense):
    """Each candidate's code is its group's rank among the sorted distinct groups (null: ""), for
    String and Categorical input, through the table of ids or, for ids far apart, a search."""
    if not dense:
        monkeypatch.setattr(budget, "_DENSE_IDS", 0)
    values = ["pour", None, "fold", "zz", "fold", "pour", None, "a"]
    for series in (pl.Series(values), pl.Series(values).cast(pl.Categorical)):
        names, codes = budget.group_codes(series)
        assert names == ["", "a", "fold", "pour", "zz"]
        assert codes.dtype == np.int32
        assert [names[c] for c in codes] == [v or "" for v in values]
    names, codes = budget.group_codes(pl.Series([], dtype=pl.String))
    assert names == [] and len(codes) == 0
