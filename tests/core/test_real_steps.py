"""Issue 36: the real step-array fixtures (diffusion_policy's PushT Zarr, octo's RLDS debug set) read
exactly, checked against zarr and a protobuf wire-format reader (bench.realdata_fixtures); their
variations (pixel-space state, float pixels, (N, 9, 2) keypoints, is_last never set, no control
rate) become findings, not quarantines; a camera-less episode goes through every stage."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from deltalake import DeltaTable

from bench.realdata_fixtures import REAL, read_rlds, read_zarr_pusht, rlds_key
from robodata.ingest.align import aligned_tracks
from robodata.ingest.importers import open_raw
from robodata.ingest.qc import ALL_CHECKS, QCThresholds, evaluate_pre
from robodata.ingest.raw import RawEpisodeError

PUSHT = REAL / "zarr_pusht_dp" / "pusht_cchi_v7_replay.zarr"
BRIDGE = REAL / "rlds_octo_bridge_debug" / "bridge_dataset"
SHARD = "1.0.0/bridge_dataset-train.tfrecord-00000-of-00001"


def _failed(raw) -> dict[str, str]:
    outcomes = evaluate_pre(aligned_tracks(raw), "", ALL_CHECKS, QCThresholds())
    return {o.check: o.reason for o in outcomes if not o.passed}


def test_pusht_pixel_state_float_pixels_and_keypoints_are_read_exactly():
    want = read_zarr_pusht(PUSHT)["1"]
    raw = open_raw(f"{PUSHT}#1", "zarr")
    np.testing.assert_array_equal(raw.arrays["joint_pos"].values, want.state)  # pixels, not radians
    np.testing.assert_array_equal(raw.arrays["cmd"].values, want.action)
    np.testing.assert_array_equal(raw.arrays["keypoint"].values, want.extra["keypoint"])  # (N, 9, 2) flattened
    import zarr

    pixels = np.asarray(zarr.open_group(str(PUSHT), mode="r")["data/img"][161:279])
    got = np.stack([img for cam, _, img in raw.frames() if cam == "img"])
    np.testing.assert_array_equal(got, pixels.astype(np.uint8))  # float 0..255 pixels, taken exactly
    failed = _failed(raw)
    assert set(failed) == {"units_declared"} and "joint_pos: units not declared" in failed["units_declared"]


def test_rlds_without_is_last_is_framed_by_is_first_and_the_record_with_findings():
    eps = read_rlds(BRIDGE)
    raw = open_raw(f"{BRIDGE}#{SHARD}:3:420549", "rlds")
    want = eps[rlds_key(f"{SHARD}:3:420549")]
    np.testing.assert_array_equal(raw.arrays["joint_pos"].values, want.state)
    np.testing.assert_array_equal(raw.arrays["cmd"].values, want.action)
    assert {c: len(t.t_ns) for c, t in raw.cameras.items()} == want.frames
    assert raw.rate_unknown and raw.language == "turn lever vertical to front"
    failed = _failed(raw)
    assert {"episode_framed", "rate_declared"} <= set(failed)
    assert "steps/is_last is set at no step" in failed["episode_framed"]
    assert "no control rate declared" in failed["rate_declared"]


def test_rlds_is_last_set_mid_record_is_refused_naming_the_flag(tmp_path):
    from tests.core.helpers_semantics import rlds_framing

    d = tmp_path / "bridge"
    shutil.copytree(BRIDGE, d)
    rlds_framing(d, "steps/is_last", 4)  # the shard rewritten: its first episode, is_last at step 4 only
    with pytest.raises(RawEpisodeError, match=r"steps/is_last is set at steps \[4\] of 10"):
        open_raw(f"{d}#{SHARD}:0:0", "rlds")


def _ingest(land: Path, root: Path, **settings):
    from robodata.ingest.landing.batch import write_manifest
    from robodata.ingest.landing.scan import LandingCursor, new_items
    from robodata.ingest.pipeline import run_batch
    from robodata.ingest.settings import IngestSettings
    from robodata.ingest.tables import IngestPaths

    s = IngestSettings(root=str(root), **settings)
    write_manifest(IngestPaths(s.root), "b", new_items(str(land), LandingCursor()))
    out = run_batch("b", s, derived=False)
    return out, DeltaTable(IngestPaths(s.root).catalog).to_pyarrow_table().to_pylist()


@pytest.fixture(scope="module")
def state_only(tmp_path_factory):
    """PushT's real low-dimensional streams without its camera: a camera-less recording, ingested."""
    base = tmp_path_factory.mktemp("state_only")
    store = base / "landing" / "pusht_lowdim.zarr"
    shutil.copytree(PUSHT, store)
    shutil.rmtree(store / "data" / "img")
    out, rows = _ingest(base / "landing", base / "state")
    return base, store, out, rows


def test_a_camera_less_episode_converts_into_a_container_without_a_camera_group(state_only):
    from robodata.container import EpisodeReader

    _, store, out, rows = state_only
    assert out["episodes"]["converted"] == 3 and out["episodes"]["failed"] == 0
    for r in rows:
        assert r["qc_status"] == "pass" and r["cameras"] == [] and r["qc_failed"] == ["units_declared"]
        assert r["control_hz"] == 10.0 and r["state_dim"] == 5 and r["action_dim"] == 2
        reader = EpisodeReader.open(r["uri"])
        assert [g.name for g in reader.layout.groups] == ["proprio"]
        assert reader.meta.extra["roles"] == {"state": "joint_pos", "action": "cmd"}


def test_a_camera_less_episode_exports_loads_views_and_gets_a_pattern(state_only, tmp_path):
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from robodata.container import EpisodeReader
    from robodata.curate.run import curate
    from robodata.curate.spec import spec_from_dict
    from robodata.dataset import PatternDataset
    from robodata.export.lerobot import export_lerobot
    from robodata.layout.inputs import resolve_pattern

    base, store, _, rows = state_only
    want = read_zarr_pusht(store)
    ordered = sorted(rows, key=lambda r: r["episode_id"])  # pusht_lowdim-000000 .. 000002
    export_lerobot(ordered, tmp_path / "lr")
    data = pq.read_table(tmp_path / "lr" / "data" / "chunk-000" / "file-000.parquet")
    for i in range(3):
        sel = data.filter(pc.equal(data["episode_index"], i))
        assert sel.num_rows == len(want[str(i)].state)  # one row per state step
        np.testing.assert_array_equal(np.array(sel["observation.state"].to_pylist(), np.float32), want[str(i)].state)
        np.testing.assert_array_equal(np.array(sel["action"].to_pylist(), np.float32), want[str(i)].action)
    spec = spec_from_dict(
        {"version": 1, "name": "lowdim", "split": {"val_fraction": 0.0}, "allow_failed_checks": ["*"]}
    )
    info, _ = curate(spec, str(base / "state" / "catalog" / "episodes"), tmp_path / "m")
    ds = PatternDataset.from_manifest(info.path, "vla")
    assert [w.name for w in ds.pattern.windows] == ["state", "action"] and len(ds) > 0
    item = ds[0]
    assert tuple(item["joint_pos"].shape)[-1] == 5 and tuple(item["cmd"].shape)[-1] == 2
    meta = EpisodeReader.open(rows[0]["uri"]).meta
    assert [w.name for w in resolve_pattern("wam", meta).windows] == ["state", "action"]
    import rerun as rr

    from robodata.viz.record import log_episode

    rec = rr.RecordingStream("robodata-test", recording_id="lowdim")
    rec.save(str(tmp_path / "v.rrd"))
    stats = log_episode(EpisodeReader.open(rows[0]["uri"]), rec)
    rec.flush()
    assert not stats.frames and (tmp_path / "v.rrd").stat().st_size > 0


def test_advise_from_a_camera_less_source(state_only, tmp_path):
    """`robodata advise --source` over camera-less recordings plans their array groups (it refused:
    first the `cameras` group without streams, then a calibration without a camera)."""
    from typer.testing import CliRunner

    from robodata.cli import app
    from robodata.layout.plan import LayoutPlan

    base, *_ = state_only
    out = tmp_path / "plan.json"
    args = ["advise", "vla", "--source", str(base / "landing"), "--quick", "-q", "--sample", "1", "--out", str(out)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    groups = LayoutPlan.load(str(out)).layout.groups
    assert groups and all(g.video is None for g in groups) and "joint_pos" in {s for g in groups for s in g.streams}
