"""`robodata catalog optimize`: compacts days, keeps every row, and clusters so row-group statistics skip."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from robodata.catalog import headpack, rowpack, sidecar, synthetic
from robodata.catalog.maintenance import OptimizeConfig, optimize
from robodata.catalog.table import Catalog
from robodata.cli import app
from robodata.errors import ConfigError

SHAPE = synthetic.FleetShape(rows_per_day=4000, batch_size=1000)


def _day_files(cat: Catalog, day: str) -> list[str]:
    actions = cat.table().get_add_actions(flatten=True)
    paths, days = actions.column("path").to_pylist(), actions.column("partition.day").to_pylist()
    return [f"{cat.uri}/{p}" for p, d in zip(paths, days, strict=True) if d == day]


def _row_groups_admitting(cat: Catalog, day: str, column: str, value: str) -> tuple[int, int]:
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


def test_optimize_compacts_a_day_keeps_rows_and_lets_row_groups_be_skipped(tmp_path):
    cat = Catalog(str(tmp_path / "cat"))
    for start in range(0, 8000, 1000):  # 4 files a day
        cat.merge(synthetic.rows(SHAPE, start, 1000))
    before = pl.read_delta(cat.uri).sort("episode_id")
    admit, total = _row_groups_admitting(cat, "2024-01-01", "task", "fold_towel")
    assert admit == total == 4  # arrival order: every row group spans every task

    args = ["--day", "2024-01-01", "--row-group-rows", "1024", "--split-salt", "s1"]
    out = CliRunner().invoke(app, ["catalog", "optimize", "--catalog", cat.uri, *args])
    assert out.exit_code == 0, out.output
    (car,) = (Path(cat.uri) / sidecar.SIDECAR_DIR).glob("day%3D2024-01-01*" + sidecar.SUFFIX)
    f = rowpack.RowFile(car, 4000)
    assert f.order_salt == "s1/budget"  # its rows in the budget order of specs with split salt s1
    f.close()
    (head,) = (Path(cat.uri) / sidecar.SIDECAR_DIR).glob("day%3D2024-01-01*" + sidecar.HEAD_SUFFIX)
    h = headpack.HeadFile(head, 4000)
    assert h.order_salt == "s1/budget"  # and its head, in the same order
    h.close()
    metrics = json.loads(out.stdout.strip().splitlines()[-1])
    assert metrics["numFilesRemoved"] == 4 and metrics["numFilesAdded"] == 1 and metrics["rows"] == 4000
    assert len(_day_files(cat, "2024-01-01")) == 1
    assert len(_day_files(cat, "2024-01-02")) == 4  # other days untouched
    assert pl.read_delta(cat.uri).sort("episode_id").equals(before)
    admit, total = _row_groups_admitting(cat, "2024-01-01", "task", "fold_towel")
    assert total == 4 and admit < total  # a spec for one task skips row groups of the day


def test_optimize_writes_one_row_group_a_day_unless_told_otherwise(tmp_path):
    cat = Catalog(str(tmp_path / "cat"))
    for start in range(0, 8000, 1000):
        cat.merge(synthetic.rows(SHAPE, start, 1000))
    out = CliRunner().invoke(app, ["catalog", "optimize", "--catalog", cat.uri, "--no-sidecars"])
    assert out.exit_code == 0, out.output
    assert [_row_groups_admitting(cat, day, "task", "fold_towel")[1] for day in ("2024-01-01", "2024-01-02")] == [1, 1]
    args = ["--day", "2024-01-02", "--row-group-rows", "1024", "--compression", "ZSTD", "--no-sidecars"]
    out = CliRunner().invoke(app, ["catalog", "optimize", "--catalog", cat.uri, *args])
    assert out.exit_code == 0, out.output
    assert _row_groups_admitting(cat, "2024-01-02", "task", "fold_towel")[1] == 4
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
    with pytest.raises(ConfigError, match="target_size_bytes"):  # Catalog.optimize's override is checked too
        Catalog(str(tmp_path / "unused")).optimize(target_size=1000, split_salt="s")
    with pytest.raises(ConfigError, match="compression must be one of"):
        OptimizeConfig(compression="GZIP")
    out = CliRunner().invoke(app, ["catalog", "optimize", "--catalog", str(tmp_path / "none")])
    assert out.exit_code == 2 and "no catalog table" in out.output
    out = CliRunner().invoke(app, ["catalog", "optimize", "--catalog", str(tmp_path / "none"), "--compression", "x"])
    assert out.exit_code == 2 and "compression must be one of" in out.output
    cat = Catalog(str(tmp_path / "cat"))
    cat.merge(synthetic.rows(SHAPE, 0, 10))
    assert optimize(cat)["version"] == cat.version()
