"""Tiny raw recordings for ingestion tests: ROS 2 CDR MCAP files, and a landing zone with a
mix of good and malformed items (64x48 frames, ~2 s)."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
from mcap.writer import Writer
from PIL import Image

from robodata.ingest.synth import SynthConfig, synthesize
from robodata.ingest.synth.scene import SceneRenderer

SMALL = dict(duration_s=2.0, height=48, width=64, fps=10.0, state_hz=50.0)


def write_ros2_mcap(
    path: Path,
    seconds: float = 2.0,
    fps: float = 10.0,
    raw_image: bool = False,
    extra_topic: str | None = "/gripper/force",
    unknown_topic: str | None = None,
    stamp_jump_at: int | None = None,
) -> Path:
    """sensor_msgs CompressedImage (or Image) + JointState + a Float32MultiArray topic, CDR-encoded."""
    from rosbags.typesys import Stores, get_typestore

    ts = get_typestore(Stores.ROS2_HUMBLE)
    T = ts.types
    Time, Header = T["builtin_interfaces/msg/Time"], T["std_msgs/msg/Header"]
    rend = SceneRenderer(48, 64, seed=1)
    base = 1_764_000_000_000_000_000
    msgs = []
    n = int(seconds * fps)
    for i in range(n):
        t = base + int(i * 1e9 / fps)
        rgb = rend.render(i / fps, np.array([0.2 * np.sin(i / 5), 0.1, 0.1]), i > n // 2)
        st = t - 3_000_000  # device stamp 3 ms before receive
        if stamp_jump_at is not None and i == stamp_jump_at:
            st -= 500_000_000  # clock steps back: non-monotonic
        hdr = Header(Time(st // 10**9, st % 10**9), "cam")
        if raw_image:
            m = T["sensor_msgs/msg/Image"](hdr, 48, 64, "rgb8", 0, 64 * 3, rgb.reshape(-1).copy())
            msgs.append(("/cam_front/image_raw", "sensor_msgs/msg/Image", t, m))
        else:
            buf = io.BytesIO()
            Image.fromarray(rgb).save(buf, format="JPEG", quality=90)
            m = T["sensor_msgs/msg/CompressedImage"](hdr, "jpeg", np.frombuffer(buf.getvalue(), np.uint8).copy())
            msgs.append(("/cam_front/image/compressed", "sensor_msgs/msg/CompressedImage", t, m))
    for i in range(int(seconds * 50)):
        t = base + int(i * 2e7)
        q = np.array([0.3 * np.sin(i / 20), 0.1, -0.2, 0.0], np.float64)
        m = T["sensor_msgs/msg/JointState"](
            Header(Time(t // 10**9, t % 10**9), "arm"), ["a", "b", "c", "d"], q, np.zeros(4), q * 2
        )
        msgs.append(("/joint_states", "sensor_msgs/msg/JointState", t, m))
        if extra_topic and i % 5 == 0:
            arr = T["std_msgs/msg/Float32MultiArray"](
                T["std_msgs/msg/MultiArrayLayout"]([], 0), np.array([1.0 + i / 100, 2.0], np.float32)
            )
            msgs.append((extra_topic, "std_msgs/msg/Float32MultiArray", t, arr))
        if unknown_topic and i % 10 == 0:
            msgs.append((unknown_topic, "std_msgs/msg/String", t, T["std_msgs/msg/String"]("x")))
    msgs.sort(key=lambda m: m[2])
    with open(path, "wb") as f:
        w = Writer(f)
        w.start(profile="ros2", library="robodata-test")
        chans: dict[str, int] = {}
        for topic, typ, t, m in msgs:
            if topic not in chans:
                sid = w.register_schema(typ, "ros2msg", ts.generate_msgdef(typ)[0].encode())
                chans[topic] = w.register_channel(topic, "cdr", sid)
            w.add_message(chans[topic], log_time=t, publish_time=t, data=bytes(ts.serialize_cdr(m, typ)))
        w.finish()
    return path


def malformed_landing(root: Path) -> dict[str, str]:
    """Two good legacy episodes, one with a broken JPEG, one with a backwards clock, one good and
    one truncated MCAP, one MCAP with an unknown topic. Returns {case: item name}."""
    root.mkdir(parents=True, exist_ok=True)
    eps = synthesize(SynthConfig(episodes=4, **SMALL), root)
    bad_jpeg, backwards = eps[2], eps[3]
    victim = sorted((bad_jpeg / "wrist").glob("*.jpg"))[5]
    victim.write_bytes(victim.read_bytes()[:64])
    ts_file = backwards / "cam_left" / "timestamps.csv"
    lines = ts_file.read_text().split()
    vals = [int(x) for x in lines[1:]]
    vals[8] = vals[2]  # goes back in time
    ts_file.write_text("t_ns\n" + "\n".join(map(str, vals)) + "\n")
    good = write_ros2_mcap(root / "ros-good.mcap")
    data = good.read_bytes()
    (root / "ros-truncated.mcap").write_bytes(data[: len(data) // 2])
    write_ros2_mcap(root / "ros-unknown.mcap", unknown_topic="/mystery")
    return {
        "good_a": eps[0].name,
        "good_b": eps[1].name,
        "bad_jpeg": bad_jpeg.name,
        "backwards": backwards.name,
        "mcap_good": "ros-good.mcap",
        "mcap_truncated": "ros-truncated.mcap",
        "mcap_unknown": "ros-unknown.mcap",
    }


def copy_tree(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst
