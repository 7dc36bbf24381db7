import numpy as np
import pytest

from robodata.container import EpisodeReader
from robodata.container.meta import Layout, TopicGroup, VideoSettings
from tests.core.helpers_container import CAMS, small_layout, write_small


@pytest.fixture(scope="module")
def episode(tmp_path_factory):
    p = tmp_path_factory.mktemp("c") / "ep.rdep"
    data = write_small(p)
    return p, data


def test_window_returns_exact_low_dim_and_close_frames(episode):
    p, data = episode
    r = EpisodeReader.open(p)
    win = r.read_window(1.2, 2.3, ["cam_left", "joint_pos", "cmd", "events"])
    jp = win["joint_pos"]
    m = (data["tj"] >= 1.2e9) & (data["tj"] <= 2.3e9)
    np.testing.assert_array_equal(jp.data, data["joint_pos"][m])
    np.testing.assert_allclose(jp.t, data["tj"][m] / 1e9)
    assert win["cmd"].data.shape == (int(((data["tc"] >= 1.2e9) & (data["tc"] <= 2.3e9)).sum()), 7)
    assert list(win["events"].data) == ["grasp"]
    cam = win["cam_left"]
    fm = (data["t_frames"] >= 1.2e9) & (data["t_frames"] <= 2.3e9)
    assert cam.data.dtype == np.uint8 and cam.data.shape == (fm.sum(), 48, 64, 3)
    np.testing.assert_allclose(cam.t, data["t_frames"][fm] / 1e9)
    err = np.abs(cam.data.astype(int) - data["frames"]["cam_left"][fm].astype(int)).mean()
    assert err < 6, err  # lossy, but the same picture
    # frames differ over time (moving scene), so a wrong frame index would show up
    other = np.abs(cam.data[0].astype(int) - data["frames"]["cam_left"][fm][-1].astype(int)).mean()
    assert other > err


def test_every_chunk_holds_one_group_and_video_parts_start_on_keyframes(episode):
    from robodata.codecs.arrays import decode_packets

    p, _ = episode
    r = EpisodeReader.open(p)
    for c in r.chunks:
        groups = {r.layout.group_of(s).name for s in c.streams}
        assert groups == {c.group}
        if c.group == "cameras":
            assert set(c.streams) == set(CAMS)
            for part in c.parts:
                blob = r.source.read(c.offset + part.offset, part.length)
                assert decode_packets(blob).column("key")[0].as_py() is True


def test_window_touches_only_needed_chunks_and_cameras_share_a_read(episode):
    p, _ = episode
    r1 = EpisodeReader.open(p)
    r1.read_window(2.1, 2.4, ["joint_pos"])
    assert r1.stats.chunks_read == 1
    r1b = EpisodeReader.open(p)
    r1b.read_window(2.1, 2.4, ["cam_left"])
    r3 = EpisodeReader.open(p)
    win = r3.read_window(2.1, 2.4, list(CAMS))
    assert r3.stats.range_reads == r1b.stats.range_reads == 1  # adding cameras adds no read
    assert r1.stats.bytes_read < r3.stats.bytes_read
    # a window starting mid-episode decodes without reading the earlier chunk
    assert all(len(w.data) > 0 for w in win.values())


def test_subsampled_window_keeps_every_kth_frame(episode):
    p, data = episode
    r = EpisodeReader.open(p)
    full = r.read_window(0.5, 1.5, ["wrist"])["wrist"]
    sub = r.read_window(0.5, 1.5, ["wrist"], every=3)["wrist"]
    np.testing.assert_allclose(sub.t, full.t[::3])
    np.testing.assert_array_equal(sub.data, full.data[::3])


def test_footer_hints_open_in_one_read(episode):
    p, _ = episode
    r = EpisodeReader.open(p)
    from robodata.container.source import LocalFileSource

    src = LocalFileSource(p)
    r2 = EpisodeReader.open(src, footer_offset=r.footer_offset, footer_length=r.footer_length)
    assert src.stats.range_reads == 1
    assert r2.meta.episode_id == "ep-test"


def test_fsspec_and_filelike_sources(episode, tmp_path):
    import fsspec

    p, _ = episode
    fs = fsspec.filesystem("memory")
    fs.pipe("/bucket/ep.rdep", p.read_bytes())
    r = EpisodeReader.open("memory://bucket/ep.rdep")
    a = r.read_window(0.0, 1.0, ["cam_right", "joint_pos"])
    with open(p, "rb") as f:
        b = EpisodeReader.open(f).read_window(0.0, 1.0, ["cam_right", "joint_pos"])
    np.testing.assert_array_equal(a["cam_right"].data, b["cam_right"].data)
    np.testing.assert_array_equal(a["joint_pos"].data, b["joint_pos"].data)


@pytest.mark.parametrize("codec", ["hevc", "av1"])
def test_other_codecs_roundtrip(tmp_path, codec):
    p = tmp_path / f"{codec}.rdep"
    layout = small_layout(codec=codec, gop=8)
    data = write_small(p, duration_s=1.0, layout=layout, h=64, w=64)
    win = EpisodeReader.open(p).read_window(0.3, 0.8, ["cam_left"])["cam_left"]
    fm = (data["t_frames"] >= 0.3e9) & (data["t_frames"] <= 0.8e9)
    assert win.data.shape[0] == fm.sum()
    assert np.abs(win.data.astype(int) - data["frames"]["cam_left"][fm].astype(int)).mean() < 8


def test_layout_rejects_mixed_and_duplicate_groups():
    from robodata.errors import ConfigError

    with pytest.raises(ConfigError, match="one group per stream"):
        Layout(groups=(TopicGroup("a", ("x",)), TopicGroup("b", ("x",))))
    with pytest.raises(ConfigError, match="unknown video codec"):
        VideoSettings(codec="mpeg1")
    with pytest.raises(ConfigError, match="gop"):
        VideoSettings(gop=0)


def test_module_level_read_window(episode):
    from robodata.container import read_window

    p, data = episode
    win = read_window(str(p), 0.0, 0.5, ["joint_pos"])
    m = data["tj"] <= 0.5e9
    np.testing.assert_array_equal(win["joint_pos"].data, data["joint_pos"][m])
