"""Bags as real robots record them: topic rules that ignore a topic, a vendor message whose
definition changed between recordings (`--msgs` candidates), a header clock that steps back, and
integer counters in `vector` streams. Values are checked against what was written with rosbags."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from robodata.errors import ConfigError
from robodata.ingest.align import aligned_tracks
from robodata.ingest.importers.bag import open_bag
from robodata.ingest.qc import ALL_CHECKS, QCThresholds, evaluate_pre
from robodata.ingest.raw import RawEpisodeError
from robodata.ingest.topics import TopicMap, TopicRule, load_topics

TYPE = "acme_mocap/msg/Position"  # a name no other test registers (type stores are per process)
PLAIN = "float32 x_trans\nfloat32 y_trans\nstring subject_name\nint32 frame_number\n"
HEADED = "std_msgs/Header header\n" + PLAIN
BASE_NS = 1_700_000_000 * 10**9


def _store(definition: str):
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    store.register(get_types_from_msg(definition, TYPE))
    return store


def write_positions(path: Path, definition: str, stamps_ns: list[int], frame0: int = 100) -> list[tuple]:
    """A Humble-style bag (no definitions inside) of one mocap topic; returns what was written."""
    from rosbags.rosbag2 import Writer

    store = _store(definition)
    cls = store.types[TYPE]
    written = []
    with Writer(path, version=8) as w:
        conn = w.add_connection("/vicon/robot", TYPE, typestore=store)
        for i, st in enumerate(stamps_ns):
            x, y, frame = np.float32(0.25 * i), np.float32(-1.5 + i / 8), frame0 + i
            kw = dict(x_trans=x, y_trans=y, subject_name="robot", frame_number=frame)
            if "header" in definition:
                Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
                kw["header"] = Header(stamp=Time(sec=st // 10**9, nanosec=st % 10**9), frame_id="vicon")
            w.write(conn, BASE_NS + i * 5_000_000, store.serialize_cdr(cls(**kw), TYPE))
            written.append((float(x), float(y), frame))
    for db in path.glob("*.db3"):  # as Humble records: no definitions in the bag
        with sqlite3.connect(db) as con:
            con.execute("DELETE FROM message_definitions")
    return written


def msgs_folder(root: Path, **variants: str) -> Path:
    """`--msgs` with one subfolder per candidate definition of TYPE."""
    for name, text in variants.items():
        d = root / name / "acme_mocap" / "msg"
        d.mkdir(parents=True)
        (d / "Position.msg").write_text(text)
    return root


RULES = TopicMap.default().extended(TopicRule(r"/vicon/robot", "vector", stream="mocap"))


@pytest.fixture(scope="module")
def two_versions(tmp_path_factory):
    """Two recordings of one vendor type: before and after it gained a std_msgs/Header."""
    d = tmp_path_factory.mktemp("versions")
    stamps = [BASE_NS + i * 5_000_000 for i in range(40)]
    old = write_positions(d / "old_bag", PLAIN, stamps)
    new = write_positions(d / "new_bag", HEADED, stamps, frame0=2**24 + 3)
    return d, old, new


def test_msgs_candidates_decode_each_recording_by_its_own_definition(two_versions, tmp_path):
    d, old, new = two_versions
    msgs = msgs_folder(tmp_path / "msgs", v2020=PLAIN, v2023=HEADED)
    for bag, written, used in (("old_bag", old, "v2020"), ("new_bag", new, "v2023")):
        raw = open_bag(str(d / bag), RULES, str(msgs))
        a = raw.arrays["mocap"]
        assert a.names == ("x_trans", "y_trans", "frame_number")
        assert a.values.tolist() == [list(w) for w in written]  # exact, the counter past 2**24 included
        note = [i for i in raw.issues if i.startswith("msgdef:")]
        assert note == [f"msgdef:{TYPE}: {msgs / used / 'acme_mocap/msg/Position.msg'}"]


def test_a_counter_past_2_24_is_stored_exactly_and_small_values_stay_float32(two_versions, tmp_path):
    d, old, new = two_versions
    msgs = msgs_folder(tmp_path / "msgs", v2020=PLAIN, v2023=HEADED)
    assert open_bag(str(d / "old_bag"), RULES, str(msgs)).arrays["mocap"].values.dtype == np.float32
    big = open_bag(str(d / "new_bag"), RULES, str(msgs)).arrays["mocap"].values
    assert big.dtype == np.float64 and [int(v) for v in big[:3, 2]] == [2**24 + 3, 2**24 + 4, 2**24 + 5]
    assert int(np.float32(2**24 + 3)) != 2**24 + 3  # why: float32 cannot hold it


def test_a_wrong_definition_names_the_type_and_the_files_tried(two_versions, tmp_path):
    d, *_ = two_versions
    only_old = msgs_folder(tmp_path / "one", v2020=PLAIN)
    with pytest.raises(RawEpisodeError) as e:
        open_bag(str(d / "new_bag"), RULES, str(only_old))
    msg = str(e.value)
    assert TYPE in msg and str(only_old / "v2020/acme_mocap/msg/Position.msg") in msg and "--msgs" in msg
    neither = msgs_folder(tmp_path / "two", a=PLAIN.replace("int32", "int64"), b="float64 x_trans\n")
    with pytest.raises(RawEpisodeError) as e:
        open_bag(str(d / "old_bag"), RULES, str(neither))
    msg = str(e.value)
    assert f"no candidate definition of {TYPE}" in msg
    assert (
        str(neither / "a/acme_mocap/msg/Position.msg") in msg and str(neither / "b/acme_mocap/msg/Position.msg") in msg
    )


def test_an_ignore_rule_needs_no_stream(two_versions, tmp_path):
    d, *_ = two_versions
    msgs = msgs_folder(tmp_path / "msgs", v2020=PLAIN, v2023=HEADED)
    rules = tmp_path / "topics.yaml"
    rules.write_text("- {topic: /vicon/robot, kind: ignore}\n- {topic: /imu, kind: vector, stream: imu}\n")
    tm = TopicMap.default().extended(*load_topics(str(rules)))
    with pytest.raises(RawEpisodeError, match="no camera or proprio topic") as e:  # ignored, not malformed
        open_bag(str(d / "old_bag"), tm, str(msgs))
    assert "KeyError" not in str(e.value)


def test_a_stream_template_naming_a_group_the_topic_lacks_is_refused_up_front():
    with pytest.raises(ConfigError, match=r"uses \['name'\].*no named group"):
        TopicRule(r"/imu", "vector")
    assert TopicRule(r"/imu", "ignore").match("/imu") == ""
    assert TopicRule(r"/arm/.*", "joint_state").match("/arm/state") == ""  # its streams are joint_pos, ...


def test_a_header_clock_stepping_back_is_named_with_its_size_and_sample(tmp_path):
    """The header stamps jump back 4.7 s at sample 30 while the messages keep arriving at 200 Hz:
    the rate is the stamps' and the reason names the step, not a fit across it."""
    stamps = [BASE_NS + i * 5_000_000 for i in range(60)]
    stamps[30:] = [s - 4_700_000_000 - 5_000_000 for s in stamps[30:]]
    write_positions(tmp_path / "jump_bag", HEADED, stamps)
    msgs = msgs_folder(tmp_path / "msgs", v2023=HEADED)
    raw = open_bag(str(tmp_path / "jump_bag"), RULES, str(msgs))
    al = aligned_tracks(raw)
    t = al.timing["mocap"]
    assert t.jumps == 1 and t.jump_back and t.jump_at == 30 and t.jump_s == pytest.approx(4.7, abs=1e-9)
    assert t.measured_hz == pytest.approx(200.0) and t.nonmonotonic == 1  # the stamps', not a stretched fit's
    checks = {o.check: o for o in evaluate_pre(al, "", ALL_CHECKS, QCThresholds())}
    assert not checks["clock_continuous"].passed
    assert "largest 4.700 s back at sample 30 of 60" in checks["clock_continuous"].reason
    assert checks["rate_within_tolerance"].passed, checks["rate_within_tolerance"].reason


def test_a_camera_less_bag_has_no_frames_to_read(two_versions, tmp_path):
    """Its second pass reads nothing (rosbags and mcap read every topic when asked for none)."""
    d, *_ = two_versions
    raw = open_bag(str(d / "old_bag"), RULES, str(msgs_folder(tmp_path / "msgs", v2020=PLAIN, v2023=HEADED)))
    assert raw.cameras == {} and list(raw.frames()) == []
