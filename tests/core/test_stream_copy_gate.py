"""Issue 40: `auto`'s cost gate for a plan that serves several read patterns (robodata.layout.mix)
prices the copy against the layout with each pattern's own windows, and prices the source's
keyframes apart from its other frames."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from robodata.container import EpisodeReader, Layout, TopicGroup, VideoSettings
from robodata.container.calibration import Calibration, CodecPoint
from robodata.container.plan import LayoutPlan
from robodata.dataset.pattern import ReadPattern, StreamWindow
from robodata.ingest import video_copy
from robodata.ingest.align import aligned_tracks
from robodata.ingest.convert import convert, episode_meta, layout_for
from robodata.ingest.copy_cost import price, read_types
from robodata.ingest.importers import open_raw
from robodata.ingest.synth.lerobot import write_lerobot
from robodata.ingest.video_copy import VideoCopyConfig

LAYOUT_VIDEO = VideoSettings("h264", 30, 23, "veryfast", 2)
# decode seconds measured on LeRobot's 640x480 (issue 42): its AV1's keyframe and other frame, and
# the calibration's H.264 I, P, B at CRF 23 with 2 B-frames
AV1_S = (4.0e-3, 0.3e-3)
H264_S = (2.2e-3, 0.75e-3, 0.58e-3)
# a VLA-like pattern (two neighbouring frames: the GOP-2 copy decodes fewer frames than a GOP 30)
# and a WAM-like one (every 3rd frame: nearly every frame the copy decodes is a keyframe)
NEAR = ReadPattern("near", (StreamWindow("cameras", ("top",), "video", length=2, offset=-1),))
FAR = ReadPattern("far", (StreamWindow("cameras", ("top",), "video", length=10, every=3),))


def _source(tmp: Path) -> Path:
    return write_lerobot(
        tmp / "ds-av1", episodes=1, frames_per_episode=60, fps=10, height=64, width=64, codec="av1",
        cameras=("top",), gop=2,
    )  # fmt: skip


def _plan(patterns: list[ReadPattern]) -> LayoutPlan:
    """A plan for `patterns` as `robodata advise` writes one: `pattern` the merged union (here the
    heaviest's windows: they read the same cameras), `patterns` each with its weight."""
    layout = Layout(groups=(TopicGroup("cameras", ("top",), 2.0, LAYOUT_VIDEO),))
    point = CodecPoint(23, 2, (1e4, 1e3, 1e3), H264_S, 1e4, H264_S[0], 40.0, 40.0)
    cal = Calibration("h264", "veryfast", 64, 64, [point], 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    as_dict = [dataclasses.asdict(p) for p in patterns]
    union = dict(as_dict[0], name="+".join(p.name for p in patterns))
    listed = [
        {"name": p.name, "weight": 1.0 / len(patterns), "pattern": d} for p, d in zip(patterns, as_dict, strict=True)
    ]
    listed = listed if len(patterns) > 1 else []
    return LayoutPlan(union, layout, 1 << 20, calibration=dataclasses.asdict(cal), patterns=listed)


def _decision(root: Path, tmp: Path, plan: LayoutPlan) -> tuple[dict, VideoSettings]:
    raw = open_raw(f"{root}#0", "lerobot-v2.1")
    out = tmp / f"{plan.pattern['name']}.rdep"
    res = convert(raw, aligned_tracks(raw), out, plan=plan, copy=VideoCopyConfig(mode="auto"))
    r = EpisodeReader.open(out)
    assert r.meta.extra["video"] == res.video
    return res.video["top"], r.layout.group_of("top").video


def test_a_plan_for_several_patterns_copies_only_where_every_pattern_reads_within_the_ratio(tmp_path, monkeypatch):
    # the source's decode as measured on LeRobot's 640x480 (a 64x64 decode costs next to nothing)
    monkeypatch.setattr(video_copy, "decode_s_by_type", lambda *a: AV1_S, raising=False)
    root = _source(tmp_path)
    # one layout for both: the merged pattern holds NEAR's windows only, yet FAR reads it too
    both, stored = _decision(root, tmp_path, _plan([NEAR, FAR]))
    assert both["mode"] == "transcode" and stored == LAYOUT_VIDEO, both
    assert "near: " in both["reason"] and "far: " in both["reason"], both
    assert "over 1.1x for far:" in both["reason"], both
    # each pattern alone: NEAR reads the copy cheaper, FAR dearer
    near, stored = _decision(root, tmp_path, _plan([NEAR]))
    assert near["mode"] == "copy" and stored.codec == "av1", near
    far, stored = _decision(root, tmp_path, _plan([FAR]))
    assert far["mode"] == "transcode" and stored == LAYOUT_VIDEO, far
    # a ratio both patterns meet: copied, each pattern's figures recorded
    raw = open_raw(f"{root}#0", "lerobot-v2.1")
    res = convert(raw, aligned_tracks(raw), tmp_path / "lax.rdep", plan=_plan([NEAR, FAR]),
                  copy=VideoCopyConfig(max_cost_ratio=100.0))  # fmt: skip
    assert res.video["top"]["mode"] == "copy" and "far: " in res.video["top"]["reason"], res.video


@pytest.mark.parametrize(("key_s", "other_s"), [(1e-3, 0.0), (0.0, 1e-3)])
def test_the_copy_is_priced_per_keyframe_and_per_other_frame(tmp_path, key_s, other_s):
    """A read that decodes k keyframes and m other frames of the copy costs k x key_s + m x other_s
    (a stream's mean frame would misprice reads that decode more keyframes than its mix)."""
    from tests.core.test_stream_copy import _calibration

    raw = open_raw(f"{_source(tmp_path)}#0", "lerobot-v2.1")
    meta = episode_meta(raw, aligned_tracks(raw))
    g = layout_for(raw).groups[0]
    copied = VideoSettings("av1", 2, 0, "copy", 0)
    got = price(g, copied, g.video, meta, 60, list(NEAR.video), {"top": (key_s, other_s)}, _calibration(1e-3))
    fpc = round(g.chunk_span_s * 10 / 2) * 2
    keys, p, b = read_types(2, 0, fpc, 60, NEAR.video)
    assert got.unit == "ms" and keys > 1.0 and p > 0.5, (keys, p)
    assert got.copy == pytest.approx((keys * key_s + (p + b) * other_s) * 1e3)


@pytest.mark.parametrize("gop", [1, 2])
def test_the_sources_decode_is_timed_per_keyframe_and_per_other_frame(tmp_path, gop):
    """Both figures are CPU seconds of a real decode; a stream of keyframes only prices its (absent)
    other frames as keyframes."""
    from robodata.ingest.copy_cost import decode_s_by_type

    root = write_lerobot(
        tmp_path / f"ds-{gop}", episodes=1, frames_per_episode=12, fps=10, height=64, width=64, codec="av1",
        cameras=("top",), gop=gop,
    )  # fmt: skip
    src = open_raw(f"{root}#0", "lerobot-v2.1").video_sources("top")
    key_s, other_s = decode_s_by_type(src.codec, src.extradata, src.packets)
    assert 0.0 < key_s < 1.0 and 0.0 < other_s < 1.0, (key_s, other_s)
    if gop == 1:
        assert other_s == key_s
