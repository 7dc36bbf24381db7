"""Issue 36: a camera-less (state-only) recording goes through every stage: it converts into a
container holding only its array groups, exports, loads, is viewed and gets a read pattern, and
`robodata advise --source` plans it. Run on a synthetic Zarr replay buffer with its camera arrays
removed (always) and on diffusion_policy's real PushT buffer without its `img` (where its data is
here: tests/data/real/zarr_pusht_dp/SOURCE.md); values checked against zarr, never robodata."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from deltalake import DeltaTable

from bench.realdata_fixtures import MISSING, REAL, present

PUSHT = "zarr_pusht_dp/pusht_cchi_v7_replay.zarr"


def _ingest(land: Path, root: Path):
    from robodata.ingest.landing.batch import write_manifest
    from robodata.ingest.landing.scan import LandingCursor, new_items
    from robodata.ingest.pipeline import run_batch
    from robodata.ingest.settings import IngestSettings
    from robodata.ingest.tables import IngestPaths

    paths = IngestPaths(str(root))
    s = IngestSettings()
    write_manifest(paths, "b", new_items(str(land), LandingCursor()))
    out = run_batch(paths, "b", s, derived=False)
    return out, DeltaTable(paths.catalog).to_pyarrow_table().to_pylist()


def _source(store: Path) -> tuple[list[tuple[np.ndarray, np.ndarray]], float | None]:
    """Each episode's (state, action) and the declared rate, read with zarr."""
    import zarr

    g = zarr.open_group(str(store), mode="r")
    ends = [int(e) for e in g["meta/episode_ends"][:]]
    state, action = np.asarray(g["data/state"][:], np.float32), np.asarray(g["data/action"][:], np.float32)
    cuts = list(zip([0, *ends[:-1]], ends, strict=True))
    return [(state[lo:hi], action[lo:hi]) for lo, hi in cuts], g.attrs.get("fps")


@pytest.fixture(scope="module", params=["synthetic", "pusht"])
def state_only(request, tmp_path_factory):
    """A camera-less Zarr replay buffer, ingested: (base, store, run output, catalog rows)."""
    base = tmp_path_factory.mktemp(f"state_only_{request.param}")
    store = base / "landing" / "lowdim.zarr"
    if request.param == "pusht":
        if not present(PUSHT):
            pytest.skip(MISSING)
        shutil.copytree(REAL / PUSHT, store)
    else:
        from robodata.ingest.synth import SynthConfig, synthesize

        cfg = SynthConfig(episodes=3, duration_s=2.0, cameras=("cam_high",), height=48, width=64, format="zarr")
        shutil.copytree(synthesize(cfg, base / "synth")[0], store)
    import zarr

    for name, arr in zarr.open_group(str(store / "data"), mode="r").arrays():
        if arr.ndim == 4:  # (N, H, W, C): a camera, removed
            shutil.rmtree(store / "data" / name)
    out, rows = _ingest(base / "landing", base / "state")
    return base, store, out, rows


def test_a_camera_less_episode_converts_into_a_container_without_a_camera_group(state_only):
    from robodata.container import EpisodeReader

    _, store, out, rows = state_only
    eps, fps = _source(store)
    assert out["episodes"]["converted"] == len(eps) == len(rows) and out["episodes"]["failed"] == 0
    for r in rows:
        assert r["qc_status"] == "pass" and r["cameras"] == [] and r["qc_failed"] == ["units_declared"]
        assert r["control_hz"] == (fps or 10.0)  # PushT declares none: the diffusion_policy key map's 10 Hz
        assert (r["state_dim"], r["action_dim"]) == (eps[0][0].shape[1], eps[0][1].shape[1])
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
    eps, _ = _source(store)
    ordered = sorted(rows, key=lambda r: r["episode_id"])  # lowdim-000000, -000001, ...
    export_lerobot(ordered, tmp_path / "lr")
    data = pq.read_table(tmp_path / "lr" / "data" / "chunk-000" / "file-000.parquet")
    for i, (state, action) in enumerate(eps):
        sel = data.filter(pc.equal(data["episode_index"], i))
        assert sel.num_rows == len(state)  # one row per state step
        np.testing.assert_array_equal(np.array(sel["observation.state"].to_pylist(), np.float32), state)
        np.testing.assert_array_equal(np.array(sel["action"].to_pylist(), np.float32), action)
    spec = spec_from_dict(
        {"version": 1, "name": "lowdim", "split": {"val_fraction": 0.0}, "allow_failed_checks": ["*"]}
    )
    info, _ = curate(spec, str(base / "state" / "catalog" / "episodes"), tmp_path / "m")
    ds = PatternDataset.from_manifest(info.path, "vla")
    assert [w.name for w in ds.pattern.windows] == ["state", "action"] and len(ds) > 0
    item = ds[0]
    assert (
        tuple(item["joint_pos"].shape)[-1] == eps[0][0].shape[1] and tuple(item["cmd"].shape)[-1] == eps[0][1].shape[1]
    )
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
    from robodata.container.plan import LayoutPlan

    base, *_ = state_only
    out = tmp_path / "plan.json"
    args = ["advise", "vla", "--source", str(base / "landing"), "--quick", "-q", "--sample", "1", "--out", str(out)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    groups = LayoutPlan.load(str(out)).layout.groups
    assert groups and all(g.video is None for g in groups) and "joint_pos" in {s for g in groups for s in g.streams}
