"""The budget rules (robodata.curate.budget): version 2 decides a group on any prefix of its order
that holds its cut, as on all its candidates; version 1's rule is unchanged; and the vectorized hash
(robodata.catalog.order) equals the reference hash in every layout."""

from __future__ import annotations

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from robodata.catalog import order
from robodata.catalog.order import stable_hash64, stable_hash64_py
from robodata.curate import budget
from robodata.errors import ConfigError


@st.composite
def candidates(draw):
    n = draw(st.integers(1, 300))
    groups = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    ids = pl.Series("episode_id", [f"ep-{i:06d}-{rng.integers(0, 10**6)}" for i in rng.permutation(n)])
    codes = rng.integers(0, groups, n).astype(np.int32)
    kind = draw(st.sampled_from(["uniform", "integers", "hostile"]))
    if kind == "uniform":
        dur = rng.uniform(0, 200, n)
    elif kind == "integers":  # exact sums: running sums land exactly on caps
        dur = rng.integers(0, 4, n).astype(np.float64) * 10.0
    else:
        dur = rng.uniform(-50, 200, n)
        dur[rng.random(n) < 0.05] = np.nan
    caps = np.array([draw(st.sampled_from([np.inf, 0.0, 30.0, 1e3, 1e4])) for _ in range(groups)])
    hashes = stable_hash64(ids, "s/budget")
    if draw(st.booleans()):  # equal hashes: episode_id decides between them
        hashes = hashes % np.uint64(7)
    return ids, codes, dur, caps, hashes


@settings(max_examples=200, deadline=None, derandomize=True)
@given(candidates(), st.floats(0, 1))
def test_a_prefix_of_the_order_decides_a_group_as_all_its_candidates_do(case, frac):
    """Version 2: the candidates under any hash threshold decide each group whose cut lies below it
    exactly as all of them do; the others keep all they were given (their cut lies further)."""
    ids, codes, dur, caps, hashes = case
    full, decided_all = budget.prefix_keep(codes, dur, caps, hashes, ids)
    assert decided_all[np.isfinite(caps) & ~np.isin(np.arange(len(caps)), codes)].sum() == 0
    threshold = np.quantile(hashes, frac) if len(hashes) else 0
    under = np.flatnonzero(hashes <= threshold)
    part, decided = budget.prefix_keep(codes[under], dur[under], caps, hashes[under], ids.gather(under))
    for g in range(len(caps)):
        mine = codes[under] == g
        if decided[g]:
            assert np.array_equal(part[mine], full[under][mine])  # and nothing of it above the threshold:
            assert not full[(codes == g) & (hashes > threshold)].any()
        elif np.isfinite(caps[g]):
            assert part[mine].all()


def test_version_2_keeps_the_longest_prefix_within_the_cap_ties_by_id():
    ids = pl.Series(["ep-c", "ep-a", "ep-b", "ep-d"])
    codes = np.zeros(4, dtype=np.int32)
    dur = np.array([10.0, 20.0, 30.0, 1.0])
    same = np.zeros(4, dtype=np.uint64)  # equal hashes: episode_id order (ep-a, ep-b, ep-c, ep-d)
    keep, decided = budget.prefix_keep(codes, dur, np.array([35.0]), same, ids)
    assert keep.tolist() == [False, True, False, False] and decided.tolist() == [True]  # ep-b crosses: the end
    # version 1 keeps every row whose running sum is within the cap, past the first one over it
    keep, _ = budget.exact_keep(codes, dur, np.array([35.0]), same, ids)
    assert keep.tolist() == [False, True, False, False]
    back = np.array([-25.0, 20.0, 30.0, 1.0])  # a negative duration brings the running sum back under
    assert budget.exact_keep(codes, back, np.array([35.0]), same, ids)[0].tolist() == [True, True, False, True]
    assert budget.prefix_keep(codes, back, np.array([35.0]), same, ids)[0].tolist() == [False, True, False, False]
    nan = np.array([10.0, np.nan, 1.0, 1.0])  # a NaN ends its group's prefix (version 2)
    keep, decided = budget.prefix_keep(codes, nan, np.array([1e9]), np.arange(4, dtype=np.uint64), ids)
    assert keep.tolist() == [True, False, False, False] and decided.tolist() == [True]


def test_version_2_splits_total_hours_by_the_named_weights():
    from robodata.curate.spec import spec_from_dict

    doc = {
        "name": "w",
        "mix": {"by": "task", "weights": {"a": 3, "b": 1}, "default_weight": 2},
        "budget": {"total_hours": 8},
    }
    one, two = spec_from_dict({**doc, "version": 1}), spec_from_dict({**doc, "version": 2})
    assert budget.caps_of(one, ["a", "c"])[1].tolist() == [8 * 3600 * 3 / 5, 8 * 3600 * 2 / 5]  # over a, c present
    assert budget.caps_of(two, ["a", "c"])[1].tolist() == [8 * 3600 * 3 / 4, 8 * 3600 * 2 / 4]  # over a, b named
    plan = budget.weigh(two, ["a", "b", "c"], np.array([0, 2, 2]), np.array([10.0, 5.0, 15.0]), np.arange(3))
    assert plan.weight.tolist() == [0.6, 0.1, 0.3]  # shares over the groups kept (a 3, c 2), by duration
    with pytest.raises(ConfigError, match="name a group with a weight > 0"):
        spec_from_dict({**doc, "version": 2, "mix": {"by": "task"}})


def test_group_codes_are_ranks_of_the_sorted_groups_nulls_as_empty():
    values = ["pour", None, "fold", "zz", "fold", "pour", None, "a"]
    for series in (pl.Series(values), pl.Series(values).cast(pl.Categorical)):
        names, codes = budget.group_codes(series)
        assert names == ["", "a", "fold", "pour", "zz"]
        assert codes.dtype == np.int32
        assert [names[c] for c in codes] == [v or "" for v in values]
    names, codes = budget.group_codes(pl.Series([], dtype=pl.String))
    assert names == [] and len(codes) == 0


def test_hash_equals_the_reference_in_every_layout(monkeypatch):
    rng = np.random.default_rng(1)
    chunks = [pa.array([f"ep-{rng.integers(10**9):010d}" for _ in range(rng.integers(0, 50))]) for _ in range(40)]
    odd = pa.array(["x", None, "abcdef", "", "ünïcode", "y" * 300])
    values = pa.chunked_array([*chunks, odd], pa.string())
    ref = np.array([stable_hash64_py(v or "", "salt") for v in values.to_pylist()], dtype=np.uint64)
    assert (stable_hash64(values, "salt") == ref).all()
    assert (stable_hash64(values.cast(pa.large_string()), "salt") == ref).all()
    assert (stable_hash64(values.cast(pa.string_view()), "salt") == ref).all()
    series = pl.Series(values.to_pylist())
    assert (stable_hash64(series, "salt") == ref).all()
    fixed = pa.array([f"ep-{i:010d}" for i in range(70)])
    assert (stable_hash64(fixed.slice(7, 20), "x") == [stable_hash64_py(v.as_py(), "x") for v in fixed[7:27]]).all()
    monkeypatch.setattr(order, "_BLOCK", 8)  # blocks inside a chunk
    assert (stable_hash64(pl.concat([series, series]), "salt") == np.concatenate([ref, ref])).all()


def test_stored_budget_hashes_keep_the_hash_order():
    h = np.array([0, 1, 2**63 - 1, 2**63, 2**64 - 1], dtype=np.uint64)
    s = order.stored(h)
    assert s.dtype == np.int64 and (np.diff(s) > 0).all()
    assert (order.unsigned(s) == h).all()
