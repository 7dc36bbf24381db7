"""Type stores shared across recordings (robodata.ingest.importers.typestores): the generated
deserializers are reused, and sharing never decodes one recording by another's definition."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from robodata.ingest.importers.messages import iter_messages
from robodata.ingest.importers.typestores import shared
from robodata.ingest.raw import RawEpisodeError

TYPE = "acme_probe/msg/Reading"  # a name no other test registers: the shared stores live per process
WIDE = "float64 value\nstring unit\n"
NARROW = "float32 value\n"


def _store(ros: str, definition: str):
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS1_NOETIC if ros == "ros1" else Stores.ROS2_HUMBLE)
    store.register(get_types_from_msg(definition, TYPE))
    return store


def _msg(store, definition: str, i: int):
    cls = store.types[TYPE]
    return cls(value=float(i) + 0.5, unit=f"u{i}") if "unit" in definition else cls(value=float(i) + 0.5)


def write_ros1(path: Path, definition: str, n: int = 3) -> Path:
    from rosbags.rosbag1 import Writer

    store = _store("ros1", definition)
    with Writer(path) as w:
        conn = w.add_connection("/probe", TYPE, typestore=store)
        for i in range(n):
            w.write(conn, 1_000 + i, store.serialize_ros1(_msg(store, definition, i), TYPE))
    return path


def write_ros2(path: Path, definition: str, strip: bool = False, n: int = 3) -> Path:
    from rosbags.rosbag2 import Writer

    store = _store("ros2", definition)
    with Writer(path, version=8) as w:
        conn = w.add_connection("/probe", TYPE, typestore=store)
        for i in range(n):
            w.write(conn, 1_000 + i, store.serialize_cdr(_msg(store, definition, i), TYPE))
    if strip:  # as Humble records: no definitions in the bag
        for db in path.glob("*.db3"):
            with sqlite3.connect(db) as con:
                con.execute("DELETE FROM message_definitions")
    return path


def _values(path: Path) -> list[tuple]:
    return [(m.value, getattr(m, "unit", None)) for _, _, _, m in iter_messages(path)]


def test_a_second_recording_reuses_the_generated_deserializers(tmp_path):
    a = write_ros1(tmp_path / "a.bag", WIDE)
    b = write_ros1(tmp_path / "b.bag", WIDE)
    assert _values(a) == [(0.5, "u0"), (1.5, "u1"), (2.5, "u2")]
    store = shared("ros1").store
    generated = store.get_msgdef(TYPE)
    assert _values(b) == _values(a)
    assert shared("ros1").store is store and store.get_msgdef(TYPE) is generated


@pytest.mark.parametrize("first, second", [(WIDE, NARROW), (NARROW, WIDE)])
def test_recordings_that_define_a_type_differently_each_decode_by_their_own(tmp_path, first, second):
    """The second recording's definition conflicts with the one the shared store holds: it gets a
    store of its own, and the shared one keeps decoding the first definition."""
    write = write_ros2
    a = write(tmp_path / "a", first)
    b = write(tmp_path / "b", second)
    c = write(tmp_path / "c", first)
    want = {WIDE: [(0.5, "u0"), (1.5, "u1"), (2.5, "u2")], NARROW: [(0.5, None), (1.5, None), (2.5, None)]}
    assert _values(a) == want[first]
    assert _values(b) == want[second]
    assert _values(c) == want[first]


def test_a_recording_without_a_definition_never_borrows_another_recordings(tmp_path):
    """A Humble bag that embeds no definition of a vendor type is refused as before, although an
    earlier recording in this process defined that type."""
    write_ros2(tmp_path / "defines", WIDE)
    _values(tmp_path / "defines")
    stripped = write_ros2(tmp_path / "stripped", WIDE, strip=True)
    with pytest.raises(RawEpisodeError, match=f"message type '{TYPE}' is unknown.*--msgs"):
        _values(stripped)


def test_past_the_bound_recordings_get_stores_of_their_own_and_still_decode(tmp_path, monkeypatch):
    """The shared store stops taking recordings' types at MAX_EMBEDDED: a long-lived process fed
    recordings that each define new types does not grow it, and they still decode."""
    from robodata.ingest.importers import typestores

    sh = shared("ros1")
    monkeypatch.setattr(typestores, "MAX_EMBEDDED", len(sh.embedded))
    held = set(sh.store.types)
    other = "acme_probe/msg/Bounded"
    bag = tmp_path / "bounded.bag"
    from rosbags.rosbag1 import Writer
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS1_NOETIC)
    store.register(get_types_from_msg(NARROW, other))
    with Writer(bag) as w:
        conn = w.add_connection("/probe", other, typestore=store)
        w.write(conn, 1_000, store.serialize_ros1(store.types[other](value=4.5), other))
    assert _values(bag) == [(4.5, None)]
    assert set(sh.store.types) == held
