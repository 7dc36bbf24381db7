"""Issue 36: the real step-array fixtures (diffusion_policy's PushT Zarr, octo's RLDS debug set) read
exactly, checked against zarr and a protobuf wire-format reader (bench.realdata_fixtures); their
variations (pixel-space state, float pixels, (N, 9, 2) keypoints, is_last never set, no control
rate) become findings, not quarantines (camera-less episodes: tests/core/test_ingest_state_only.py)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from bench.realdata_fixtures import MISSING, REAL, present, read_rlds, read_zarr_pusht, rlds_key
from robodata.ingest.align import aligned_tracks
from robodata.ingest.importers import open_raw
from robodata.ingest.qc import ALL_CHECKS, QCThresholds, evaluate_pre
from robodata.ingest.raw import RawEpisodeError

PUSHT = REAL / "zarr_pusht_dp" / "pusht_cchi_v7_replay.zarr"
BRIDGE = REAL / "rlds_octo_bridge_debug" / "bridge_dataset"
SHARD = "1.0.0/bridge_dataset-train.tfrecord-00000-of-00001"
pytestmark = pytest.mark.skipif(
    not present("zarr_pusht_dp/pusht_cchi_v7_replay.zarr"),
    reason=MISSING,
)


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
