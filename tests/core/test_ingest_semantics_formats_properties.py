"""Issue 24 property tests for the ROS bag and step-array importers (HDF5 ALOHA / robomimic, Zarr,
RLDS): random well-formed recordings with one lie their format can carry are refused or
quarantined by the right check, or pass with facts equal to the truth and load under every preset
read pattern. Written by each ecosystem's own writer (tiny frames), fixed seeds.

Bags carry clock jumps, gaps, stamps ticking at another rate than the receive clock and a frame
of another size; step-array files keep no clock (step i is at i / fps), so their lies are a
declared rate that is not a rate, a declared step count or episode boundary that contradicts the
data, and frames of another size than the first or than features.json declares."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robodata.container import EpisodeReader
from robodata.dataset import PatternDataset
from robodata.dataset.pattern import ReadPattern, StreamWindow, preset_for
from robodata.ingest.align import aligned_tracks
from robodata.ingest.convert import convert
from robodata.ingest.importers import ImportOptions, open_raw
from robodata.ingest.qc import DEFAULT_BLOCKING, QCThresholds, evaluate_pre
from robodata.ingest.raw import RawEpisodeError
from robodata.ingest.synth import SynthConfig, make_episode
from robodata.ingest.synth.arrays import write_aloha, write_rlds, write_robomimic, write_zarr
from robodata.ingest.synth.ros import write_ros1_bag, write_ros2_bag_custom
from tests.core import helpers_semantics as lie_in

SIZE, STATE_HZ = 16, 50.0
CHECKS = ("timestamps_monotonic", "rate_within_tolerance", "no_frame_gaps", "clock_continuous", "min_duration")
CAMERA = {"aloha": "cam", "robomimic": "cam_image", "zarr": "cam_rgb", "rlds": "cam_image"}
BAD_RATES = [0, -15.0, 1e-9, 0.05, float("nan"), float("inf"), 1e9, "ten"]
PROPS = settings(
    max_examples=4,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _episode(fps: float, seconds: float, seed: int):
    cfg = SynthConfig(episodes=1, duration_s=seconds, height=SIZE, width=SIZE, fps=fps, state_hz=STATE_HZ,
                      cameras=("cam",), seed=seed, jitter_frac=0.02)  # fmt: skip
    return make_episode(cfg, 0)


def _passes_true_and_loads(raw, al, out: Path, camera: str, frames: int, fps: float, state_hz: float, span: float):
    """Convert; the container's facts are the truth; every preset loads its first and last sample."""
    res = convert(raw, al, out)
    r = EpisodeReader.open(res.uri)
    rates = {s: spec.rate_hz for s, spec in r.meta.streams.items() if spec.kind != "events"}
    assert abs(rates[camera] / fps - 1) < 0.05 and abs(rates["joint_pos"] / state_hz - 1) < 0.05, rates
    assert res.frames[camera] == frames and abs(r.meta.duration_s - span) < 1.5 / fps, (res.frames, r.meta.duration_s)
    assert r.meta.streams[camera].shape[:2] == (SIZE, SIZE)
    r.close()
    table = pa.table({"episode_id": [raw.episode_id], "uri": [res.uri], "duration_s": [res.duration_s],
                      "cameras": [[camera]], "stream_rates_json": [json.dumps(rates)], "split": ["train"],
                      "weight": [1.0]})  # fmt: skip
    if "cmd" in rates:
        patterns = [preset_for(table, name) for name in ("wam", "vla")]
    else:  # ROS 1 JointState holds no command: the vla shape without its action window
        windows = (StreamWindow("cameras", (camera,), "video", 2, offset=-1), StreamWindow("state", ("joint_pos",)))
        patterns = [ReadPattern("observe", windows, anchor_stride_s=1 / fps)]
    for pattern in patterns:
        ds = PatternDataset(table, pattern)
        assert len(ds) > 0, pattern.name
        batch = ds.batch([0, len(ds) - 1])
        assert batch[camera].shape[0] == 2 and not ds.skipped.rows
        ds.close()


@st.composite
def bags(draw, lie: str):
    fps = draw(st.sampled_from([10.0, 20.0, 30.0]))  # (wam at 14.96 Hz reads 6 s of state: longer than 5 s)
    seed = draw(st.integers(0, 2**16))
    param = {
        "none": st.just(0.0),
        "jump": st.sampled_from([60.0, 3600.0, 3 * 3600.0]),
        "gap": st.integers(6, 12).map(float),  # frames dropped
        "rate": st.sampled_from([3.0, 0.5, 1.1, 1000.0]),  # stamps tick at this x the frame rate
        "shape": st.floats(0.05, 0.95),  # where the odd frame sits
    }[lie]
    stream = draw(st.sampled_from(["cam", "joint_states"]))  # which clock jumps
    return fps, seed, draw(param), stream


@pytest.mark.parametrize("family", ["ros1", "ros2"])
@pytest.mark.parametrize("lie", ["none", "jump", "gap", "rate", "shape"])
@PROPS
@given(data=st.data())
def test_a_bag_lie_quarantines_with_its_reason_or_the_episode_passes_true_and_loadable(
    family, lie, data, tmp_path_factory
):
    fps, seed, p, stream = data.draw(bags(lie))
    root = tmp_path_factory.mktemp("bag")
    ep = _episode(fps, 5.0, seed)
    t = ep.frame_t["cam"]
    if lie == "jump":
        jumped = t if stream == "cam" else ep.state_t
        jumped[len(jumped) // 2 :] += int(p * 1e9)
    if lie == "gap":
        ep.frame_t["cam"] = t = np.concatenate([t[:5], t[5 + int(p) :]])
    if lie == "rate":
        lie_in.stamps_tick(ep, p)
    if lie == "shape":
        lie_in.odd_frame(ep, max(1, int(p * len(t))))
    if family == "ros1":
        path, kind = write_ros1_bag(ep, root), "ros1-bag"
    else:
        path, kind = write_ros2_bag_custom(ep, root, root / "msgs"), "ros2-bag"
    raw = open_raw(str(path), kind, options=ImportOptions(msgs=str(root / "msgs") if family == "ros2" else ""))
    al = aligned_tracks(raw)
    failed = {o.check for o in evaluate_pre(al, "", CHECKS, QCThresholds()) if not o.passed}
    blocking = failed & set(DEFAULT_BLOCKING)
    if lie == "jump":
        assert "clock_continuous" in blocking, failed
        return
    if lie == "rate":  # the stamps' rate is not the receive clock's; a small lie shows as the fit's drift
        assert blocking & {"rate_within_tolerance", "clock_continuous"}, failed
        return
    assert not blocking and ("no_frame_gaps" in failed) == (lie == "gap"), (lie, failed)
    out = root / "ep.rdep"
    if lie == "shape":
        with pytest.raises(RawEpisodeError, match=r"frame \d+ is .*first frame was"):
            convert(raw, al, out)
        assert not out.exists()
        return
    span = max(t[-1] - t[0], ep.state_t[-1] - ep.state_t[0]) / 1e9
    _passes_true_and_loads(raw, al, out, "cam", len(t), fps, STATE_HZ, span)


STEP_LIES = [("aloha", "none"), ("aloha", "rate"), ("aloha", "shape"), ("aloha", "count"),
             ("robomimic", "none"), ("robomimic", "rate"), ("robomimic", "count"),
             ("zarr", "none"), ("zarr", "rate"), ("zarr", "count"),
             ("rlds", "none"), ("rlds", "shape"), ("rlds", "count")]  # fmt: skip


@st.composite
def step_files(draw, family: str):
    fps = 10.0 if family == "rlds" else draw(st.sampled_from([15.0, 20.0, 30.0]))  # TFDS has none: the key map's
    return fps, draw(st.integers(0, 2**16)), draw(st.sampled_from(BAD_RATES)), draw(st.floats(0.05, 0.95))


def _write_step_lie(root: Path, family: str, lie: str, ep, bad, p: float) -> tuple[str, str]:
    """Write `ep` as a one-episode item of `family` with `lie`; (uri, phrase its refusal holds)."""
    n = len(ep.frame_t["cam"])
    k = max(1, int(p * n))
    if family == "aloha":
        path = write_aloha(ep, root, compress=lie == "shape", index=7)
        if lie == "rate":
            lie_in.h5_set(path, "/", "fps", bad)
        if lie == "shape":
            lie_in.aloha_replace_frame(path, k, lie_in.big_jpeg(ep, k))
        if lie == "count":
            lie_in.h5_cut(path, "observations/qvel", 1 + int(p * 5))
        return str(path), {"rate": "attrs fps", "shape": "first frame|frame .* is", "count": "step count"}.get(lie, "")
    if family == "robomimic":
        path = write_robomimic([ep], root)
        if lie == "rate" and p < 0.5:
            lie_in.robomimic_control_freq(path, bad)
        elif lie == "rate":
            lie_in.h5_set(path, "data/demo_0", "fps", ep.meta["cameras"]["cam"]["fps"] * (1.5 + p))
        if lie == "count":
            lie_in.h5_set(path, "data/demo_0", "num_samples", n + (-1 if p < 0.5 else 3))
        why = {"rate": "control_freq" if p < 0.5 else "disagree", "count": "num_samples"}.get(lie, "")
        return f"{path}#data/demo_0", why
    if family == "zarr":
        path = write_zarr([ep], root)
        if lie == "rate":
            lie_in.zarr_attr(path, "fps", bad)
        if lie == "count":
            lie_in.zarr_episode_end(path, 0, n + 1 + int(p * 9))
        return f"{path}#0", {"rate": "attrs fps", "count": "episode_ends needs"}.get(lie, "")
    path = write_rlds([ep], root)
    if lie == "shape" and p < 0.5:
        lie_in.rlds_declare_shape(path, 2 * SIZE, SIZE)
    elif lie == "shape":
        lie_in.rlds_replace_image(path, k, lie_in.big_jpeg(ep, k))
    if lie == "count":
        lie_in.rlds_framing(path, "steps/is_last" if p < 0.5 else "steps/is_first", k if k < n - 1 else 1)
    framing = r"steps/is_(first|last) is set at steps"  # the reason names the flag
    why = {"shape": "features.json" if p < 0.5 else "frame .* is", "count": framing}.get(lie, "")
    return f"{path}#1.0.0/rlds_ds-train.tfrecord-00000-of-00001:0:0", why


@pytest.mark.parametrize("family,lie", STEP_LIES)
@PROPS
@given(data=st.data())
def test_a_step_array_lie_is_refused_naming_it_or_the_episode_passes_true_and_loadable(
    family, lie, data, tmp_path_factory
):
    fps, seed, bad, p = data.draw(step_files(family))
    root = tmp_path_factory.mktemp(family)
    ep = _episode(fps, 6.0, seed)
    n = len(ep.frame_t["cam"])
    uri, why = _write_step_lie(root, family, lie, ep, bad, p)
    if lie in ("rate", "count") or (lie == "shape" and "features" in why):
        with pytest.raises(RawEpisodeError, match=why):
            open_raw(uri, family if family != "aloha" and family != "robomimic" else "hdf5")
        return
    raw = open_raw(uri, "hdf5" if family in ("aloha", "robomimic") else family)
    al = aligned_tracks(raw)
    failed = {o.check for o in evaluate_pre(al, "", CHECKS, QCThresholds()) if not o.passed}
    assert not failed, failed  # no clock: nothing to flag but what was refused
    camera = CAMERA[family]
    assert {t.nominal_hz for t in al.timing.values() if t.kind != "events"} == {fps}
    if lie == "shape":
        with pytest.raises(RawEpisodeError, match=why):
            convert(raw, al, root / "ep.rdep")
        assert not (root / "ep.rdep").exists()
        return
    _passes_true_and_loads(raw, al, root / "ep.rdep", camera, n, fps, fps, (n - 1) / fps)


def test_the_synthetic_step_writers_declare_what_the_importers_read(tmp_path):
    """The property above relies on it: each writer's file, unmodified, passes at the episode's rate."""
    ep = _episode(20.0, 1.0, 0)
    for family in CAMERA:
        d = tmp_path / family
        d.mkdir()
        uri, _ = _write_step_lie(d, family, "none", replace(ep), None, 0.5)
        raw = open_raw(uri, "hdf5" if family in ("aloha", "robomimic") else family)
        want = 10.0 if family == "rlds" else 20.0
        assert raw.cameras[CAMERA[family]].fps == want and raw.cameras[CAMERA[family]].height == SIZE
