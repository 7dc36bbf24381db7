"""A quarantine row is keyed by the item's landing id (never a path), and a later good ingest of the
same landing item replaces it: one row per episode, whether or not the recording names another id."""

from __future__ import annotations

import shutil

import polars as pl
from typer.testing import CliRunner

from robodata.cli import app
from robodata.ingest.steps.episode_metadata import landing_id
from robodata.ingest.synth import SynthConfig, synthesize

TINY = dict(duration_s=2.0, height=16, width=16, fps=10.0, state_hz=20.0, cameras=("cam_left",), format="mcap")


def _ingest(landing, state, batch: str) -> pl.DataFrame:
    res = CliRunner().invoke(app, ["ingest", str(landing), "--root", str(state), "--batch", batch])
    assert res.exit_code in (0, 1), res.output
    return pl.read_delta(str(state / "catalog" / "episodes"))


def test_landing_ids_are_names_never_paths():
    assert landing_id("/land/ep-7.mcap") == "ep-7"
    assert landing_id("s3://b/land/ds#12") == "ds-000012"
    assert landing_id("/land/demo.hdf5#data/demo_3") == "demo-demo_3"
    assert landing_id("/land/flight log.ulg") == "flight-log.ulg"  # not an importer's suffix: kept
    assert landing_id("/land/...").startswith("entry-")


def test_a_truncated_item_ingested_whole_later_replaces_its_quarantine_row(tmp_path):
    (src,) = synthesize(SynthConfig(episodes=1, seed=3, **TINY), tmp_path / "src")
    for name, batch in ((src.name, "b"), ("renamed-by-hand.mcap", "c")):  # id == stem, and id != stem
        land, state = tmp_path / f"land-{batch}", tmp_path / f"state-{batch}"
        land.mkdir()
        (land / name).write_bytes(src.read_bytes()[: src.stat().st_size // 2])  # cut mid-copy
        first = _ingest(land, state, f"{batch}1")
        (row,) = first.to_dicts()
        assert row["qc_status"] == "quarantined" and row["episode_id"] == landing_id(str(land / name))
        assert "/" not in row["episode_id"] and row["day"] == "unknown"
        shutil.rmtree(land)
        land.mkdir()
        shutil.copyfile(src, land / name)  # the whole recording, under the same name
        (row,) = _ingest(land, state, f"{batch}2").to_dicts()
        assert row["qc_status"] == "pass" and row["episode_id"] == src.stem and row["uri"]
