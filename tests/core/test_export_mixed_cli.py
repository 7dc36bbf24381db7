"""Issue 37: `robodata export --format lerobot` of a manifest mixing corpora writes one LeRobot
dataset per robot type, each with its true robot_type, or refuses naming the conflict."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from bench.mixing_data import build
from robodata.catalog.table import Catalog
from robodata.cli import app
from robodata.curate.manifest import read_manifest
from robodata.curate.run import curate
from robodata.curate.spec import spec_from_dict


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mixexport")
    rows = build(tmp / "eps", 1, 2.0, corpora=(1, 2, 3))  # bridge (widowx), pusht, go2
    cat = Catalog(str(tmp / "cat"))
    cat.backfill(rows)
    spec = spec_from_dict({"version": 1, "name": "mixexport", "split": {"val_fraction": 0}})
    info, _ = curate(spec, cat, tmp / "m")
    return info.path


def test_a_mixed_manifest_exports_one_lerobot_dataset_per_robot_type(mixed, tmp_path):
    res = CliRunner().invoke(app, ["export", "--format", "lerobot", str(mixed), str(tmp_path / "o"), "-q"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert sorted(summary["parts"]) == ["go2", "pusht", "widowx"] and summary["episodes"] == 3
    for robot_type, part in summary["parts"].items():
        info = json.loads((tmp_path / "o" / robot_type / "meta" / "info.json").read_text())
        assert info["robot_type"] == part["robot_type"] == robot_type and info["total_episodes"] == 1
    widowx = json.loads((tmp_path / "o" / "widowx" / "meta" / "info.json").read_text())
    assert "observation.images.image_0" in widowx["features"]  # its own camera name, nothing renamed


def test_a_part_whose_episodes_conflict_is_refused_by_name_the_others_written(mixed, tmp_path, monkeypatch):
    from robodata.export import run

    table = read_manifest(mixed)
    cols = table.select(["source_dataset", "robot_type"]).to_pydict().values()
    robot = ["same" if s in ("bridge", "pusht") else r for s, r in zip(*cols, strict=True)]
    clash = tmp_path / "clash.parquet"  # two corpora under one robot type: their cameras and widths differ
    pq.write_table(table.set_column(table.column_names.index("robot_type"), "robot_type", pa.array(robot)), clash)
    monkeypatch.setattr(run, "read_manifest", pq.read_table)  # altered rows: no longer their content hash
    res = CliRunner().invoke(app, ["export", "--format", "lerobot", str(clash), str(tmp_path / "o"), "-q"])
    assert res.exit_code == 2
    assert "refused part 'same'" in res.output and "episode" in res.output and "written: go2" in res.output
    assert (tmp_path / "o" / "go2" / "meta" / "info.json").exists()
    assert not (tmp_path / "o" / "same" / "meta" / "info.json").exists()
