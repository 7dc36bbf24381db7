"""Synthetic episode content on the robot clock, before it is written in any format.

Writers: legacy.py (JPEG folders, the form robots upload today), mcap.py, lerobot.py.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
from PIL import Image

from robodata.config import require
from robodata.ingest.synth.scene import SceneRenderer

JOINT_NAMES = ("shoulder_pan", "shoulder_lift", "elbow", "wrist_1", "wrist_2", "wrist_3", "gripper")
TASKS = ("fold_napkin", "pick_place", "wipe_table", "stack_cups")


@dataclass(frozen=True)
class SynthConfig:
    episodes: int = 4
    duration_s: float = 10.0
    cameras: tuple[str, ...] = ("cam_left", "cam_right", "wrist")
    height: int = 480
    width: int = 640
    fps: float = 30.0
    state_hz: float = 100.0
    jitter_frac: float = 0.05  # timestamp jitter, fraction of the sample period
    clock_offset_max_s: float = 0.05  # per-device clock offset vs the robot clock
    drop_prob: float = 0.0  # probability a frame is dropped
    jpeg_quality: int = 90
    format: str = "jpeg"  # a synth name of a format's registry entry (robodata.ingest.formats.synth_names)
    site: str = "site-a"
    robots: tuple[str, ...] = ("robot-01", "robot-02")
    vendor: str = "inhouse"
    start: str = "2026-11-30T08:00:00+00:00"
    seed: int = 0
    duration_jitter: float = 0.0  # +- fraction of duration per episode (heavy tails come from callers)

    def __post_init__(self) -> None:
        require(self.episodes >= 0, "episodes must be >= 0")
        require(self.duration_s > 0, "duration_s must be > 0")
        require(len(self.cameras) > 0, "need at least one camera")
        require(self.height % 2 == 0 and self.width % 2 == 0, "height and width must be even")
        require(self.fps > 0 and self.state_hz > 0, "rates must be > 0")
        require(0 <= self.jitter_frac < 0.5, "jitter_frac must be in [0, 0.5)")
        require(0 <= self.drop_prob < 1, "drop_prob must be in [0, 1)")
        require(1 <= self.jpeg_quality <= 100, "jpeg_quality must be in [1, 100]")
        from robodata.ingest.formats import synth_names

        require(self.format in synth_names(), f"format must be one of {synth_names()}, got {self.format!r}")


@dataclass
class SynthEpisode:
    """The content of one episode in the robot clock, before it is written in some format."""

    episode_id: str
    meta: dict
    frame_t: dict[str, np.ndarray]  # device clock ns per camera
    state_t: np.ndarray  # robot clock ns
    joint_pos: np.ndarray
    joint_cur: np.ndarray
    cmd: np.ndarray
    events: list[tuple[int, str]]
    offsets_ns: dict[str, int]  # device clock - robot clock
    renderers: dict[str, SceneRenderer] = field(repr=False, default_factory=dict)
    # header stamps per camera where a device stamps other times than it recorded at (a driver whose
    # clock lies: bag writers put these in header.stamp, frame_t stays the receive time); default frame_t
    stamps: dict[str, np.ndarray] = field(default_factory=dict)

    def frames(self, camera: str):
        """Yield (device_t_ns, rgb) for one camera, rendered on demand (memory stays flat)."""
        r = self.renderers[camera]
        off = self.offsets_ns[camera]
        grasp_t = next((t for t, e in self.events if e == "grasp"), None)
        release_t = next((t for t, e in self.events if e == "release"), None)
        for t_dev in self.frame_t[camera]:
            t_robot = int(t_dev) - off
            k = min(len(self.state_t) - 1, int(np.searchsorted(self.state_t, t_robot)))
            held = grasp_t is not None and grasp_t <= t_robot and (release_t is None or t_robot < release_t)
            yield int(t_dev), r.render(t_robot / 1e9, self.joint_pos[k], held)


def make_episode(cfg: SynthConfig, index: int) -> SynthEpisode:
    rng = np.random.default_rng([cfg.seed, index])
    robot = cfg.robots[index % len(cfg.robots)]
    task = TASKS[index % len(TASKS)]
    start = datetime.fromisoformat(cfg.start) + timedelta(minutes=7 * index)
    episode_id = f"{cfg.site}-{robot}-{start:%Y%m%dT%H%M%S}-{index:05d}"
    duration = cfg.duration_s * (1 + cfg.duration_jitter * rng.uniform(-1, 1))
    n_state = int(duration * cfg.state_hz)
    period = 1e9 / cfg.state_hz
    state_t = (np.arange(n_state) * period + rng.normal(0, cfg.jitter_frac * period / 3, n_state)).astype(np.int64)
    state_t = np.maximum.accumulate(np.maximum(state_t, 0)) + np.arange(n_state)  # strictly increasing
    ts = state_t / 1e9
    freqs = rng.uniform(0.1, 0.6, len(JOINT_NAMES))
    phases = rng.uniform(0, 2 * np.pi, len(JOINT_NAMES))
    cmd = (0.6 * np.sin(ts[:, None] * 2 * np.pi * freqs + phases)).astype(np.float32)
    joint_pos = np.empty_like(cmd)
    joint_pos[0] = cmd[0]
    for i in range(1, n_state):  # first-order lag tracking the command
        joint_pos[i] = joint_pos[i - 1] + 0.15 * (cmd[i] - joint_pos[i - 1])
    joint_pos += rng.normal(0, 0.002, joint_pos.shape).astype(np.float32)
    joint_cur = (2.0 * (cmd - joint_pos) + 0.3 + rng.normal(0, 0.02, cmd.shape)).astype(np.float32)
    offsets = {c: int(rng.uniform(-1, 1) * cfg.clock_offset_max_s * 1e9) for c in cfg.cameras}
    frame_t = {}
    fperiod = 1e9 / cfg.fps
    for c in cfg.cameras:
        n = int(duration * cfg.fps)
        t = np.arange(n) * fperiod + rng.normal(0, cfg.jitter_frac * fperiod / 3, n)
        keep = rng.random(n) >= cfg.drop_prob
        keep[0] = True
        t_ns = np.maximum(t[keep], 0).astype(np.int64) + offsets[c]
        frame_t[c] = np.maximum.accumulate(t_ns) + np.arange(len(t_ns))
    success = bool(rng.random() < 0.85)
    events = [
        (int(0.05 * duration * 1e9), "task_start"),
        (int(0.3 * duration * 1e9), "grasp"),
        (int(0.7 * duration * 1e9), "release"),
        (int(0.95 * duration * 1e9), "task_success" if success else "task_failure"),
    ]
    meta = {
        "episode_id": episode_id,
        "robot": robot,
        "site": cfg.site,
        "task": task,
        "vendor": cfg.vendor,
        "start_time": start.astimezone(UTC).isoformat(),
        "success": success,
        "cameras": {c: {"fps": cfg.fps, "width": cfg.width, "height": cfg.height} for c in cfg.cameras},
        "state": {
            "rate_hz": cfg.state_hz,
            "joint_names": list(JOINT_NAMES),
            "units": {"joint_pos": "rad", "joint_cur": "A", "cmd": "rad"},
        },
    }
    renderers = {
        c: SceneRenderer(cfg.height, cfg.width, seed=cfg.seed * 1000 + index, view=v) for v, c in enumerate(cfg.cameras)
    }
    return SynthEpisode(episode_id, meta, frame_t, state_t, joint_pos, joint_cur, cmd, events, offsets, renderers)


def jpeg_bytes(rgb: np.ndarray, quality: int = 90) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="JPEG", quality=quality)
    return buf.getvalue()
