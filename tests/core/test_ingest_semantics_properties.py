"""Issue 24 property test: random well-formed recordings with an injected clock jump, frame gap or
rate lie are quarantined by the right check, or pass with facts equal to the truth and load under
every preset read pattern. In-memory raw episodes (tiny frames), fixed seeds."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robodata.container import EpisodeReader
from robodata.dataset import PatternDataset
from robodata.dataset.pattern import preset_for
from robodata.ingest.align import aligned_tracks
from robodata.ingest.convert import convert
from robodata.ingest.qc import DEFAULT_BLOCKING, QCThresholds, evaluate_pre
from robodata.ingest.raw import ArrayTrack, CameraTrack, RawEpisode

FPS, STATE_HZ, SECONDS = 10.0, 50.0, 5.0
CHECKS = ("timestamps_monotonic", "rate_within_tolerance", "no_frame_gaps", "clock_continuous", "min_duration")


@st.composite
def recordings(draw):
    lie = draw(st.sampled_from(["none", "none", "jump", "gap", "rate"]))
    fps = draw(st.sampled_from([FPS, 15.0, 20.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    n_cam, n_state = int(SECONDS * fps), int(SECONDS * STATE_HZ)
    jitter = draw(st.floats(0.0, 0.05))
    t_cam = (np.arange(n_cam) * 1e9 / fps + rng.normal(0, jitter * 1e9 / fps / 3, n_cam)).astype(np.int64)
    t_cam = np.maximum.accumulate(np.maximum(t_cam, 0)) + np.arange(n_cam)
    t_state = (np.arange(n_state) * 1e9 / STATE_HZ).astype(np.int64)
    declared, stream = fps, "cam"
    if lie == "gap":
        k = draw(st.integers(6, 12))
        at = draw(st.integers(2, n_cam - k - 2))
        t_cam = np.concatenate([t_cam[:at], t_cam[at + k :]])
    if lie == "jump":
        stream = draw(st.sampled_from(["cam", "joint_pos"]))
        jump = int(draw(st.sampled_from([60.0, 3600.0, 3 * 3600.0])) * 1e9)
        t = t_cam if stream == "cam" else t_state
        t[len(t) // 2 :] += jump
    if lie == "rate":
        declared = draw(st.sampled_from([0.0, 1e-9, float("nan"), fps * 3, fps / 2]))
    return lie, fps, declared, t_cam, t_state


def _raw(fps, declared, t_cam, t_state) -> RawEpisode:
    q = np.sin(t_state[:, None] / 1e9 + np.arange(3)).astype(np.float32)

    def frames():
        for i in range(len(t_cam)):
            yield "cam", i, np.full((16, 16, 3), (i * 7) % 255, np.uint8)

    return RawEpisode(
        "prop-ep", "test", "mem://prop", "r", "s", "t", "v", 1_700_000_000_000_000_000, True,
        {"cam": CameraTrack(t_cam, 16, 16, declared)},
        {"joint_pos": ArrayTrack(t_state, q, STATE_HZ), "cmd": ArrayTrack(t_state.copy(), q * 2, STATE_HZ)},
        frames=frames,
    )  # fmt: skip


@settings(max_examples=14, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rec=recordings())
def test_a_lie_quarantines_with_its_reason_or_the_episode_passes_true_and_loadable(rec, tmp_path_factory):
    lie, fps, declared, t_cam, t_state = rec
    raw = _raw(fps, declared, t_cam, t_state)
    al = aligned_tracks(raw)
    failed = {o.check for o in evaluate_pre(al, "", CHECKS, QCThresholds()) if not o.passed}
    blocking = failed & set(DEFAULT_BLOCKING)
    want = {"jump": "clock_continuous", "rate": "rate_within_tolerance"}.get(lie)
    if want:
        assert want in blocking, (lie, failed)
        return
    assert not blocking, (lie, failed)
    assert ("no_frame_gaps" in failed) == (lie == "gap")  # a gap passes, as a fact on the row
    truth_span = max(t_cam[-1], t_state[-1]) / 1e9 - min(t_cam[0], t_state[0]) / 1e9
    assert abs(al.span_s - truth_span) < 1e-3 + 0.05
    # converted: the facts hold and the episode loads under every preset it can serve
    path = tmp_path_factory.mktemp("prop") / "ep.rdep"
    res = convert(raw, al, path)
    r = EpisodeReader.open(res.uri)
    rates = {s: spec.rate_hz for s, spec in r.meta.streams.items() if spec.kind != "events"}
    assert rates["cam"] == fps and rates["joint_pos"] == STATE_HZ
    assert res.frames["cam"] == len(t_cam) and abs(r.meta.duration_s - al.span_s) < 0.05
    table = pa.table(
        {
            "episode_id": ["prop-ep"],
            "uri": [res.uri],
            "duration_s": [r.meta.duration_s],
            "cameras": [["cam"]],
            "stream_rates_json": [json.dumps(rates)],
            "split": ["train"],
            "weight": [1.0],
        }  # fmt: skip
    )
    for name in ("wam", "vla"):
        ds = PatternDataset(table, preset_for(table, name))
        assert len(ds) > 0
        batch = ds.batch([0, len(ds) - 1])
        assert batch["cam"].shape[0] == 2 and not ds.skipped.rows
        ds.close()
