"""bench.robustness semantics: well-formed recordings of every importer family, each with at most one lie.

`write_case(root, msgs, i, family, lie, rng) -> (landing path, Truth)`; the path is a landing
item (a fragment-addressed item's base: file, store or dataset folder, one episode each).

What each family can carry (a format that cannot express a lie gets none of that kind):

    mcap, jpeg  jump, gap; rate: metadata / meta.json cameras.<c>.fps 0, 1e-9 or 3x;
                shape: cameras.<c>.height/width 2x
    lerobot     jump; rate: info.json fps 0, missing, 1e-9 or 3x; shape: features.<c>.shape 2x.
                No gap: frames are the video's packets (a gap would be a re-encode)
    ros1, ros2  jump (+3 h, or the header stamps stepping 4.7 s back while the receive clock goes
                on), gap; rate: header stamps ticking at 3x the receive clock (a bag declares no
                rate); shape: one frame mid-stream at 2x (a bag declares no size). Every other
                clean ros2 bag is written in its vendor type's older layout (no header), both
                layouts under --msgs: each must decode by its own
    aloha       rate: attrs fps 0, < 0, 1e-9, nan, inf, 1e9 or text; shape: one JPEG frame
                mid-stream at 2x (compressed file); count: the streams disagree on the step count
    robomimic   rate: env_args control_freq as above, or a demo `fps` attr 3x it; count: the demo's
                num_samples attr contradicts its arrays. Every other clean file keeps its demo
                groups at the root (no data/ group), as some exporters write them
    zarr        rate: attrs fps as above; count: meta/episode_ends past the data
    rlds        shape: one frame mid-episode at 2x, or features.json declaring 2x; count: is_last
                before the last step, or is_first twice

HDF5, Zarr and RLDS keep no per-sample clock (step i is at i / fps): no clock to jump, a dropped
step is invisible (no jump, no gap). Raw (N, H, W, 3) arrays (robomimic, Zarr) carry their shape
in the array's header: no shape lie. TFDS stores no rate (the key map declares it). A plausible
but wrong declared rate (3x) in a format with no clock is indistinguishable from the truth and is
not injected there: its facts are the declaration, which must be a control rate (0.1 to 1e4 Hz).
Besides the lies, the variations real recordings carry (bench/robustness_semantics_real.py): none is a
lie, each must pass with true facts and only the findings its format earns (`Truth.findings`).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.robustness_semantics_real import FINDINGS, VARIATIONS, lerobot_variation, rlds_no_last, zarr_variation
from robodata.ingest.synth import SynthConfig, SynthEpisode, make_episode
from robodata.ingest.synth.arrays import write_aloha, write_rlds, write_robomimic, write_zarr
from robodata.ingest.synth.legacy import write_jpeg_episode
from robodata.ingest.synth.lerobot import write_lerobot
from robodata.ingest.synth.mcap import write_mcap_episode
from robodata.ingest.synth.ros import write_ros1_bag, write_ros2_bag_custom
from tests.core.helpers_semantics import (
    aloha_replace_frame,
    big_jpeg,
    h5_cut,
    h5_demos_at_root,
    h5_set,
    odd_frame,
    rlds_declare_shape,
    rlds_framing,
    rlds_replace_image,
    robomimic_control_freq,
    stamps_tick,
    zarr_attr,
    zarr_episode_end,
)

FAMILIES = ("mcap", "jpeg", "lerobot", "ros1", "ros2", "aloha", "robomimic", "zarr", "rlds")
_TIMED = ("none", "none", "jump", "gap", "rate", "shape")
LIES = {  # per family, cycled: every lie the format can carry, and the variations real recordings carry
    "mcap": _TIMED,
    "jpeg": _TIMED,
    "lerobot": ("none", "none", "jump", "rate", "shape", "rate", *VARIATIONS["lerobot"]),
    "ros1": _TIMED,
    "ros2": _TIMED,
    "aloha": ("none", "none", "rate", "shape", "count", "rate"),
    "robomimic": ("none", "none", "rate", "count", "rate", "count"),
    "zarr": ("none", "none", "rate", "count", "rate", "count", *VARIATIONS["zarr"]),
    "rlds": ("none", "none", "shape", "count", "shape", "count", *VARIATIONS["rlds"]),
}
EXPECT = {  # the checks a lie may be quarantined (or flagged) by: alignment's, or the importer's / writer's refusal
    "jump": {"clock_continuous"},
    "gap": {"no_frame_gaps"},
    "rate": {"rate_within_tolerance", "readable"},
    "shape": {"readable", "converted"},
    "count": {"readable", "converted"},
}
FPS, STATE_HZ, SECONDS, SIZE = 10.0, 50.0, 5.0, 32
STEP_FPS = 15.0  # declared by the step-array files: not any key map's default, so a fallback shows
VARIATION_CAMERA = "top"  # the LeRobot variations' camera (see _lerobot)
BAD_RATES = (0, -STEP_FPS, 1e-9, float("nan"), float("inf"), 1e9, "fifteen")
STEP_FAMILIES = ("aloha", "robomimic", "zarr", "rlds")
CAMERA = {"robomimic": "cam_image", "zarr": "cam_rgb", "rlds": "cam_image"}  # the key map's stream name


@dataclass
class Truth:
    family: str
    lie: str
    frames: int  # frames per camera after drops
    span_s: float
    fps: float = FPS  # the camera's true rate
    state_hz: float = STATE_HZ  # joint_pos's true rate
    camera: str = "cam"
    shape: tuple[int, int] = (SIZE, SIZE)
    what: str = ""  # the lie, for examples
    findings: frozenset[str] = frozenset()  # non-blocking checks the true recording fails (its format's facts)


def _episode(i: int, family: str, fps: float = FPS) -> SynthEpisode:
    cfg = SynthConfig(
        episodes=1, duration_s=SECONDS, height=SIZE, width=SIZE, fps=fps, state_hz=STATE_HZ, cameras=("cam",), seed=i
    )
    ep = make_episode(replace(cfg, jitter_frac=0.02), 0)
    ep.episode_id = ep.meta["episode_id"] = f"sem-{family}-{i:04d}"
    return ep


def write_case(root: Path, msgs: Path, i: int, family: str, lie: str, rng: random.Random) -> tuple[Path, Truth]:
    if family == "lerobot":
        return _lerobot(root, i, lie, rng)
    if family in STEP_FAMILIES:
        return _steps(root, i, family, lie, _episode(i, family, FPS if family == "rlds" else STEP_FPS), rng)
    ep = _episode(i, family)
    t = ep.frame_t["cam"]
    truth = Truth(family, lie, len(t), 0.0)
    if lie == "gap":
        k = rng.randint(8, 15)
        ep.frame_t["cam"] = t = np.concatenate([t[:10], t[10 + k :]])
        truth.what = f"{k} frames dropped"
    if (
        lie == "jump" and family in ("ros1", "ros2") and (i // (6 * len(FAMILIES))) % 2
    ):  # a receiver restarting its clock
        ep.stamps["cam"] = t.copy()
        ep.stamps["cam"][len(t) // 2 :] -= 4_700_000_000
        truth.what = "header stamps 4.7 s back"
    elif lie == "jump":
        t[len(t) // 2 :] += 3 * 3600 * 10**9
    cam = ep.meta["cameras"]["cam"]
    if lie == "rate" and family in ("mcap", "jpeg"):
        cam["fps"] = rng.choice([0, 1e-9, 3 * FPS])
        truth.what = f"declared {cam['fps']}"
    if lie == "rate" and family in ("ros1", "ros2"):  # a driver stamping frame i at i / (3 * fps)
        stamps_tick(ep, 3.0)
        truth.what = "stamps at 3x"
    if lie == "shape" and family in ("mcap", "jpeg"):
        cam["height"], cam["width"] = 2 * SIZE, 2 * SIZE
    if lie == "shape" and family in ("ros1", "ros2"):
        odd_frame(ep, rng.randint(1, len(t) - 1))
    if family == "mcap":
        path = write_mcap_episode(ep, root)
    elif family == "jpeg":
        path = write_jpeg_episode(ep, root)
    elif family == "ros1":
        path = write_ros1_bag(ep, root)
    else:  # every other clean bag in the vendor type's older layout
        path = write_ros2_bag_custom(ep, root, msgs, v0=lie == "none" and i % 2 == 1)
    truth.frames = len(ep.frame_t["cam"])
    truth.span_s = max(float(t[-1] - t[0]), float(ep.state_t[-1] - ep.state_t[0])) / 1e9
    return path, truth


def _steps(root: Path, i: int, family: str, lie: str, ep: SynthEpisode, rng: random.Random) -> tuple[Path, Truth]:
    """HDF5 ALOHA / robomimic, Zarr, RLDS: one episode per item, steps at the declared rate."""
    n, fps = len(ep.frame_t["cam"]), float(ep.meta["cameras"]["cam"]["fps"])
    truth = Truth(
        family, lie, n, (n - 1) / fps, fps, fps, CAMERA.get(family, "cam"), findings=FINDINGS.get(family, frozenset())
    )
    declared_shape = family == "rlds" and lie == "shape" and rng.random() < 0.5  # features.json, not a frame
    odd = rng.randint(1, n - 1) if lie == "shape" and not declared_shape else -1  # written 2x after the rest
    if odd >= 0:
        truth.what = f"frame {odd} 2x"
    name = f"sem-{family}-{i:04d}"
    bad = BAD_RATES[sum(LIES[family][j % len(LIES[family])] == "rate" for j in range(i // len(FAMILIES))) % 7]
    if family == "aloha":
        path = write_aloha(ep, root, compress=lie == "shape" or i % 4 == 0, index=i)
        if lie == "rate":
            h5_set(path, "/", "fps", bad)
            truth.what = f"attrs fps {bad!r}"
        if odd >= 0:
            aloha_replace_frame(path, odd, big_jpeg(ep, odd))
        if lie == "count":
            h5_cut(path, "action", 3)
            truth.what = "action 3 steps short"
        return path, truth
    if family == "robomimic":
        path = write_robomimic([ep], root, name=name)
        if lie == "rate" and rng.random() < 0.5:
            robomimic_control_freq(path, bad)
            truth.what = f"env_args control_freq {bad!r}"
        elif lie == "rate":
            h5_set(path, "data/demo_0", "fps", 3 * fps)
            truth.what = "demo attrs fps 3x env_args control_freq"
        if lie == "count":
            ns = n + rng.choice([-5, 7])
            h5_set(path, "data/demo_0", "num_samples", ns)
            truth.what = f"num_samples {ns} of {n}"
        if lie == "none" and i % 2:
            h5_demos_at_root(path)
        return path, truth
    if family == "zarr":
        path = write_zarr([ep], root, name=name)
        zarr_variation(path, lie, "cam_rgb")
        if lie == "no_camera":
            truth.camera, truth.frames = "", 0
        if lie == "rate":
            zarr_attr(path, "fps", bad)
            truth.what = f"attrs fps {bad!r}"
        if lie == "count":
            zarr_episode_end(path, 0, n + rng.randint(1, 9))
            truth.what = "episode_ends past the data"
        return path, truth
    path = write_rlds([ep], root, name=name)
    if declared_shape:
        rlds_declare_shape(path, 2 * SIZE, 2 * SIZE)
        truth.what = "features.json shape 2x"
    if odd >= 0:
        rlds_replace_image(path, odd, big_jpeg(ep, odd))
    if lie == "no_last":
        rlds_no_last(path)
        truth.findings |= {"episode_framed"}
    if lie == "count":
        key = rng.choice(["steps/is_last", "steps/is_first"])
        rlds_framing(path, key, n // 2)
        truth.what = f"{key} at step {n // 2}"
    return path, truth


def _lerobot(root: Path, i: int, lie: str, rng: random.Random) -> tuple[Path, Truth]:
    # the variations' camera has a name of its own: with `cam` they would tip which stream rates the
    # presets laid over the whole manifest take, and those would then batch LeRobot's 6-D state with
    # the other families' 7-D one (a loader limit of mixed manifests this section does not test)
    cam = VARIATION_CAMERA if lie in VARIATIONS["lerobot"] else "cam"
    fps = FPS
    n = int(SECONDS * fps)
    d = root / f"sem-lerobot-{i:04d}"
    write_lerobot(d, "v3.0" if lie == "to_last" else "v2.1", episodes=1, frames_per_episode=n, fps=int(fps),
                  height=SIZE, width=SIZE, cameras=(cam,), seed=i)  # fmt: skip
    lerobot_variation(d, lie, n, fps)
    info_p = d / "meta" / "info.json"
    info = json.loads(info_p.read_text())
    video = info["features"][f"observation.images.{cam}"]
    truth = Truth("lerobot", lie, n, (n - 1) / fps, fps, fps, cam, findings=FINDINGS["lerobot"])
    if lie == "rate":
        v = rng.choice([0, None, 1e-9, 3 * FPS])
        video["info"].pop("video.fps", None)
        if v is None:
            info.pop("fps")
        else:
            info["fps"] = v
        truth.what = f"fps {v!r}"
    if lie == "shape":
        video["shape"] = [2 * SIZE, 2 * SIZE, 3]
    info_p.write_text(json.dumps(info))
    if lie == "jump":
        f = d / "data" / "chunk-000" / "episode_000000.parquet"
        t = pq.read_table(f)
        ts = t.column("timestamp").to_numpy().astype(np.float64)
        ts[n // 2 :] += 3 * 3600
        t = t.set_column(t.schema.get_field_index("timestamp"), "timestamp", pa.array(ts, pa.float32()))
        pq.write_table(t, f)
    return d, truth
