"""Real public bags (bench.realdata_bags: SOURCE.md per fixture) read by robodata, every value and
sample time checked against rosbags reading the same bytes: a camera-less ROS 1 bag, and two ROS 2
Humble bags of one vendor type in two layouts decoded through `--msgs` candidates. Skipped, saying
where the fixtures were looked for, when they are not on this machine."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

from bench.realdata_bags import BAGS, Bag, read_bag, real_root
from robodata.ingest import formats
from robodata.ingest.align import aligned_tracks
from robodata.ingest.importers import open_raw
from robodata.ingest.qc import ALL_CHECKS, DEFAULT_BLOCKING, QCThresholds, evaluate_pre
from robodata.ingest.raw import RawEpisodeError
from robodata.ingest.settings import IngestSettings

ROOT = real_root()
pytestmark = pytest.mark.skipif(
    ROOT is None,
    reason="real bag fixtures not found ($ROBODATA_REAL_DATA, tests/data/real, ../shared/real, ../../shared/real)",
)


def _settings(bag: Bag, tmp_path, msgs: str | None = None) -> IngestSettings:
    assert ROOT is not None
    m = msgs if msgs is not None else (str(ROOT / bag.msgs) if bag.msgs else "")
    return IngestSettings(topics_file=str(ROOT / bag.topics), msgs=m)


def _open(bag: Bag, s: IngestSettings, entry=None):
    assert ROOT is not None
    path = entry or ROOT / bag.entry
    fmt = formats.claim_local(path)
    assert fmt is not None and fmt.kind == bag.format
    return open_raw(str(path), fmt.kind, options=s.import_options)


@pytest.mark.parametrize("bag", BAGS, ids=lambda b: b.name)
def test_every_value_and_sample_time_is_the_bags(bag, tmp_path):
    assert ROOT is not None
    want = read_bag(ROOT / bag.entry, bag, ROOT)
    raw = _open(bag, _settings(bag, tmp_path))
    got = raw.arrays[bag.stream]
    assert got.names == want.names
    assert np.array_equal(got.t_ns + raw.epoch_ns, want.t_ns)
    assert got.values.shape == want.values.shape and np.array_equal(got.values.astype(np.float64), want.values)
    assert list(raw.cameras) == [] and set(raw.arrays) == {bag.stream}
    al = aligned_tracks(raw)
    t = al.timing[bag.stream]
    dt = np.diff(want.t_ns)
    assert t.count == len(want.t_ns) and t.nonmonotonic == int((dt <= 0).sum()) == 0
    # on the aligned timeline: the stamps' rate up to the clock fit's drift (ppm)
    assert t.measured_hz == pytest.approx(1e9 / np.median(dt[dt > 0]), rel=abs(t.clock_drift_ppm) * 1e-6 + 1e-5)
    failed = {o.check: o.reason for o in evaluate_pre(al, "", ALL_CHECKS, QCThresholds()) if not o.passed}
    assert not set(failed) & set(DEFAULT_BLOCKING), failed


def test_each_vicon_bag_names_the_candidate_it_decoded_by(tmp_path):
    for bag in BAGS:
        if not bag.msgs:
            continue
        raw = _open(bag, _settings(bag, tmp_path))
        assert [i for i in raw.issues if i.startswith("msgdef:")] == [
            f"msgdef:vicon_receiver/msg/Position: {ROOT / bag.reader_msg}"
        ]


def test_one_definition_cannot_read_both_and_says_which_type_and_file(tmp_path):
    """--msgs holding only the header-less definition: the later bag fails naming the type and the
    .msg file tried (rosbags alone says `SerdeError: Invalid string length`)."""
    assert ROOT is not None
    headed = next(b for b in BAGS if b.name == "ros2_vicon_go2_header")
    only = tmp_path / "msgs" / "v" / "vicon_receiver" / "msg"
    only.mkdir(parents=True)
    (only / "Position.msg").write_text(
        (ROOT / "ros2_vicon_go2/msgs/2020-no-header/vicon_receiver/msg/Position.msg").read_text()
    )
    with pytest.raises(RawEpisodeError) as e:
        _open(headed, _settings(headed, tmp_path, str(tmp_path / "msgs")))
    msg = str(e.value)
    assert "vicon_receiver/msg/Position" in msg and str(only / "Position.msg") in msg and "--msgs" in msg


def test_a_real_clock_stepping_back_is_named_from_its_stamps(tmp_path):
    """The real 305 Hz Vicon bag with its header stamps moved back 4.7 s from sample 4000 on (as a
    receiver restart does), rewritten with rosbags: the jump is named with its size and sample, and
    the rate is the stamps', not a fit's across the step."""
    from rosbags.rosbag2 import Reader, Writer
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    assert ROOT is not None
    bag = next(b for b in BAGS if b.name == "ros2_vicon_go2_header")
    store = get_typestore(Stores.ROS2_HUMBLE)
    store.register(get_types_from_msg((ROOT / bag.reader_msg).read_text(), "vicon_receiver/msg/Position"))
    out, k, stamps = tmp_path / "vicon_jump", 4000, []
    with Reader(ROOT / bag.entry) as r, Writer(out, version=8) as w:
        conn = w.add_connection(bag.topic, "vicon_receiver/msg/Position", typestore=store)
        shift = 0
        for i, (c, t, raw) in enumerate(r.messages()):
            m = store.deserialize_cdr(raw, c.msgtype)
            ns = m.header.stamp.sec * 10**9 + m.header.stamp.nanosec
            if i == k:
                shift = 4_700_000_000 + (ns - stamps[-1])  # the step lands exactly 4.7 s back
            ns -= shift
            m.header.stamp.sec, m.header.stamp.nanosec = ns // 10**9, ns % 10**9
            stamps.append(ns)
            w.write(conn, t, store.serialize_cdr(m, c.msgtype))
    for db in out.glob("*.db3"):  # as Humble records: no definitions inside
        with sqlite3.connect(db) as con:
            con.execute("DELETE FROM message_definitions")
    raw = _open(bag, _settings(bag, tmp_path), entry=out)
    al = aligned_tracks(raw)
    t = al.timing[bag.stream]
    dt = np.diff(np.asarray(stamps))
    assert t.jumps == 1 and t.jump_back and t.jump_at == k and t.jump_s == pytest.approx(4.7, abs=1e-9)
    assert t.measured_hz == pytest.approx(1e9 / np.median(dt[dt > 0]), rel=1e-12)
    reason = dict((o.check, o.reason) for o in evaluate_pre(al, "", ALL_CHECKS, QCThresholds()))["clock_continuous"]
    assert f"largest 4.700 s back at sample {k} of {len(stamps)}" in reason
