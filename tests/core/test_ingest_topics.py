"""Topic maps (issue 23): nested camera names, structured messages flattened to named vectors,
rules from a YAML file."""

from __future__ import annotations

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore

from robodata.errors import ConfigError
from robodata.ingest.flatten import flatten
from robodata.ingest.settings import IngestSettings
from robodata.ingest.topics import TopicMap, load_topics

T = get_typestore(Stores.ROS2_HUMBLE).types


def _hdr():
    return T["std_msgs/msg/Header"](stamp=T["builtin_interfaces/msg/Time"](sec=1, nanosec=2), frame_id="base")


def test_nested_camera_topics_are_cameras_named_by_their_path():
    tm = TopicMap.default()
    for topic, stream in (
        ("/camera/color/image_raw", "camera_color"),
        ("/zed2/left/image_rect_color", "zed2_left"),
        ("/cam0/image_raw", "cam0"),
        ("/wrist/image/compressed", "wrist"),
        ("/camera/depth/image_rect_raw/compressed", "camera_depth"),
    ):
        hit = tm.resolve(topic)
        assert hit is not None and hit[0].kind == "video" and hit[1] == stream, topic
    assert tm.resolve("/camera/color/camera_info") is None


def test_structured_messages_flatten_to_named_vectors():
    V3, Q = T["geometry_msgs/msg/Vector3"], T["geometry_msgs/msg/Quaternion"]
    imu = T["sensor_msgs/msg/Imu"](
        header=_hdr(),
        orientation=Q(x=0.0, y=0.0, z=0.0, w=1.0),
        orientation_covariance=np.zeros(9),
        angular_velocity=V3(x=1.0, y=2.0, z=3.0),
        angular_velocity_covariance=np.zeros(9),
        linear_acceleration=V3(x=0.0, y=0.0, z=9.8),
        linear_acceleration_covariance=np.zeros(9),
    )
    names, values = flatten(imu)
    assert names[:4] == ["orientation.x", "orientation.y", "orientation.z", "orientation.w"]
    assert len(names) == 10 and values[4:7] == [1.0, 2.0, 3.0]  # covariances and header skipped
    tf = T["geometry_msgs/msg/TransformStamped"](
        header=_hdr(),
        child_frame_id="tool",
        transform=T["geometry_msgs/msg/Transform"](translation=V3(x=1.0, y=2.0, z=3.0), rotation=Q(x=0, y=0, z=0, w=1)),
    )
    names, values = flatten(tf)
    assert names[0] == "transform.translation.x" and len(names) == 7 and values[-1] == 1.0
    js = T["sensor_msgs/msg/JointState"](
        header=_hdr(), name=["a", "b"], position=np.array([0.5, 0.6]), velocity=np.zeros(2), effort=np.zeros(0)
    )
    names, values = flatten(js)
    assert names == ["position.a", "position.b", "velocity.a", "velocity.b"] and values[:2] == [0.5, 0.6]
    assert flatten({"pose": {"position": {"x": 1, "y": 2}}})[0] == ["pose.position.x", "pose.position.y"]


def test_topics_file_rules_come_first_and_bad_files_name_the_rule(tmp_path):
    f = tmp_path / "topics.yaml"
    f.write_text(
        "rules:\n"
        "  - {topic: '/imu/data', kind: vector, stream: imu}\n"
        "  - {topic: '/(?P<name>[a-z]+)/rgb', kind: video}\n"
    )
    rules = load_topics(str(f))
    assert [r.kind for r in rules] == ["vector", "video"]
    tm = IngestSettings(topics_file=str(f)).topic_map
    assert tm.resolve("/imu/data")[1] == "imu" and tm.resolve("/front/rgb")[1] == "front"  # type: ignore[index]
    f.write_text("rules:\n  - {topic: '/x', kind: nonsense}\n")
    with pytest.raises(ConfigError, match="rule 0"):
        IngestSettings(topics_file=str(f))
    f.write_text("- {topic: '/x', kind: video, colour: red}\n")
    with pytest.raises(ConfigError, match="colour"):
        load_topics(str(f))
