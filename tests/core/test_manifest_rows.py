"""A manifest row is not trusted (issue 44, items 5 and 6): invalid stream rates are refused by the
catalog and skipped (and counted) by the loader; a row pointed at another episode's container is
refused by the loader, the exports and the viewer; no row makes them send a request to an http://
server; a manifest with no row in the split read is a clear error."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from robodata.catalog.rows import CatalogError
from robodata.catalog.table import Catalog
from robodata.container import EpisodeReader
from robodata.curate.manifest import write_manifest
from robodata.curate.select import Selection
from robodata.dataset import DatasetConfig, PatternDataset
from robodata.dataset.pattern import preset_for
from robodata.errors import ConfigError, RobodataError
from robodata.export.run import export
from tests.core.helpers_container import write_small
from tests.core.helpers_dataset import manifest

BAD_RATES = ["{not json", "[30.0]", '{"wrist": "fast"}', '{"wrist": -1}', '{"wrist": NaN}', '{"wrist": true}']


@pytest.fixture(scope="module")
def episodes(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("rows")
    paths = [root / f"ep{i}.rdep" for i in range(3)]
    for i, p in enumerate(paths):
        write_small(p, duration_s=5.0, episode_id=f"ep{i}", h=24, w=32)
    return paths


def _table(paths: list[Path]) -> pa.Table:
    hints = [(EpisodeReader.open(p).footer_offset, EpisodeReader.open(p).footer_length) for p in paths]
    return manifest([str(p) for p in paths], [5.0] * len(paths), sizes=[p.stat().st_size for p in paths], footers=hints)


def _set(table: pa.Table, row: int, **values) -> pa.Table:
    """`table` with row `row`'s columns replaced (as a manifest's editor would)."""
    rows = table.to_pylist()
    rows[row].update(values)
    return pa.Table.from_pylist(rows, schema=table.schema)


def _write(table: pa.Table, folder: Path) -> Path:
    """The manifest file of `table`, content hash recomputed (the editor re-hashes it)."""
    return Path(write_manifest(Selection(pl.from_arrow(table), 1, "spec", {}), folder, "m").path)


def _view(*args: str):
    from typer.testing import CliRunner

    from robodata.cli import app

    return CliRunner().invoke(app, ["view", *args, "--quiet"])


# ----------------------------------------------------------------- item 5: stream rates
@pytest.mark.parametrize("raw", BAD_RATES)
def test_the_catalog_refuses_rates_that_do_not_parse(tmp_path: Path, raw: str):
    row = {"episode_id": "e1", "uri": "/x/e1.rdep", "qc_status": "pass", "start_time": datetime(2024, 1, 2, tzinfo=UTC)}
    cat = Catalog(str(tmp_path / "cat"))
    cat.merge([{**row, "episode_id": "ok", "stream_rates_json": '{"wrist": 30.0, "events": 0}'}])
    with pytest.raises(CatalogError, match=r"'e1'.*stream_rates_json"):
        cat.merge([{**row, "stream_rates_json": raw}])


def test_a_row_whose_rates_do_not_parse_is_skipped_and_counted(episodes, tmp_path: Path):
    path = _write(_set(_table(episodes), 1, stream_rates_json="{not json"), tmp_path)
    with pytest.warns(UserWarning, match="stream_rates_json"):
        ds = PatternDataset.from_manifest(path, "wam")
    assert list(ds.index.unusable.values()) == [1] and "stream_rates_json" in next(iter(ds.index.unusable))
    assert ds.index.counts[1] == 0 and ds.index.counts[0] > 0 and ds.index.counts[2] > 0
    batch = ds.batch([ds.index.locate(i) for i in range(len(ds))])
    rows = {int(i) for i in batch["episode_index"]}
    assert rows == {0, 2}
    out = _view(str(path), "--sample", "0", "--save", str(tmp_path / "s.rrd"))
    assert out.exit_code == 0, out.output


def test_a_manifest_whose_every_row_has_bad_rates_is_a_config_error(episodes, tmp_path: Path):
    table = _table(episodes[:1])
    path = _write(_set(table, 0, stream_rates_json="[1, 2]"), tmp_path)
    with pytest.raises(ConfigError, match="stream_rates_json"):
        PatternDataset.from_manifest(path, "wam")
    out = _view(str(path), "--sample", "0", "--save", str(tmp_path / "s.rrd"))
    assert out.exit_code == 2 and "error: ConfigError" in out.output, out.output


# ----------------------------------------------------------------- item 6: a row's uri
def _swapped(episodes: list[Path]) -> pa.Table:
    """Row 0 (ep0) with ep1's uri, size and footer hints."""
    table = _table(episodes)
    b = table.slice(1, 1).to_pylist()[0]
    return _set(table, 0, **{k: b[k] for k in ("uri", "size_bytes", "footer_offset", "footer_length")})


def test_the_loader_skips_a_row_pointed_at_another_episode(episodes, tmp_path: Path):
    table = _swapped(episodes)
    ds = PatternDataset(table, preset_for(table, "wam"))
    with pytest.warns(UserWarning, match="holds episode 'ep1'"):
        batch = ds.batch([ds.index.locate(i) for i in range(len(ds))])
    assert 0 not in {int(i) for i in batch["episode_index"]}  # nothing of ep1 served as ep0
    assert list(ds.skipped.rows) == [0] and "holds episode 'ep1'" in ds.skipped.rows[0]


def test_export_and_view_refuse_a_row_pointed_at_another_episode(episodes, tmp_path: Path):
    path = _write(_swapped(episodes), tmp_path)
    for fmt in ("lerobot", "mcap"):
        with pytest.raises(RobodataError, match="holds episode 'ep1'"):
            export(path, tmp_path / fmt, fmt)
        assert not (tmp_path / fmt).exists() or not any((tmp_path / fmt).iterdir())
    out = _view(str(path), "--index", "0", "--save", str(tmp_path / "v.rrd"))
    assert out.exit_code == 2 and "holds episode 'ep1'" in out.output, out.output


class _Counting(http.server.SimpleHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        self.hits.append(self.path)
        super().do_GET()

    def do_HEAD(self):  # noqa: N802
        self.hits.append(self.path)
        super().do_HEAD()

    def log_message(self, *args):
        pass


@pytest.fixture
def http_server(episodes) -> Iterator[tuple[str, list[str]]]:
    handler = type("H", (_Counting,), {"hits": []})
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), lambda *a: handler(*a, directory=str(episodes[0].parent))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.hits
    finally:
        server.shutdown()
        server.server_close()


def test_no_request_to_an_http_uri_from_the_loader_export_or_viewer(episodes, tmp_path: Path, http_server):
    base, hits = http_server
    table = _set(_table(episodes), 0, uri=f"{base}/{episodes[0].name}")
    path = _write(table, tmp_path)
    ds = PatternDataset.from_manifest(path, "wam")
    with pytest.warns(UserWarning, match="scheme 'http' is refused"):
        ds.batch([ds.index.locate(i) for i in range(0, len(ds), 5)])
    assert 0 in ds.skipped.rows
    for fmt in ("lerobot", "mcap"):
        with pytest.raises(RobodataError, match="scheme 'http' is refused"):
            export(path, tmp_path / fmt, fmt)
    out = _view(str(path), "--index", "0", "--save", str(tmp_path / "v.rrd"))
    assert out.exit_code == 2 and "scheme 'http' is refused" in out.output, out.output
    with pytest.raises(CatalogError, match="scheme 'http' is refused"):
        Catalog(str(tmp_path / "cat")).merge([{"episode_id": "e", "uri": f"{base}/x", "qc_status": "quarantined"}])
    assert hits == []


def test_a_manifest_with_no_row_in_the_split_is_a_clear_error(episodes, tmp_path: Path):
    table = _table(episodes)
    table = table.set_column(table.schema.get_field_index("split"), "split", pa.array(["val", "val", "test"]))
    path = _write(table, tmp_path)
    with pytest.raises(ConfigError, match=r"none of the manifest's 3 rows is in split 'train'.*'val': 2"):
        PatternDataset.from_manifest(path, "wam")
    assert len(PatternDataset.from_manifest(path, "wam", config=DatasetConfig(split="val"))) > 0
    out = _view(str(path), "--sample", "0", "--save", str(tmp_path / "s.rrd"))
    assert out.exit_code == 2 and "none of the manifest's 3 rows" in out.output, out.output
