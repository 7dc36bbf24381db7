"""`robodata catalog optimize`: compacts days, keeps every row, and sorts them by budget_hash so row-group
statistics skip all but a prefix of the budget order."""

from __future__ import annotations

import json

import polars as pl
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from robodata.catalog import order
from robodata.catalog.maintenance import OptimizeConfig, optimize
from robodata.catalog.table import Catalog
from robodata.cli import app
from robodata.errors import ConfigError
from robodata_testing import synthetic_catalog as synthetic

SHAPE = synthetic.FleetShape(rows_per_day=4000, batch_size=1000)


def _day_files(cat: Catalog, day: str) -> list[str]:
    actions = cat.table().get_add_actions(flatten=True)
    paths, days = actions.column("path").to_pylist(), actions.column("partition.day").to_pylist()
    return [f"{cat.uri}/{p}" for p, d in zip(paths, days, strict=True) if d == day]


def _row_groups_admitting(cat: Catalog, day: str, column: str, value: str | int) -> tuple[int, int]:
    """(row groups of `day` whose min/max of `column` admit `value`, all row groups of `day`)."""
    admit = total = 0
    for uri in _day_files(cat, day):
        meta = pq.ParquetFile(uri).metadata
        at = meta.schema.to_arrow_schema().get_field_index(column)
        for i in range(meta.num_row_groups):
            stats = meta.row_group(i).column(at).statistics
            total += 1
            admit += int(stats.min <= value <= stats.max)
    return admit, total


def _under(cat: Catalog, day: str, fraction: float) -> tuple[int, int]:
    """(row groups of `day` whose min budget_hash lies under `fraction` of its range, all of them)."""
    top = int(-(2**63) + fraction * 2**64)
    admit = total = 0
    for uri in _day_files(cat, day):
        meta = pq.ParquetFile(uri).metadata
        at = meta.schema.to_arrow_schema().get_field_index(order.COLUMN)
        for i in range(meta.num_row_groups):
            total += 1
            admit += int(meta.row_group(i).column(at).statistics.min <= top)
    return admit, total


def test_optimize_compacts_a_day_keeps_rows_and_orders_it_by_budget_hash(tmp_path):
    cat = Catalog(str(tmp_path / "cat"))
    for start in range(0, 8000, 1000):  # 4 files a day
        cat.merge(synthetic.rows(SHAPE, start, 1000))
    before = pl.read_delta(cat.uri).sort("episode_id")
    assert _under(cat, "2024-01-01", 0.1) == (4, 4)  # arrival order: every file spans the hash range

    args = ["--day", "2024-01-01", "--row-group-rows", "512", "--split-salt", "s1"]
    out = CliRunner().invoke(app, ["catalog", "optimize", "--catalog", cat.uri, *args])
    assert out.exit_code == 0, out.output
    metrics = json.loads(out.stdout.strip().splitlines()[-1])
    assert metrics["splitSalt"] == "s1" and metrics["days"] == 2  # a new salt: every day rewritten
    assert metrics["numFilesRemoved"] == 8 and metrics["numFilesAdded"] == 2 and metrics["rows"] == 8000
    assert len(_day_files(cat, "2024-01-01")) == len(_day_files(cat, "2024-01-02")) == 1
    after = pl.read_delta(cat.uri).sort("episode_id")
    assert after.drop("budget_hash").equals(before.drop("budget_hash"))
    hashes = order.stable_hash64(after["episode_id"], "s1/budget")
    assert (order.unsigned(after["budget_hash"].to_numpy()) == hashes).all()  # the job's salt
    assert _under(cat, "2024-01-01", 0.1) == (1, 8)  # a tenth of the hash range: the first row group
    assert _row_groups_admitting(cat, "2024-01-01", "task", "fold_towel") == (8, 8)  # tasks: all mixed
    out = CliRunner().invoke(app, ["catalog", "optimize", "--catalog", cat.uri, "--day", "2024-01-02"])
    assert json.loads(out.stdout.strip().splitlines()[-1])["days"] == 1  # the salt kept: that day only


def test_optimize_writes_row_groups_of_2ki_rows_unless_told_otherwise(tmp_path):
    cat = Catalog(str(tmp_path / "cat"))
    for start in range(0, 16000, 4000):
        cat.merge(synthetic.rows(synthetic.FleetShape(rows_per_day=8000), start, 4000))
    out = CliRunner().invoke(app, ["catalog", "optimize", "--catalog", cat.uri])
    assert out.exit_code == 0, out.output
    assert [_under(cat, day, 1.0)[1] for day in ("2024-01-01", "2024-01-02")] == [4, 4]
    args = ["--day", "2024-01-02", "--row-group-rows", "4096", "--compression", "ZSTD"]
    out = CliRunner().invoke(app, ["catalog", "optimize", "--catalog", cat.uri, *args])
    assert out.exit_code == 0, out.output
    assert _under(cat, "2024-01-02", 1.0)[1] == 2
    (uri,) = _day_files(cat, "2024-01-02")
    assert pq.ParquetFile(uri).metadata.row_group(0).column(0).compression == "ZSTD"  # the other options kept
    out = CliRunner().invoke(app, ["catalog", "optimize", "--catalog", cat.uri, "--row-group-rows", "10"])
    assert out.exit_code == 2 and "row_group_rows" in out.output


def test_optimize_config_is_checked_and_errors_are_clear(tmp_path):
    with pytest.raises(ConfigError, match="not a catalog column"):
        OptimizeConfig(cluster_by=["nope"])
    with pytest.raises(ConfigError, match="partition column"):
        OptimizeConfig(cluster_by=["day"])
    with pytest.raises(ConfigError, match="list column"):
        OptimizeConfig(cluster_by=["cameras"])
    with pytest.raises(ConfigError, match="target_size_bytes"):
        OptimizeConfig(target_size_bytes=1000, split_salt="s")
    with pytest.raises(ConfigError, match="compression must be one of"):
        OptimizeConfig(compression="GZIP")
    out = CliRunner().invoke(app, ["catalog", "optimize", "--catalog", str(tmp_path / "none")])
    assert out.exit_code == 2 and "no catalog table" in out.output
    out = CliRunner().invoke(app, ["catalog", "optimize", "--catalog", str(tmp_path / "none"), "--compression", "x"])
    assert out.exit_code == 2 and "compression must be one of" in out.output
    cat = Catalog(str(tmp_path / "cat"))
    cat.merge(synthetic.rows(SHAPE, 0, 10))
    assert optimize(cat)["version"] == cat.version()
