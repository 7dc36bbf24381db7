"""Issue 36: a real SO-101 LeRobot v3.0 dataset (tests/data/real/lerobot_v30_so101_record/SOURCE.md):
positions in the servo's ±100 units are not range-checked as radians, values and the export are
checked against pyarrow, and the videos the snapshot lacks are named in the quarantine reason."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from bench.realdata_fixtures import MISSING, REAL, present
from robodata.container import EpisodeReader
from robodata.errors import RobodataError
from robodata.ingest.align import aligned_tracks
from robodata.ingest.convert import convert
from robodata.ingest.importers import open_raw
from robodata.ingest.qc import PRE_CHECKS, QCSelection, QCThresholds

SO101 = REAL / "lerobot_v30_so101_record"
pytestmark = pytest.mark.skipif(not present("lerobot_v30_so101_record/meta/info.json"), reason=MISSING)


def _rows(episode: int) -> tuple[np.ndarray, np.ndarray]:
    """(state, action) of one episode, read with pyarrow from the dataset's data file."""
    t = pq.read_table(SO101 / "data" / "chunk-000" / "file-000.parquet")
    t = t.filter(np.asarray(t["episode_index"]) == episode)
    state = np.stack(t["observation.state"].to_numpy(zero_copy_only=False)).astype(np.float32)
    action = np.stack(t["action"].to_numpy(zero_copy_only=False)).astype(np.float32)
    return state, action


def _without_cameras(tmp_path: Path) -> Path:
    """A copy whose info.json lists no video feature (the snapshot has none): rows untouched."""
    root = tmp_path / "so101"
    shutil.copytree(SO101, root)
    info = json.loads((root / "meta" / "info.json").read_text())
    info["features"] = {k: v for k, v in info["features"].items() if v.get("dtype") != "video"}
    (root / "meta" / "info.json").write_text(json.dumps(info))
    return root


def test_as_fetched_each_episode_names_its_missing_video():
    with pytest.raises(RobodataError, match=r"observation\.images\.front.*missing.*video_path"):
        open_raw(f"{SO101}#2", "lerobot-v3.0")


def test_positions_in_servo_units_pass_with_a_units_finding(tmp_path):
    root = _without_cameras(tmp_path)
    state, action = _rows(1)
    raw = open_raw(f"{root}#1", "lerobot-v3.0")
    assert raw.robot_type == "so101_follower" and raw.roles == {"state": "joint_pos", "action": "cmd"}
    np.testing.assert_array_equal(raw.arrays["joint_pos"].values, state)
    np.testing.assert_array_equal(raw.arrays["cmd"].values, action)
    assert raw.arrays["joint_pos"].units == "" and np.abs(state).max() > 2 * np.pi  # ±100 units, not radians
    al = aligned_tracks(raw)
    ok, why = PRE_CHECKS["joints_in_range"](al, QCThresholds())
    assert ok, why  # the radians bound is not applied to undeclared units
    ok, why = PRE_CHECKS["units_declared"](al, QCThresholds())
    assert not ok and "joint_pos: units not declared" in why
    assert "units_declared" not in QCSelection().blocking and "joints_in_range" in QCSelection().blocking


def test_export_of_the_state_only_episode_is_the_recorded_rows(tmp_path):
    from robodata.export.lerobot import export_lerobot

    root = _without_cameras(tmp_path)
    state, action = _rows(3)
    raw = open_raw(f"{root}#3", "lerobot-v3.0")
    res = convert(raw, aligned_tracks(raw), tmp_path / "e.rdep")
    r = EpisodeReader.open(res.uri)
    row = {
        "episode_id": r.meta.episode_id,
        "uri": res.uri,
        "footer_offset": r.footer_offset,
        "footer_length": r.footer_length,
    }
    out = tmp_path / "lr"
    export_lerobot([row], out)
    data = pq.read_table(out / "data" / "chunk-000" / "file-000.parquet")
    assert data.num_rows == len(state)
    np.testing.assert_array_equal(np.array(data["observation.state"].to_pylist(), np.float32), state)
    np.testing.assert_array_equal(np.array(data["action"].to_pylist(), np.float32), action)
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["robot_type"] == "so101_follower" and info["total_frames"] == len(state)
    assert info["features"]["action"]["names"][0] == "shoulder_pan.pos"
