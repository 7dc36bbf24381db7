"""Write a synthetic episode as a ROS 1 `.bag` or a ROS 2 bag folder, with rosbags' own writers.

Log (receive) time and header stamp are the device time, or the stamp `SynthEpisode.stamps` gives.
ROS 1: sensor_msgs/CompressedImage per camera (`/<cam>/image/compressed`) and
sensor_msgs/JointState (`/joint_states`); ROS 1 bags embed their definitions.
ROS 2 with vendor messages: the joints as `robodata_vendor/msg/ArmState` (not a standard type)
in a `.db3` bag whose definitions are removed, as Humble writes them; the matching `.msg`
files go to `<msgs>/robodata_vendor/msg/ArmState.msg` (what `robodata ingest --msgs` takes).
"""

from __future__ import annotations

import shutil
import sqlite3
from datetime import datetime
from pathlib import Path

import numpy as np

from robodata.ingest.synth.episode import SynthEpisode, jpeg_bytes

ARM_STATE_MSG = """std_msgs/Header header
string[] name
float64[] position
float64[] effort
float64[] command
"""
ARM_STATE = "robodata_vendor/msg/ArmState"
# the same type as an older firmware wrote it: no header (sample time = receive time). With both
# under `--msgs` (one subfolder each) every recording decodes by its own (robodata.ingest.importers.msgdefs)
ARM_STATE_MSG_V0 = ARM_STATE_MSG.removeprefix("std_msgs/Header header\n")


def _base(ep: SynthEpisode) -> int:
    return int(datetime.fromisoformat(ep.meta["start_time"]).timestamp() * 1e9)


def _messages(ep: SynthEpisode, store, quality: int, joint_type: str, ros1: bool, headed: bool = True):
    """(topic, msgtype, t_ns, message) in time order per topic."""
    T = store.types
    Time, Header = T["builtin_interfaces/msg/Time"], T["std_msgs/msg/Header"]

    def header(t: int, frame: str):
        stamp = Time(sec=t // 1_000_000_000, nanosec=t % 1_000_000_000)
        return Header(seq=0, stamp=stamp, frame_id=frame) if ros1 else Header(stamp=stamp, frame_id=frame)

    base = _base(ep)
    img_t = "sensor_msgs/msg/CompressedImage"
    for cam in ep.frame_t:
        stamps = ep.stamps.get(cam)
        for i, (t, rgb) in enumerate(ep.frames(cam)):
            t += base
            st = t if stamps is None else int(stamps[i]) + base
            data = np.frombuffer(jpeg_bytes(rgb, quality), np.uint8)
            yield f"/{cam}/image/compressed", img_t, t, T[img_t](header=header(st, cam), format="jpeg", data=data)
    names = list(ep.meta["state"]["joint_names"])
    for i, t in enumerate(ep.state_t + base):
        t = int(t)
        pos, cur, cmd = (a[i].astype(np.float64) for a in (ep.joint_pos, ep.joint_cur, ep.cmd))
        if joint_type == ARM_STATE:
            kw = {"header": header(t, "")} if headed else {}
            msg = T[ARM_STATE](**kw, name=names, position=pos, effort=cur, command=cmd)
        else:
            vel = np.zeros_like(pos)
            msg = T[joint_type](header=header(t, ""), name=names, position=pos, velocity=vel, effort=cur)
        yield "/joint_states", joint_type, t, msg


def write_ros1_bag(ep: SynthEpisode, root: Path, quality: int = 90) -> Path:
    from rosbags.rosbag1 import Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS1_NOETIC)
    path = root / f"{ep.episode_id}.bag"
    tmp = root / f"{ep.episode_id}.bag.partial"
    tmp.unlink(missing_ok=True)
    with Writer(tmp) as w:
        conns: dict[str, object] = {}
        for topic, typ, t, msg in sorted(
            _messages(ep, store, quality, "sensor_msgs/msg/JointState", True), key=lambda m: m[2]
        ):
            if topic not in conns:
                conns[topic] = w.add_connection(topic, typ, typestore=store)
            w.write(conns[topic], t, store.serialize_ros1(msg, typ))  # type: ignore[arg-type]
    tmp.rename(path)
    return path


def write_vendor_msgs(msgs: Path) -> Path:
    d = msgs / "robodata_vendor" / "msg"
    d.mkdir(parents=True, exist_ok=True)
    (d / "ArmState.msg").write_text(ARM_STATE_MSG)
    return msgs


def write_ros2_bag_custom(ep: SynthEpisode, root: Path, msgs: Path, quality: int = 90, v0: bool = False) -> Path:
    """A ROS 2 bag (sqlite3) whose joint topic is a vendor type, its definitions stripped; `v0`: the
    type's older layout (ARM_STATE_MSG_V0, also written to `<msgs>/v0/robodata_vendor/msg/`)."""
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    store.register(get_types_from_msg(ARM_STATE_MSG_V0 if v0 else ARM_STATE_MSG, ARM_STATE))
    write_vendor_msgs(msgs)
    if v0:
        d = msgs / "v0" / "robodata_vendor" / "msg"
        d.mkdir(parents=True, exist_ok=True)
        (d / "ArmState.msg").write_text(ARM_STATE_MSG_V0)
    path = root / ep.episode_id
    tmp = root / f"{ep.episode_id}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    with Writer(tmp, version=8) as w:
        conns: dict[str, object] = {}
        for topic, typ, t, msg in sorted(_messages(ep, store, quality, ARM_STATE, False, not v0), key=lambda m: m[2]):
            if topic not in conns:
                conns[topic] = w.add_connection(topic, typ, typestore=store)
            w.write(conns[topic], t, store.serialize_cdr(msg, typ))  # type: ignore[arg-type]
    for db in tmp.glob("*.db3"):  # Humble bags embed no message definitions
        with sqlite3.connect(db) as con:
            con.execute("DELETE FROM message_definitions")
    tmp.rename(path)
    return path
