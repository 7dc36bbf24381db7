"""Issue 39: a LeRobot episode is read for what it holds, not for its whole file. Its frame times
come from the MP4 sample table when the stream has no B-frames (no packet read), else from a demux
of the episode's window only; its packets are demuxed for its window only; a transcode decodes the
packets a stream copy's choice already demuxed. Every path gives the frames and times PyAV gives
when it decodes the whole file on its own (an independent reader), for every episode of a v3.0
file (many episodes per mp4), with and without B-frames."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np
import pytest

import robodata.ingest.importers.lerobot_video as lv
from robodata.codecs.demux import index_pts
from robodata.ingest.importers import open_raw
from robodata.ingest.importers.lerobot import dataset_episodes
from robodata.ingest.synth.lerobot import write_lerobot


def _whole_file(path: str) -> dict[int, np.ndarray]:
    """pts -> RGB frame, every frame of the file decoded by PyAV from its start."""
    with av.open(path) as c:
        return {f.pts: f.to_ndarray(format="rgb24") for f in c.decode(c.streams.video[0])}


@pytest.fixture(scope="module", params=[(0, "no B-frames"), (2, "2 B-frames")], ids=lambda p: p[1])
def dataset(request, tmp_path_factory) -> tuple[Path, int]:
    bframes = request.param[0]
    root = write_lerobot(
        tmp_path_factory.mktemp("lr") / "ds", version="v3.0", episodes=3, frames_per_episode=24, fps=10,
        gop=6, bframes=bframes, cameras=("top",),
    )  # fmt: skip
    return root, bframes


def _frames(raw) -> list[np.ndarray]:
    return [img.to_ndarray(format="rgb24") for _, _, img in raw.frames()]


def test_times_and_frames_match_a_whole_file_decode(dataset, monkeypatch):
    root, bframes = dataset
    (mp4,) = sorted(root.rglob("*.mp4"))
    assert (index_pts(mp4) is None) == (bframes > 0)  # the sample table stands for pts only without B-frames
    whole = _whole_file(str(mp4))
    tb = float(av.open(str(mp4)).streams.video[0].time_base)
    seen = []
    for ep in dataset_episodes(str(root)):
        raw = open_raw(f"{root}#{ep.index}", "lerobot-v3.0")
        cam = raw.cameras["top"]
        # the episode's frames: those of the whole file inside its window, in pts order
        t_from = float(ep.row["videos/observation.images.top/from_timestamp"])
        t_to = float(ep.row["videos/observation.images.top/to_timestamp"])
        want = sorted(p for p in whole if t_from - 1e-4 <= p * tb < t_to - 1e-4)
        assert len(cam.t_ns) == len(want) == 24
        assert np.allclose(cam.t_ns / 1e9, np.array(want) * tb - t_from, atol=1e-6)
        by_file = _frames(raw)  # no stream copy asked: decoded from the file
        assert all(np.array_equal(a, whole[p]) for a, p in zip(by_file, want, strict=True))
        src = raw.video_sources("top")  # the window's packets only, from the window's keyframe
        assert sorted(p.pts for p in src.packets) == want
        assert len(src.packets) < len(whole)
        by_memory = _frames(raw)  # decoded from those packets, the file not read again
        monkeypatch.setattr(lv.av, "open", lambda *a, **k: pytest.fail("the file was opened again"))
        assert all(np.array_equal(a, whole[p]) for a, p in zip(_frames(raw), want, strict=True))
        monkeypatch.undo()
        assert all(np.array_equal(a, b) for a, b in zip(by_memory, by_file, strict=True))
        seen += want
    assert sorted(seen) == sorted(whole)  # the episodes cover the file, none twice


def test_an_episode_window_is_demuxed_from_its_own_keyframe_to_its_last_packet(dataset):
    """Each episode of the file opens on a keyframe: its window's demux enters there (not a GOP
    earlier) and stops on its last packet (the next episode's keyframe is not read); a window
    starting inside a GOP still gets every packet it shows."""
    from robodata.codecs.demux import demux_video

    root, bframes = dataset
    (mp4,) = sorted(root.rglob("*.mp4"))
    whole = _whole_file(str(mp4))
    tb = float(av.open(str(mp4)).streams.video[0].time_base)
    pts = sorted(whole)
    for k in range(3):
        t0, t1 = pts[24 * k] * tb, pts[24 * k + 23] * tb
        src = demux_video(mp4, window=(t0 - 2e-4, t1 + 2e-4))
        got, want = sorted(p.pts for p in src.packets), pts[24 * k : 24 * k + 24]
        # in decode order a window ends on decode time: B-frames reorder at most `bframes` past it
        assert set(want) <= set(got) and len(got) - len(want) <= bframes and min(got) == want[0], (k, got)
        assert src.packets[0].key
    inside = demux_video(mp4, window=(pts[27] * tb - 2e-4, pts[40] * tb + 2e-4))  # GOP of 6: frame 27 is no keyframe
    assert set(pts[27:41]) <= {p.pts for p in inside.packets} and inside.packets[0].key


def test_a_second_open_of_a_file_reads_none_of_its_head_again(dataset, tmp_path):
    """robodata.codecs.head_cache: the reads of an open are kept for the same file's next open
    in this process; another file at the same path (new size, new time) is read afresh."""
    import shutil

    from robodata.codecs.demux import AVIO_BUFFER
    from robodata.codecs.head_cache import HeadCachedFile

    root, _ = dataset
    (mp4,) = sorted(root.rglob("*.mp4"))
    path = tmp_path / "v.mp4"
    shutil.copy(mp4, path)

    def open_once() -> tuple[int, list[tuple[int | None, bytes]]]:
        with HeadCachedFile(path) as f, av.open(f, "r", buffer_size=AVIO_BUFFER) as c:
            f.opened()
            at_open = f.disk_bytes
            return at_open, [(p.pts, bytes(p)) for p in c.demux(c.streams.video[0]) if p.size]

    first, packets = open_once()
    again, packets2 = open_once()
    assert first > 0 and again == 0 and packets2 == packets
    write_lerobot(tmp_path / "o", version="v2.1", episodes=1, frames_per_episode=30, fps=10, cameras=("top",))
    shutil.copy(next((tmp_path / "o").rglob("*.mp4")), path)  # replaced: another size and time
    fresh, packets3 = open_once()
    assert fresh > 0 and packets3 != packets
    with av.open(str(path)) as c:
        assert packets3 == [(p.pts, bytes(p)) for p in c.demux(c.streams.video[0]) if p.size]
