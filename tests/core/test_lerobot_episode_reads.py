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
