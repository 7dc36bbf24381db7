"""Synthetic corpora for bench.mixing and its tests: episodes shaped like four public formats, each
with its own camera names, state / action names and widths and rates, written as containers and
catalogued with the ingest's own row builder (robodata.ingest.steps.episode_metadata.container_row).

    aloha   (lerobot-like)  cam_high + cam_left_wrist at 20 fps, observation_state / action 14-d at 50 Hz
    bridge  (rlds-like)     image_0 at 5 fps, state / action 7-d at 5 Hz, an instruction
    pusht   (zarr-like)     image at 10 fps, state / action 2-d at 10 Hz
    go2     (ros2-like)     no camera, joint_pos 12-d at 100 Hz, cmd 12-d at 50 Hz (robodata's names)

Values are a pure function of (corpus, episode, step): a test can tell any two samples apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from robodata.container import EpisodeMeta, EpisodeReader, EpisodeWriter, Layout, StreamSpec, TopicGroup, VideoSettings

H, W = 32, 48


@dataclass(frozen=True)
class Corpus:
    name: str  # source_dataset
    source: str  # source_format
    robot_type: str
    cameras: tuple[str, ...]
    fps: float
    state: tuple[str, int, float]  # (stream, width, rate)
    action: tuple[str, int, float]
    roles: bool  # the source declares the state / action (meta.extra.roles)
    language: str = ""


CORPORA = (
    Corpus(
        "aloha_sim",
        "lerobot",
        "aloha",
        ("cam_high", "cam_left_wrist"),
        20.0,
        ("observation_state", 14, 50.0),
        ("action", 14, 50.0),
        True,
    ),
    Corpus(
        "bridge",
        "rlds",
        "widowx",
        ("image_0",),
        5.0,
        ("state", 7, 5.0),
        ("action", 7, 5.0),
        False,
        "put the spoon in the pot",
    ),
    Corpus("pusht", "zarr", "pusht", ("image",), 10.0, ("state", 2, 10.0), ("action", 2, 10.0), False),
    Corpus("go2", "ros2-bag", "go2", (), 0.0, ("joint_pos", 12, 100.0), ("cmd", 12, 50.0), False),
)
ALIASES = {"front": ["cam_high", "image_0", "image", "top"], "wrist": ["cam_left_wrist", "wrist_image"]}


def values(corpus: int, episode: int, stream: int, n: int, width: int) -> np.ndarray:
    """The (n, width) float32 values of one stream: distinct per corpus, episode, stream, step, column."""
    t = np.arange(n, dtype=np.float64)[:, None]
    j = np.arange(width, dtype=np.float64)[None, :]
    return (corpus * 1000 + episode * 10 + stream + np.sin(t * 0.05 + j) * (1 + j)).astype(np.float32)


def write_episode(path: Path, corpus: int, episode: int, duration_s: float) -> None:
    c = CORPORA[corpus]
    eid = f"{c.name}-{episode:04d}"
    streams = {cam: StreamSpec(cam, "video", c.fps, (H, W, 3)) for cam in c.cameras}
    for name, width, rate in (c.state, c.action):
        streams[name] = StreamSpec(name, "array", rate, (width,))
    extra: dict = {"source": c.source, "robot_type": c.robot_type, "source_dataset": c.name}
    if c.language:
        extra["language"] = c.language
    if c.roles:
        extra["roles"] = {"state": c.state[0], "action": c.action[0]}
    start = int(datetime(2024, 3, 1, tzinfo=UTC).timestamp() * 1e9) + episode * 10**9
    meta = EpisodeMeta(eid, f"{c.robot_type}-1", "lab", "mix", start, streams, extra=extra)
    groups = [TopicGroup("proprio", (c.state[0], c.action[0]), 2.0)]
    if c.cameras:
        groups.insert(0, TopicGroup("cameras", c.cameras, 1.0, VideoSettings(gop=max(2, int(c.fps)), crf=30)))
    with EpisodeWriter(path, meta, Layout(groups=tuple(groups))) as w:
        if c.cameras:
            n = int(duration_s * c.fps)
            for i in range(n):
                for k, cam in enumerate(c.cameras):
                    rgb = np.full((H, W, 3), (40 + 20 * k + i) % 255, np.uint8)
                    rgb[:, : (i % W)] = 200
                    w.write_frame(cam, rgb, int(i * 1e9 / c.fps))
        for s, (name, width, rate) in enumerate((c.state, c.action)):
            n = int(duration_s * rate)
            w.write_array(name, (np.arange(n) * 1e9 / rate).astype(np.int64), values(corpus, episode, s, n, width))


def build(root: Path, per_corpus: int, duration_s: float, corpora: tuple[int, ...] = (0, 1, 2, 3)) -> list[dict]:
    """Containers under `root` and their catalog rows (qc pass), as ingest writes them."""
    from robodata.ingest.steps.episode_metadata import container_row

    rows = []
    root.mkdir(parents=True, exist_ok=True)
    for ci in corpora:
        for e in range(per_corpus):
            p = root / f"{CORPORA[ci].name}-{e:04d}.rdep"
            if not p.exists():
                write_episode(p, ci, e, duration_s)
            r = EpisodeReader.open(p)
            row = container_row(r, str(p), "mix")
            r.close()
            rows.append(row | {"qc_status": "pass", "qc_failed": [], "qc_reason": "", "quality_score": 1.0})
    return rows
