"""Small episodes for container tests (64x48 frames keep encode time negligible)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from robodata.container import EpisodeMeta, EpisodeReader, EpisodeWriter, Layout, StreamSpec, TopicGroup, VideoSettings
from robodata.ingest.synth.scene import SceneRenderer

CAMS = ("cam_left", "cam_right", "wrist")


def small_layout(codec: str = "h264", gop: int = 10, camera_span_s: float = 1.0) -> Layout:
    return Layout(
        groups=(
            TopicGroup("cameras", CAMS, camera_span_s, VideoSettings(codec=codec, gop=gop, crf=20)),
            TopicGroup("proprio", ("joint_pos", "cmd"), 2.0),
            TopicGroup("events", ("events",), 60.0),
        )
    )


def small_meta(episode_id: str = "ep-test", h: int = 48, w: int = 64, fps: float = 20.0) -> EpisodeMeta:
    streams = {c: StreamSpec(c, "video", fps, (h, w, 3)) for c in CAMS}
    streams["joint_pos"] = StreamSpec("joint_pos", "array", 100.0, (7,), units="rad")
    streams["cmd"] = StreamSpec("cmd", "array", 50.0, (7,), units="rad")
    streams["events"] = StreamSpec("events", "events")
    return EpisodeMeta(episode_id, "robot-1", "site-a", "pick", 1_700_000_000_000_000_000, streams)


def write_small(
    path,
    duration_s: float = 4.0,
    fps: float = 20.0,
    layout: Layout | None = None,
    h: int = 48,
    w: int = 64,
    episode_id: str = "ep-test",
):
    """Returns the frames written per camera (for comparison) and the proprio arrays."""
    meta = small_meta(episode_id, h=h, w=w, fps=fps)
    layout = layout or small_layout()
    rend = {c: SceneRenderer(h, w, seed=3, view=i) for i, c in enumerate(CAMS)}
    n = int(duration_s * fps)
    frames = {c: [] for c in CAMS}
    t_frames = (np.arange(n) * 1e9 / fps).astype(np.int64) + 1_000
    with EpisodeWriter(path, meta, layout) as wr:
        for i in range(n):
            for c in CAMS:
                rgb = rend[c].render(i / fps, np.array([0.3 * np.sin(i / 9), 0.2, 0.1, 0, 0, 0, 0]), i > n // 2)
                frames[c].append(rgb)
                wr.write_frame(c, rgb, int(t_frames[i]))
        tj = (np.arange(int(duration_s * 100)) * 1e7).astype(np.int64)
        jp = np.sin(tj[:, None] / 1e9 + np.arange(7)).astype(np.float32)
        wr.write_array("joint_pos", tj, jp)
        tc = (np.arange(int(duration_s * 50)) * 2e7).astype(np.int64)
        cmd = np.cos(tc[:, None] / 1e9 + np.arange(7)).astype(np.float32)
        wr.write_array("cmd", tc, cmd)
        wr.write_events("events", np.array([5, int(1.5e9)], dtype=np.int64), ["start", "grasp"])
    return {
        "frames": {c: np.stack(v) for c, v in frames.items()},
        "t_frames": t_frames,
        "tj": tj,
        "joint_pos": jp,
        "tc": tc,
        "cmd": cmd,
    }


def footer_doc(path: Path) -> tuple[bytes, dict, int, int]:
    """(file bytes, parsed footer JSON, footer offset, footer length) of a container, for tests
    that edit the footer and re-lay the file."""
    raw = path.read_bytes()
    r = EpisodeReader.open(path)
    off, length = r.footer_offset, r.footer_length
    r.close()
    return raw, json.loads(raw[off : off + length]), off, length


def first_part(doc: dict, stream: str) -> tuple[int, int]:
    """(chunk index, part index) in a footer doc of the stream's first part."""
    return next((ci, pi) for ci, c in enumerate(doc["chunks"]) for pi, p in enumerate(c["parts"]) if p[0] == stream)
