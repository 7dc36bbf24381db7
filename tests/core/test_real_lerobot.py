"""Issue 36: real LeRobot datasets (tests/data/real/*/SOURCE.md) read, converted and exported exactly,
checked against pyarrow and PyAV (bench.realdata_fixtures' independent reader), never robodata."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from bench.realdata_fixtures import MISSING, REAL, present, read_lerobot
from robodata.container import EpisodeReader
from robodata.errors import RobodataError
from robodata.ingest.align import aligned_tracks
from robodata.ingest.convert import convert
from robodata.ingest.importers import open_raw
from robodata.ingest.qc import PRE_CHECKS, QCThresholds

OPEN50, G1 = REAL / "lerobot_v30_open50", REAL / "lerobot_v21_g1_av1"
pytestmark = pytest.mark.skipif(
    not present("lerobot_v30_open50/meta/info.json"),
    reason=MISSING,
)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_v30_keeps_the_frame_at_to_timestamp_and_maps_actions_by_name():
    """open_50 stores each episode's last frame time as to_timestamp: every row keeps its frame; its
    `actions` feature is the action stream (not the state), `state` the state."""
    want = read_lerobot(OPEN50)["4"]
    raw = open_raw(f"{OPEN50}#4", "lerobot-v3.0")
    assert len(raw.cameras["image"].t_ns) == want.frames["image"] == len(want.state) == 395
    assert raw.roles == {"state": "joint_pos", "action": "cmd"}
    np.testing.assert_array_equal(raw.arrays["cmd"].values, want.action)
    np.testing.assert_array_equal(raw.arrays["joint_pos"].values, want.state)
    assert not np.array_equal(want.action, want.state)  # the export bug wrote the state here
    assert raw.arrays["cmd"].names[0] == "left.joint_1.pos" and raw.robot_type == "lingzu_highcam_pi05"
    assert not [i for i in raw.issues if i.startswith("frames_state_mismatch")]


def test_v21_av1_with_nested_names(tmp_path):
    want = read_lerobot(G1)["29"]
    raw = open_raw(f"{G1}#29", "lerobot-v2.1")
    assert len(raw.cameras["cam_high"].t_ns) == want.frames["cam_high"] == 221
    names = raw.arrays["joint_pos"].names  # info.json: "names": [[...26 names...]]
    assert len(names) == 26 and names[:2] == ("kLeftShoulderPitch", "kLeftShoulderRoll")
    assert raw.arrays["joint_pos"].units == ""  # nothing says radians: not range-checked, a finding instead
    np.testing.assert_array_equal(raw.arrays["joint_pos"].values, want.state)


def test_a_frame_count_that_differs_from_the_rows_is_a_non_blocking_finding(tmp_path):
    """to_timestamp moved one period earlier (13.1 s): the frames in [from, to) are 393 (the one at 13.1 s
    matches no last row) for 395 rows, and QC says so without quarantining the episode."""
    root = _copy(OPEN50, tmp_path / "open50")
    f = root / "meta" / "episodes" / "chunk-000" / "file-000.parquet"
    t = pq.read_table(f)
    col = t.schema.get_field_index("videos/image/to_timestamp")
    to = pc.subtract(t["videos/image/to_timestamp"], pa.scalar(1 / 30))
    pq.write_table(t.set_column(col, "videos/image/to_timestamp", to), f)
    raw = open_raw(f"{root}#4", "lerobot-v3.0")
    assert len(raw.cameras["image"].t_ns) == 393
    ok, why = PRE_CHECKS["frames_match_state"](aligned_tracks(raw), QCThresholds())
    assert not ok and "393 frames" in why and "395 parquet rows" in why


def test_as_published_the_missing_video_names_the_video_folder_and_the_row_keeps_robot_type(tmp_path):
    """The repository keeps its videos under video/ while info.json says videos/: quarantined with a
    reason naming the folder that is there, and the catalog row still says the dataset's robot_type."""
    from deltalake import DeltaTable

    from robodata.ingest.landing.batch import write_manifest
    from robodata.ingest.landing.scan import LandingCursor, new_items
    from robodata.ingest.pipeline import run_batch
    from robodata.ingest.settings import IngestSettings
    from robodata.ingest.tables import IngestPaths

    land = tmp_path / "landing"
    root = _copy(OPEN50, land / "open50")
    (root / "videos").rename(root / "video")
    with pytest.raises(
        RobodataError, match=r"holds it as video/image/chunk-000/file-004\.mp4: its video folder is video/"
    ):
        open_raw(f"{root}#4", "lerobot-v3.0")
    paths = IngestPaths(str(tmp_path / "state"))
    s = IngestSettings()
    write_manifest(paths, "b", new_items(str(land), LandingCursor()))
    run_batch(paths, "b", s, derived=False)
    rows = DeltaTable(paths.catalog).to_pyarrow_table().to_pylist()
    assert len(rows) == 2 and all(r["qc_status"] == "quarantined" for r in rows)
    assert {r["robot_type"] for r in rows} == {"lingzu_highcam_pi05"}
    assert all("video/" in r["qc_reason"] for r in rows)


def test_export_writes_the_containers_frames_the_real_action_and_the_robot_type(tmp_path):
    """The LeRobot export of the converted episode, read back with pyarrow: as many rows as the source's
    frames, its state, its `actions` as the action (not the state), and info.json's robot_type."""
    import json

    from robodata.export.lerobot import export_lerobot

    want = read_lerobot(OPEN50)["4"]
    raw = open_raw(f"{OPEN50}#4", "lerobot-v3.0")
    res = convert(raw, aligned_tracks(raw), tmp_path / "e.rdep")
    r = EpisodeReader.open(res.uri)
    assert r.meta.extra["roles"] == {"state": "joint_pos", "action": "cmd"}
    row = {
        "episode_id": r.meta.episode_id,
        "uri": res.uri,
        "footer_offset": r.footer_offset,
        "footer_length": r.footer_length,
    }
    out = tmp_path / "lr"
    export_lerobot([row], out)
    data = pq.read_table(out / "data" / "chunk-000" / "file-000.parquet")
    assert data.num_rows == len(want.state) == res.frames["image"]
    np.testing.assert_array_equal(np.array(data["observation.state"].to_pylist(), np.float32), want.state)
    np.testing.assert_array_equal(np.array(data["action"].to_pylist(), np.float32), want.action)
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["robot_type"] == "lingzu_highcam_pi05" and info["total_frames"] == 395
    assert info["features"]["action"]["names"][0] == "left.joint_1.pos"
