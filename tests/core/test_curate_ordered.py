"""Budgeted specs over the catalog's budget order (robodata.curate.ordered): the rows of the plain
scan, from the row groups under a threshold of `budget_hash`; and the budget order's upkeep
(robodata.catalog.order: merges, salt changes, older tables, files the Delta log does not name)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from deltalake import write_deltalake
from hypothesis import given, settings
from hypothesis import strategies as st

from robodata.catalog import order
from robodata.catalog.maintenance import SIDE_FILES, OptimizeConfig, _set_budget, optimize
from robodata.catalog.rows import conform
from robodata.catalog.schema import CATALOG_SCHEMA
from robodata.catalog.table import Catalog
from robodata.curate import ordered
from robodata.curate.run import curate
from robodata.curate.select import evaluate, select
from robodata.curate.spec import spec_from_dict
from robodata_testing import synthetic_catalog as synthetic

TASKS = ["fold", "pick", "wipe"]
T0 = datetime(2024, 1, 1, tzinfo=UTC)
SPEC = {  # the bench's full-table spec, version 2, at a scale that binds on a few thousand rows
    "version": 2,
    "name": "fold2",
    "filters": [
        {"column": "task", "op": "in", "value": ["fold_towel", "fold_shirt", "hang_cloth", "box_pack"]},
        {"column": "quality_score", "op": ">=", "value": 0.6},
        {"column": "qc_status", "op": "==", "value": "pass"},
    ],
    "mix": {"by": "task", "weights": {"fold_towel": 3, "fold_shirt": 2, "hang_cloth": 1, "box_pack": 1}},
    "budget": {"total_hours": 20, "per_group_hours": {"box_pack": 1}},
    "exclude": {"robots": ["sfo-1-r003"]},
    "split": {"val_fraction": 0.05, "salt": "s"},
}


def plain(spec_doc: dict, cat: Catalog) -> pl.DataFrame:
    return evaluate(spec_from_dict(spec_doc), pl.scan_delta(cat.table()))[0]


@st.composite
def hostile_rows(draw, max_rows: int = 60) -> pa.Table:
    n = draw(st.integers(1, max_rows))
    rows = []
    for i in range(n):
        quarantined = draw(st.integers(0, 9)) == 0
        start = None if quarantined and draw(st.booleans()) else T0 + timedelta(hours=draw(st.integers(0, 24 * 4)))
        duration = draw(st.one_of(st.floats(0, 300), st.sampled_from([None, 0.0, -20.0, float("nan")])))
        rows.append(
            {
                "episode_id": f"ep-{draw(st.integers(0, 3))}{i:03d}",
                "uri": f"s3://b/{i}",
                "site": draw(st.sampled_from(["sfo-1", "aus-1"])),
                "robot": draw(st.sampled_from(["r1", "r2"])),
                "task": draw(st.sampled_from([*TASKS, None])),
                "start_time": start,
                "duration_s": duration,
                "quality_score": draw(st.floats(0, 1, width=32)),
                "qc_status": "quarantined" if quarantined else "pass",
                "ingest_batch": "b0",
            }
        )
    return conform(rows)


@st.composite
def budgeted_specs(draw, ids: list[str], salt: str) -> dict:
    """Version-2 specs with hour caps whose mix groups are named: the budget order's."""
    doc: dict = {"version": 2, "name": "prop", "split": {"val_fraction": 0.2, "salt": salt}}
    filters = draw(
        st.lists(
            st.one_of(
                st.builds(lambda v: {"column": "quality_score", "op": ">=", "value": v}, st.floats(0, 1)),
                st.builds(lambda v: {"column": "duration_s", "op": "<", "value": v}, st.floats(0, 400)),
                st.just({"column": "qc_status", "op": "==", "value": "pass"}),
                st.just({"column": "day", "op": "between", "value": ["2024-01-02", "2024-01-04"]}),
            ),
            max_size=2,
        )
    )
    kind = draw(st.sampled_from(["none", "listed", "filtered"]))
    hours = st.floats(0.001, 0.3)
    if kind == "none":
        doc["budget"] = {"total_hours": draw(hours)}
    else:
        groups = draw(st.lists(st.sampled_from(TASKS), min_size=1, max_size=3, unique=True))
        weights = {g: draw(st.floats(0.5, 3)) for g in groups}
        doc["mix"] = {"by": "task", "weights": weights, "default_weight": 0 if kind == "listed" else 1}
        if kind == "filtered":
            filters.append({"column": "task", "op": "in", "value": groups})
        if draw(st.booleans()):
            doc["budget"] = {"total_hours": draw(hours), "per_group_hours": {groups[0]: draw(hours)}}
        else:
            doc["budget"] = {"per_group_hours": {g: draw(hours) for g in groups}}
    doc["filters"] = filters
    doc["exclude"] = {"episode_ids": draw(st.lists(st.sampled_from(ids), max_size=2))}
    return doc


@settings(max_examples=30)
@given(data=st.data())
def test_random_catalogs_x_random_budgeted_specs_select_the_plain_scans_rows(tmp_path_factory, data, monkeypatch):
    """Hostile rows (null, zero, negative, NaN durations; null tasks; quarantined rows without a
    day), merged in two batches, optimized (salt "s") or not (a new table's salt ""), and a first
    threshold of 4 rows (so groups are widened): the budget order gives the plain scan's rows and
    groups."""
    monkeypatch.setattr(ordered, "FIRST_ROWS", 4)
    rows = data.draw(hostile_rows())
    optimized = data.draw(st.booleans())
    doc = data.draw(budgeted_specs(rows.column("episode_id").to_pylist(), salt="s" if optimized else ""))
    cat = Catalog(str(tmp_path_factory.mktemp("c") / "cat"))
    half = rows.num_rows // 2
    cat.merge(rows.slice(0, half))
    cat.merge(rows.slice(half))
    if optimized:
        optimize(cat, None, OptimizeConfig(row_group_rows=256, split_salt="s"))
    if data.draw(st.booleans()):
        cat.merge(rows.slice(0, max(1, half // 2)))  # files a merge wrote since, hashed by the merge
    sel = select(spec_from_dict(doc), cat)
    want, groups = evaluate(spec_from_dict(doc), pl.scan_delta(cat.table()))
    assert sel.evaluated_by.startswith("budget order"), sel.evaluated_by
    assert sel.rows.equals(want) and sel.groups == groups


def _catalog(path: Path, days: int = 4, per_day: int = 4000, salt: str = "s", rg: int = 512) -> Catalog:
    cat = Catalog(str(path))
    cat.backfill(synthetic.rows(synthetic.FleetShape(rows_per_day=per_day), 0, days * per_day))
    optimize(cat, None, OptimizeConfig(row_group_rows=rg, split_salt=salt))
    return cat


def _rchar() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar")


def test_a_budgeted_spec_reads_the_first_row_groups_of_each_day(tmp_path, monkeypatch):
    """Two days of 25k rows in row groups of 1Ki: the spec's caps lie near 7 % of the hash range, so
    its reads (the first two row groups of each day and the footers) are a fraction of the table."""
    monkeypatch.setattr(ordered, "FIRST_ROWS", 4096)  # two days: no sample of days places the first threshold
    cat = _catalog(tmp_path / "cat", days=2, per_day=25_000, rg=1024)
    spec = spec_from_dict(SPEC)
    select(spec, cat)  # warm: what a first call loads
    before = _rchar()
    sel = select(spec, cat)
    read = _rchar() - before
    table = sum(p.stat().st_size for p in Path(cat.uri).rglob("*.parquet") if "_delta_log" not in str(p))
    assert sel.evaluated_by.startswith("budget order") and sel.rows.height > 500
    assert read < 0.3 * table, (read, table)  # the plain scan reads about all of it
    assert sel.rows.equals(plain(SPEC, cat))
    assert select(spec_from_dict({**SPEC, "version": 1}), cat).evaluated_by.startswith("plain scan: version 1")


def test_files_the_delta_log_does_not_name_change_nothing(tmp_path):
    """Issue 43: a stray data file in a day's folder (a copy of another day's rows, renamed),
    leftovers of earlier layouts and any other file: the same rows, the same content hash."""
    cat = _catalog(tmp_path / "cat", days=2)
    before = [curate(spec_from_dict(d), cat, tmp_path / "a")[0] for d in (SPEC, {**SPEC, "version": 1})]
    root = Path(cat.uri)
    data = sorted(root.glob("day=*/*.parquet"))
    shutil.copy(data[0], data[1].parent / ("part-00000-stray-" + data[0].name))
    shutil.copy(data[1], data[1].with_name("renamed.parquet"))
    (root / SIDE_FILES).mkdir()
    (root / SIDE_FILES / "x.rows5").write_bytes(b"junk")
    (root / "day=2024-01-09").mkdir()
    shutil.copy(data[0], root / "day=2024-01-09" / "part-0.parquet")
    after = [curate(spec_from_dict(d), cat, tmp_path / "b")[0] for d in (SPEC, {**SPEC, "version": 1})]
    assert [i.content_hash for i in after] == [i.content_hash for i in before]
    assert optimize(cat, ["2024-01-01"])["sideFilesRemoved"] == 1  # the earlier layouts', once
    assert not (root / SIDE_FILES).exists() and optimize(cat, ["2024-01-01"])["sideFilesRemoved"] == 0


def test_merges_write_the_tables_budget_hash_and_a_salt_change_completes_before_it_is_used(tmp_path):
    cat = Catalog(str(tmp_path / "cat"))
    shape = synthetic.FleetShape(rows_per_day=500)
    rows = synthetic.rows(shape, 0, 1000)
    lying = rows.set_column(rows.schema.get_field_index("budget_hash"), "budget_hash", pa.array([7] * 1000))
    cat.merge(lying)  # whatever a writer passes is replaced
    assert order.table_salt(cat.table()) == "" and order.ordered_salt(cat.table()) == ""

    def stored(salt: str) -> bool:
        got = pl.read_delta(cat.uri).sort("episode_id")
        return bool(
            np.array_equal(
                order.unsigned(got["budget_hash"].to_numpy()), order.stable_hash64(got["episode_id"], salt + "/budget")
            )
        )

    assert stored("")
    doc = {**SPEC, "budget": {"total_hours": 2, "per_group_hours": {"box_pack": 0.1}}}
    assert select(spec_from_dict(doc), cat).evaluated_by.startswith("plain scan: split.salt 's'")
    assert optimize(cat, ["2024-01-01"], OptimizeConfig(split_salt="s"))["days"] == 2  # a salt change: every day
    assert stored("s") and select(spec_from_dict(doc), cat).evaluated_by.startswith("budget order")
    # a salt change cut short: the new salt recorded, not complete; a merge then writes its hashes
    _set_budget(cat, order.metadata("t", complete=False), None, 3)
    cat.merge(synthetic.rows(shape, 1000, 10))
    t_doc = {**doc, "split": {"salt": "t"}}
    assert select(spec_from_dict(t_doc), cat).evaluated_by.startswith("plain scan: the catalog's budget hashes are not")
    optimize(cat, ["2024-01-03"])  # the next run rewrites every day and completes it
    assert order.ordered_salt(cat.table()) == "t" and stored("t")
    sel = select(spec_from_dict(t_doc), cat)
    assert sel.evaluated_by.startswith("budget order") and sel.rows.equals(plain(t_doc, cat))


def test_a_table_from_before_the_budget_order_is_hashed_by_optimize(tmp_path):
    uri = str(tmp_path / "old")
    old = pa.schema([f for f in CATALOG_SCHEMA if f.name != "budget_hash"])
    rows = synthetic.rows(synthetic.FleetShape(rows_per_day=500), 0, 1000).select(old.names)
    write_deltalake(uri, rows, partition_by=["day"])
    cat = Catalog(uri)
    cat.merge(synthetic.rows(synthetic.FleetShape(rows_per_day=500), 1000, 10))  # migrates: column, salt ""
    assert order.table_salt(cat.table()) == "" and order.ordered_salt(cat.table()) is None
    doc = {**SPEC, "split": {"salt": ""}, "budget": {"total_hours": 2, "per_group_hours": {"box_pack": 0.1}}}
    assert "not complete" in select(spec_from_dict(doc), cat).evaluated_by
    optimize(cat)
    sel = select(spec_from_dict(doc), cat)
    assert sel.evaluated_by.startswith("budget order") and sel.rows.equals(plain(doc, cat))
    # a writer that bypasses Catalog leaves a row without a budget_hash: the plain scan decides
    stray = synthetic.rows(synthetic.FleetShape(rows_per_day=500), 2000, 5).cast(CATALOG_SCHEMA)
    write_deltalake(cat.table(), stray, mode="append")
    sel = select(spec_from_dict(doc), cat)
    assert sel.evaluated_by.startswith("plain scan: rows without a budget_hash")
    assert sel.rows.equals(plain(doc, cat))


@pytest.mark.parametrize(
    ("patch", "why"),
    [
        ({"budget": {}}, "no hour caps"),
        ({"mix": {"by": "task", "weights": {"fold_towel": 1}}, "filters": []}, "are not named"),
        ({"budget": {"per_group_hours": {"box_pack": 1}}}, "a group without an hour cap"),
        ({"split": {"salt": "other"}}, "is not the catalog's budget salt"),
    ],
)
def test_specs_the_budget_order_cannot_serve_take_the_plain_scan(tmp_path_factory, patch, why):
    cat = _catalog(tmp_path_factory.mktemp("c") / "cat", days=1, per_day=2000)
    doc = {**SPEC, **patch}
    sel = select(spec_from_dict(doc), cat)
    assert why in sel.evaluated_by and sel.rows.equals(plain(doc, cat))


def test_a_spec_whose_mix_names_no_group_selects_nothing_by_the_budget_order(tmp_path):
    """default_weight 0 and no weight > 0: no group can be kept (a property test's example)."""
    cat = _catalog(tmp_path / "cat", days=1, per_day=500, salt="")
    doc = {**SPEC, "mix": {"by": "task", "weights": {}, "default_weight": 0}, "filters": []}
    doc |= {"budget": {"per_group_hours": {"fold_towel": 1.0}}, "split": {"val_fraction": 0.0, "salt": ""}}
    sel = select(spec_from_dict(doc), cat)
    assert sel.evaluated_by == "budget order" and sel.rows.height == 0 and sel.rows.equals(plain(doc, cat))
