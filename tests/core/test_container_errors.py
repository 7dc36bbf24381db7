import numpy as np
import pytest

from robodata.container import EpisodeReader, EpisodeWriter, Layout, StreamSpec, TopicGroup, VideoSettings
from robodata.errors import ContainerError
from tests.core.helpers_container import small_layout, small_meta, write_small


@pytest.fixture()
def episode(tmp_path):
    p = tmp_path / "ep.rdep"
    write_small(p, duration_s=2.0)
    return p


def _flip(p, offset):
    b = bytearray(p.read_bytes())
    b[offset] ^= 0xFF
    p.write_bytes(bytes(b))


def test_corrupted_chunk_names_episode_and_chunk(episode):
    r = EpisodeReader.open(episode)
    c = next(c for c in r.chunks if c.group == "cameras" and c.index > 0)
    _flip(episode, c.offset + c.length // 2)
    r = EpisodeReader.open(episode)
    with pytest.raises(ContainerError) as ei:
        r.read_window(0, 10)
    assert ei.value.episode == "ep-test" and ei.value.chunk == c.index
    assert "checksum" in str(ei.value)
    # reading other chunks still works: corruption stays local
    r.read_window(0, 10, ["joint_pos"])


def test_corrupted_part_detected_on_partial_read(episode):
    r = EpisodeReader.open(episode)
    c = next(c for c in r.chunks if c.group == "cameras")
    part = next(p for p in c.parts if p.stream == "wrist")
    _flip(episode, c.offset + part.offset + part.length // 2)
    with pytest.raises(ContainerError, match="'wrist' checksum"):
        EpisodeReader.open(episode).read_window(0, 10, ["wrist"])


@pytest.mark.parametrize("cut", [1, 30, 5000])
def test_truncated_file(episode, cut):
    b = episode.read_bytes()
    episode.write_bytes(b[:-cut])
    with pytest.raises(ContainerError, match="ep.rdep"):
        EpisodeReader.open(episode)


def test_corrupted_footer(episode):
    r = EpisodeReader.open(episode)
    _flip(episode, r.footer_offset + 10)
    with pytest.raises(ContainerError, match="footer checksum"):
        EpisodeReader.open(episode)


def test_not_a_container(tmp_path):
    p = tmp_path / "x.bin"
    p.write_bytes(b"hello world" * 100)
    with pytest.raises(ContainerError, match="not a robodata container"):
        EpisodeReader.open(p)
    (tmp_path / "empty").write_bytes(b"")
    with pytest.raises(ContainerError):
        EpisodeReader.open(tmp_path / "empty")


def test_writer_rejects_bad_input_and_leaves_no_valid_file(tmp_path):
    meta = small_meta()
    p = tmp_path / "bad.rdep"
    with pytest.raises(ContainerError, match="unknown stream"), EpisodeWriter(p, meta, small_layout()) as w:
        w.write_frame("cam_top", np.zeros((48, 64, 3), np.uint8), 0)
    assert list(tmp_path.iterdir()) == []  # written under a temporary name, removed on abort: nothing at p
    with pytest.raises(ContainerError, match="must increase"), EpisodeWriter(p, meta, small_layout()) as w:
        w.write_frame("cam_left", np.zeros((48, 64, 3), np.uint8), 10)
        w.write_frame("cam_left", np.zeros((48, 64, 3), np.uint8), 10)
    with pytest.raises(ContainerError, match="shape"), EpisodeWriter(p, meta, small_layout()) as w:
        w.write_frame("cam_left", np.zeros((10, 10, 3), np.uint8), 10)
    mixed = Layout(
        groups=(
            TopicGroup("all", ("cam_left", "cam_right", "wrist", "joint_pos", "cmd", "events"), 1.0, VideoSettings()),
        )
    )
    with pytest.raises(ContainerError, match="never mix"):
        EpisodeWriter(p, meta, mixed)


@pytest.mark.parametrize(
    ("call", "why"),
    [
        (lambda w: w.write_array("joint_pos", [0, 1], np.zeros((2, 6))), "do not match"),
        (lambda w: w.write_array("joint_pos", [[0, 1]], np.zeros((2, 7))), "timestamps"),
        (lambda w: w.write_array("joint_pos", ["a", "b"], np.zeros((2, 7))), "timestamps"),
        (lambda w: w.write_array("joint_pos", [0, float("nan")], np.zeros((2, 7))), "timestamps"),
        (lambda w: w.write_array("joint_pos", [0, 1], [["x"] * 7] * 2), "convert"),
        (lambda w: w.write_array("joint_pos", [5, 1], np.zeros((2, 7))), "not sorted"),
        (lambda w: w.write_array("events", [0], np.zeros((1, 7))), "is events"),
        (lambda w: w.write_events("events", [0, 1], ["a"]), "labels"),
        (lambda w: w.write_events("events", [0], [3]), "strings"),
        (lambda w: w.write_events("events", [0], ["a"], [{"x": object()}]), "JSON"),
        (lambda w: w.write_frame("cam_left", np.zeros((48, 64, 3), np.uint8), "soon"), "not an integer"),
        (lambda w: w.write_frame("cam_left", np.zeros((48, 64, 3), np.float32), 0), "uint8"),
    ],
)
def test_every_bad_write_is_a_container_error(tmp_path, call, why):
    w = EpisodeWriter(tmp_path / "x.rdep", small_meta(), small_layout())
    with pytest.raises(ContainerError, match=why) as ei:
        call(w)
    assert ei.value.episode == "ep-test"
    w.close()
    with pytest.raises(ContainerError, match="closed"):
        w.write_array("joint_pos", [0], np.zeros((1, 7)))


def test_writer_refuses_unsafe_stream_names_and_chunks_no_reader_decodes(tmp_path):
    meta = small_meta()
    meta.streams["a/../b"] = StreamSpec("a/../b", "array", 10.0, (1,))
    layout = Layout(groups=(*small_layout().groups, TopicGroup("x", ("a/../b",), 1.0)))
    with pytest.raises(ContainerError, match="stream name"):
        EpisodeWriter(tmp_path / "x.rdep", meta, layout)
    meta = small_meta()
    meta.streams["wide"] = StreamSpec("wide", "array", 10.0, (1 << 29,))
    layout = Layout(groups=(*small_layout().groups, TopicGroup("x", ("wide",), 1.0)))
    with pytest.raises(ContainerError, match="max_decode_bytes"):
        EpisodeWriter(tmp_path / "x.rdep", meta, layout)


def test_unknown_stream_in_window(episode):
    r = EpisodeReader.open(episode)
    with pytest.raises(ContainerError, match="no stream 'lidar'") as ei:
        r.read_window(0, 1, ["lidar"])
    assert ei.value.episode == "ep-test" and ei.value.path == str(episode)
    for bad in ({"every": 0}, {"every": 1.5}):
        with pytest.raises(ContainerError, match="every"):
            r.read_window(0, 1, ["joint_pos"], **bad)
    with pytest.raises(ContainerError, match="NaN"):
        r.read_window(float("nan"), 1, ["joint_pos"])
    assert len(r.read_window(-float("inf"), float("inf"), ["joint_pos"])["joint_pos"].t) == 200


def test_inspect_cli(episode):
    from typer.testing import CliRunner

    from robodata.cli import app

    res = CliRunner().invoke(app, ["inspect", str(episode), "--verify"])
    assert res.exit_code == 0, res.output
    assert "ep-test" in res.output and "verified" in res.output and "cameras" in res.output
    _flip(episode, 100)
    res = CliRunner().invoke(app, ["inspect", str(episode), "--verify"])
    assert res.exit_code == 2 and "chunk 0" in res.output
