"""Issue 24: errors a user can provoke from the CLI are one line naming the file, never a traceback,
and never create state where none was."""

import json
from datetime import UTC, datetime

from typer.testing import CliRunner

from robodata.catalog.table import Catalog
from robodata.cli import app
from robodata.ingest.tables import IngestPaths

runner = CliRunner()


def test_inspect_a_missing_file(tmp_path):
    r = runner.invoke(app, ["inspect", str(tmp_path / "nope.rdep")])
    assert r.exit_code == 2 and "nope.rdep" in r.output and "Traceback" not in r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)


def test_cache_stats_on_a_missing_path_creates_nothing(tmp_path):
    r = runner.invoke(app, ["cache-stats", str(tmp_path / "nocache")])
    assert r.exit_code == 2 and "no page cache" in r.output
    assert not (tmp_path / "nocache").exists()


def test_curate_finds_the_catalog_under_the_storage_root_and_warns_on_an_empty_selection(tmp_path, monkeypatch):
    root = tmp_path / "root"
    Catalog(IngestPaths(str(root)).catalog).merge(
        [
            {
                "episode_id": "e0",
                "uri": "/x/e0.rdep",
                "start_time": datetime(2024, 1, 1, tzinfo=UTC),
                "qc_status": "pass",
                "task": "t",
                "duration_s": 1.0,
            }
        ]  # fmt: skip
    )
    spec = tmp_path / "spec.yaml"
    spec.write_text("version: 1\nname: none\nfilters: [{column: task, op: '==', value: other}]\n")
    monkeypatch.delenv("ROBODATA_CATALOG", raising=False)
    monkeypatch.setenv("ROBODATA_STORAGE_ROOT", str(root))
    r = runner.invoke(app, ["curate", str(spec), "--out", str(tmp_path / "m"), "--json"])
    assert r.exit_code == 0, r.output
    assert "no episodes" in " ".join(r.output.split())
    assert json.loads(r.output.strip().splitlines()[-1])["episodes"] == 0
