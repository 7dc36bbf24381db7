"""Real public ROS bags for bench.realdata and the tests: where each lies, how it is ingested, and an
independent reader (rosbags, never robodata) giving what it holds.

The bags come from public repositories (each fixture's SOURCE.md: repository, commit, path,
licence, what was cut). Their data lies where bench.realdata_fixtures.REAL finds it;
`real_root()` is None when the bags are not there, and the tests that need them skip saying so.

    ros1_rovio_transform  ROS 1 bag, no camera: geometry_msgs/TransformStamped at 20 Hz (ETH ASL)
    ros2_vicon_go2        two ROS 2 Humble .db3 bags of one vendor type, vicon_receiver/msg/Position,
                          without and with std_msgs/Header (Optimal Robotics Lab), and both .msg
                          definitions (ros2-vicon-receiver) as `--msgs` candidates
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

NAMES = ("ros1_rovio_transform", "ros2_vicon_go2")


def real_root() -> Path | None:
    """The folder holding the bag fixtures' data (every one of NAMES, beside its SOURCE.md), or None."""
    from bench.realdata_fixtures import REAL

    return REAL if all((REAL / n / "landing").is_dir() for n in NAMES) else None


@dataclass(frozen=True)
class Stream:
    """One container stream as the source holds it: sample times (header stamp, else receive time,
    ns since the Unix epoch), values (N, D) and the field names in the order a `vector` rule flattens."""

    t_ns: np.ndarray
    values: np.ndarray
    names: tuple[str, ...]


@dataclass(frozen=True)
class Bag:
    name: str  # fixture key (bench.realdata "datasets")
    format: str  # landing kind
    entry: str  # the landing entry, relative to real_root()
    topics: str  # topic rules, relative to real_root()
    msgs: str  # --msgs folder, relative to real_root() ("" none)
    reader_msg: str  # the .msg the independent reader decodes this bag with ("" the bag's own / built-in)
    topic: str
    stream: str  # the container stream its topic rule makes
    fields: tuple[str, ...]  # dotted fields of the message, in the order they flatten
    label_prefix: str = ""  # what the topic rule's `field` strips from the names

    def read(self, root: Path) -> Stream:
        return read_bag(root / self.entry, self, root)


FIELDS_TF = tuple(f"transform.{a}.{c}" for a, cs in (("translation", "xyz"), ("rotation", "xyzw")) for c in cs)
FIELDS_VICON = ("x_trans", "y_trans", "z_trans", "x_rot", "y_rot", "z_rot", "w", "frame_number")
_VICON = dict(
    format="ros2-bag",
    topics="ros2_vicon_go2/topics.yaml",
    msgs="ros2_vicon_go2/msgs",
    topic="/vicon/UnitreeGo2/UnitreeGo2",
    stream="mocap_UnitreeGo2",
    fields=FIELDS_VICON,
)
BAGS = (
    Bag(
        "ros1_rovio_transform",
        "ros1-bag",
        "ros1_rovio_transform/landing/rovio_example.bag",
        "ros1_rovio_transform/topics.yaml",
        "",
        "",
        "/rovio/transform",
        "rovio_pose",
        FIELDS_TF,
        "transform.",
    ),
    Bag(
        name="ros2_vicon_go2_no_header",
        entry="ros2_vicon_go2/landing/vicon_test_5",
        reader_msg="ros2_vicon_go2/msgs/2020-no-header/vicon_receiver/msg/Position.msg",
        **_VICON,  # type: ignore[arg-type]
    ),
    Bag(
        name="ros2_vicon_go2_header",
        entry="ros2_vicon_go2/landing/vicon_test_6",
        reader_msg="ros2_vicon_go2/msgs/2023-header/vicon_receiver/msg/Position.msg",
        **_VICON,  # type: ignore[arg-type]
    ),
)


def _get(msg: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        msg = getattr(msg, part)
    return msg


def messages(path: Path, bag: Bag, root: Path) -> Iterator[tuple[int, Any]]:
    """(receive time ns, message) of the bag's topic, decoded by rosbags with the definition the
    fixture names (SOURCE.md says which one each bag was recorded with)."""
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS1_NOETIC if bag.format == "ros1-bag" else Stores.ROS2_HUMBLE)
    if bag.reader_msg:
        store.register(get_types_from_msg((root / bag.reader_msg).read_text(), "vicon_receiver/msg/Position"))
    with AnyReader([path], default_typestore=store) as reader:
        conns = [c for c in reader.connections if c.topic == bag.topic]
        for conn, t, raw in reader.messages(connections=conns):
            yield int(t), reader.deserialize(raw, conn.msgtype)


def read_bag(path: Path, bag: Bag, root: Path) -> Stream:
    """The fixture's stream as the source holds it (rosbags)."""
    t, rows = [], []
    for log_t, msg in messages(path, bag, root):
        st = getattr(getattr(msg, "header", None), "stamp", None)
        t.append(log_t if st is None else st.sec * 1_000_000_000 + st.nanosec)
        rows.append([float(_get(msg, f)) for f in bag.fields])
    names = tuple(f.removeprefix(bag.label_prefix) for f in bag.fields)
    return Stream(np.asarray(t, np.int64), np.asarray(rows, np.float64), names)


def __getattr__(name: str) -> Any:
    """FIXTURES: these bags as bench.realdata fixtures (bench.realdata_fixtures.Fixture), where that
    module exists and the bags are found; [] otherwise."""
    if name != "FIXTURES":
        raise AttributeError(name)
    root = real_root()
    try:
        from bench.realdata_fixtures import Episode, Fixture
    except ImportError:
        return []
    if root is None:
        return []

    def reader(bag: Bag):
        def read(path: Path) -> dict[str, Any]:
            s = read_bag(path, bag, root)
            return {"": Episode({}, s.values, None, {bag.stream: s.values})}

        return read

    return [
        Fixture(
            b.name,
            b.format,
            str(root / b.entry),
            reader(b),
            settings={"topics_file": str(root / b.topics)} | ({"msgs": str(root / b.msgs)} if b.msgs else {}),
        )
        for b in BAGS
    ]
