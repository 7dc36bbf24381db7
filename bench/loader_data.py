"""The loader benchmark's episode set, in three layouts on local disk (cached in .bench/):

robodata     one .rdep container per episode (cameras in 1 s GOP-aligned chunks, H.264
             GOP 30 with 2 fixed non-reference B-frames, CRF 23; proprio in 2 s chunks)
jpeg         the legacy layout: <cam>/NNNNNN.jpg per frame (quality 90) + state.parquet
mp4          LeRobot-style: <cam>.mp4 per camera (H.264 GOP 2, CRF 23) + state.parquet
interleaved  the same packets and samples as one time-ordered stream (for bytes per sample)
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from robodata.container import EpisodeMeta, EpisodeReader, EpisodeWriter, Layout, StreamSpec, TopicGroup, VideoSettings
from robodata.ingest.synth.episode import jpeg_bytes
from robodata.ingest.synth.scene import SceneRenderer

CAMS = ("cam_left", "cam_right", "wrist")
H, W, FPS, STATE_HZ = 480, 640, 30.0, 100.0
PROPRIO = ("joint_pos", "joint_cur", "cmd")
VIDEO = VideoSettings(codec="h264", gop=30, crf=23, preset="veryfast", bframes=2)
LAYOUT = Layout(groups=(TopicGroup("cameras", CAMS, 1.0, VIDEO), TopicGroup("proprio", PROPRIO, 2.0)))
MP4_GOP = 2


@dataclass
class Episode:
    episode_id: str
    dir: Path
    duration_s: float
    n_frames: int

    @property
    def rdep(self) -> Path:
        return self.dir / "episode.rdep"

    @property
    def state(self) -> Path:
        return self.dir / "state.parquet"

    def jpeg(self, cam: str, i: int) -> Path:
        return self.dir / "jpeg" / cam / f"{i:06d}.jpg"

    def mp4(self, cam: str) -> Path:
        return self.dir / "mp4" / f"{cam}.mp4"

    @property
    def interleaved(self) -> Path:
        return self.dir / "interleaved.bin"


def _meta(episode_id: str) -> EpisodeMeta:
    streams = {c: StreamSpec(c, "video", FPS, (H, W, 3)) for c in CAMS}
    for s in PROPRIO:
        streams[s] = StreamSpec(s, "array", STATE_HZ, (7,))
    return EpisodeMeta(episode_id, "robot-b", "site-b", "bench", 0, streams)


def _mp4_writer(path: Path):
    out = av.open(str(path), "w")
    s = out.add_stream("libx264", rate=int(FPS))
    s.width, s.height, s.pix_fmt = W, H, "yuv420p"
    s.options = {
        "crf": "23",
        "preset": "veryfast",
        "x264-params": f"keyint={MP4_GOP}:min-keyint={MP4_GOP}:scenecut=0:bframes=0",
    }
    return out, s


def build_episode(ep: Episode, seed: int) -> None:
    """Render one episode and write it in every layout; `_COMPLETE` marks it done."""
    marker = ep.dir / "_COMPLETE"
    if marker.exists():
        return
    ep.dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    tj = (np.arange(int(ep.duration_s * STATE_HZ)) * 1e9 / STATE_HZ).astype(np.int64)
    freq, phase = rng.uniform(0.3, 1.5, 7), rng.uniform(0, 6, 7)
    joints = (0.6 * np.sin(tj[:, None] / 1e9 * freq + phase)).astype(np.float32)
    cur = (np.gradient(joints, axis=0) * 50).astype(np.float32)
    cmd = np.roll(joints, -5, axis=0)
    rend = {c: SceneRenderer(H, W, seed=seed, view=i) for i, c in enumerate(CAMS)}
    mp4 = {}
    for c in CAMS:
        (ep.dir / "jpeg" / c).mkdir(parents=True, exist_ok=True)
        (ep.dir / "mp4").mkdir(parents=True, exist_ok=True)
        mp4[c] = _mp4_writer(ep.mp4(c))
    with EpisodeWriter(ep.rdep, _meta(ep.episode_id), LAYOUT) as w:
        for i in range(ep.n_frames):
            k = min(len(tj) - 1, int(i / FPS * STATE_HZ))
            for c in CAMS:
                rgb = rend[c].render(i / FPS, joints[k], i > ep.n_frames // 2)
                w.write_frame(c, rgb, int(round(i * 1e9 / FPS)))
                ep.jpeg(c, i).write_bytes(jpeg_bytes(rgb, 90))
                out, s = mp4[c]
                frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
                frame.pts = i
                for p in s.encode(frame):
                    out.mux(p)
        for name, vals in zip(PROPRIO, (joints, cur, cmd), strict=True):
            w.write_array(name, tj, vals)
    for out, s in mp4.values():
        for p in s.encode(None):
            out.mux(p)
        out.close()
    cols = {"t_ns": pa.array(tj)}
    for name, vals in zip(PROPRIO, (joints, cur, cmd), strict=True):
        cols[name] = pa.FixedSizeListArray.from_arrays(pa.array(vals.reshape(-1)), 7)
    pq.write_table(pa.table(cols), ep.state)
    from bench.container import write_interleaved

    index = write_interleaved(ep.interleaved, ep.rdep)
    (ep.dir / "interleaved_index.json").write_text(json.dumps(index))
    marker.write_text("ok")


def build(root: Path, n_episodes: int, seconds: float, processes: int = 2) -> list[Episode]:
    from concurrent.futures import ProcessPoolExecutor

    eps = [
        Episode(f"bench-{i:03d}", root / f"ep{i:03d}_{seconds:g}s", seconds, int(seconds * FPS))
        for i in range(n_episodes)
    ]
    todo = [(e, 100 + i) for i, e in enumerate(eps) if not (e.dir / "_COMPLETE").exists()]
    if todo:
        with ProcessPoolExecutor(min(processes, len(todo))) as pool:
            list(pool.map(build_episode, *zip(*todo, strict=True)))
    return eps


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def storage(eps: list[Episode]) -> dict[str, int]:
    return {
        "robodata": sum(e.rdep.stat().st_size for e in eps),
        "jpeg": sum(dir_bytes(e.dir / "jpeg") + e.state.stat().st_size for e in eps),
        "mp4": sum(dir_bytes(e.dir / "mp4") + e.state.stat().st_size for e in eps),
    }


def manifest(eps: list[Episode], uris: list[str] | None = None) -> pa.Table:
    from robodata.catalog.schema import MANIFEST_SCHEMA

    rates = json.dumps({**{c: FPS for c in CAMS}, **{s: STATE_HZ for s in PROPRIO}}, sort_keys=True)
    rows = []
    for i, e in enumerate(eps):
        r = EpisodeReader.open(e.rdep)
        rows.append(
            {
                "episode_id": e.episode_id,
                "uri": (uris or [str(x.rdep) for x in eps])[i],
                "site": "site-b",
                "task": "bench",
                "duration_s": r.meta.duration_s,
                "num_frames": e.n_frames,
                "num_state_steps": int(e.duration_s * STATE_HZ),
                "cameras": list(CAMS),
                "stream_rates_json": rates,
                "layout_version": r.layout_version,
                "size_bytes": os.path.getsize(e.rdep),
                "footer_offset": r.footer_offset,
                "footer_length": r.footer_length,
                "split": "train",
                "weight": 1.0,
            }
        )
        r.close()
    return pa.Table.from_pylist(rows, schema=MANIFEST_SCHEMA)
