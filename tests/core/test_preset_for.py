"""preset_for lays a preset over the camera set and rates most of a manifest's episodes have."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from robodata.dataset.pattern import preset_for
from robodata.errors import ConfigError

RATES = {"cam_left": 30.0, "wrist": 30.0, "joint_pos": 100.0, "cmd": 100.0}


def _manifest(rows: list[tuple[list[str] | None, dict | str | None]]) -> pa.Table:
    return pa.table(
        {
            "cameras": pa.array([c for c, _ in rows], pa.list_(pa.string())),
            "stream_rates_json": pa.array([r if not isinstance(r, dict) else json.dumps(r) for _, r in rows]),
        }
    )


def _cameras(pattern) -> tuple[str, ...]:
    return next(w.streams for w in pattern.windows if w.name == "cameras")


def test_the_camera_set_most_episodes_have_wins_over_the_first_row():
    odd = (["cam_left", "cam_right", "wrist"], {**RATES, "cam_right": 30.0})
    common = (["cam_left", "wrist"], RATES)
    pattern = preset_for(_manifest([odd, common, common, odd, common]), "wam")
    assert _cameras(pattern) == ("cam_left", "wrist")


def test_equal_counts_take_the_first_set_in_manifest_order():
    a, b = (["a"], {"a": 30.0}), (["b"], {"b": 30.0})
    assert _cameras(preset_for(_manifest([b, a, a, b]), "vla")) == ("b",)
    assert _cameras(preset_for(_manifest([a, b]), "vla")) == ("a",)


def test_rates_come_from_the_episodes_of_that_set_and_bogus_ones_take_defaults():
    slow = (["cam_left", "wrist"], {**RATES, "cam_left": 15.0})
    fast = (["cam_left", "wrist"], {**RATES, "cam_left": 60.0})
    other = (["top"], {"top": 10.0})
    pattern = preset_for(_manifest([other, slow, fast, fast, other]), "vla")  # 3 of the pair, 2 "top"
    assert pattern.anchor_stride_s == pytest.approx(1 / 60.0)
    bogus = (["cam_left"], {"cam_left": "fast", "joint_pos": -5, "cmd": float("nan")})
    wam = preset_for(_manifest([bogus]), "wam")
    video = next(w for w in wam.windows if w.name == "cameras")
    assert (video.length, video.every) == (40, 3)  # the 30 fps default: every 3rd frame for 4 s at 10 Hz


def test_a_manifest_of_camera_less_episodes_gets_a_state_only_preset():
    """Issue 36: IMU / telemetry / state-only recordings convert; a preset over them reads their state
    and action windows (anchored at the state rate for vla) instead of refusing."""
    imu = {"joint_pos": 200.0, "cmd": 50.0}
    for name in ("wam", "vla"):
        pattern = preset_for(_manifest([(None, imu), ([], imu), (["wrist"], RATES)]), name)
        assert [w.name for w in pattern.windows] == ["state", "action"]
    assert preset_for(_manifest([([], imu)]), "vla").anchor_stride_s == pytest.approx(1 / 200.0)


def test_rates_that_do_not_parse_are_passed_over_for_the_most_common_that_do():
    bad = (["cam_left", "wrist"], "{not json")
    slow = (["cam_left", "wrist"], {**RATES, "cam_left": 15.0})
    pattern = preset_for(_manifest([bad, bad, bad, slow]), "vla")  # the index skips the three
    assert pattern.anchor_stride_s == pytest.approx(1 / 15.0)
    assert preset_for(_manifest([bad]), "vla").anchor_stride_s == pytest.approx(1 / 30.0)  # the defaults


def test_no_rows_is_a_config_error():
    with pytest.raises(ConfigError, match="no rows"):
        preset_for(_manifest([]), "wam")
    with pytest.raises(ConfigError, match="camera names must be non-empty strings"):
        preset_for(_manifest([(["wrist", None], RATES), (["", "x"], RATES), (["wrist", None], RATES)]), "wam")
    with pytest.raises(ConfigError, match="unknown read pattern preset"):
        preset_for(_manifest([(["wrist"], RATES)]), "nope")
