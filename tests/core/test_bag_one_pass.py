"""Issue 39: an MCAP's camera frames come from the one pass the importer makes over the recording
(its kept messages), not from a second read of the file; past ImportOptions.keep_image_mb the
kept messages are dropped and frames() reads the file again. Both give the frames libavcodec's
MJPEG decoder (PyAV, on its own) makes of the messages as the mcap library reads them."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import av
import numpy as np
import pytest
from mcap.reader import make_reader

import robodata.ingest.importers.bag as bag
from robodata.errors import ConfigError
from robodata.ingest.importers import open_raw
from robodata.ingest.importers.options import ImportOptions
from robodata.ingest.synth.episode import SynthConfig, make_episode
from robodata.ingest.synth.mcap import write_mcap_episode


@pytest.fixture(scope="module")
def mcap_path(tmp_path_factory) -> Path:
    cfg = SynthConfig(episodes=1, duration_s=1.0, cameras=("top", "wrist"), height=48, width=64, format="mcap")
    return write_mcap_episode(make_episode(cfg, 0), tmp_path_factory.mktemp("mcap"))


def _ref_frames(path: Path) -> dict[str, list[np.ndarray]]:
    """Every camera message's JPEG, decoded by PyAV's MJPEG decoder, per topic, in message order."""
    out: dict[str, list[np.ndarray]] = {}
    ctx = av.CodecContext.create("mjpeg", "r")
    with open(path, "rb") as f:
        for _schema, channel, message in make_reader(f).iter_messages():
            if not channel.topic.endswith("/image/compressed"):
                continue
            msg = json.loads(message.data) if channel.message_encoding == "json" else None
            assert msg is not None, channel.message_encoding
            (frame,) = ctx.decode(av.Packet(base64.b64decode(msg["data"])))
            out.setdefault(channel.topic, []).append(frame.to_ndarray(format="rgb24"))
    return out


def _rgb(img) -> np.ndarray:
    return img.to_ndarray(format="rgb24") if isinstance(img, av.VideoFrame) else np.asarray(img)


def _frames(path: Path, options: ImportOptions, monkeypatch) -> tuple[dict[str, list[np.ndarray]], int, int]:
    """(frames per stream, iter_messages calls while opening, calls while reading frames)."""
    calls = []
    real = bag.iter_messages

    def counting(*a, **k):
        calls.append(a)
        return real(*a, **k)

    monkeypatch.setattr(bag, "iter_messages", counting)
    raw = open_raw(str(path), "mcap", options=options)
    opened = len(calls)
    got: dict[str, list[np.ndarray]] = {}
    for stream, i, img in raw.frames():
        assert i == len(got.setdefault(stream, []))
        got[stream].append(_rgb(img))
    return got, opened, len(calls) - opened


def test_frames_come_from_the_one_pass(mcap_path, monkeypatch):
    got, opened, again = _frames(mcap_path, ImportOptions(), monkeypatch)
    assert opened == 1 and again == 0  # one pass over the recording, frames from what it kept
    ref = _ref_frames(mcap_path)
    assert sorted(got) == ["top", "wrist"] and all(len(got[s]) == len(ref[f"/{s}/image/compressed"]) for s in got)
    for s, frames in got.items():
        for a, b in zip(frames, ref[f"/{s}/image/compressed"], strict=True):
            assert np.array_equal(a, b)


def test_over_budget_reads_the_file_again_with_the_same_frames(mcap_path, monkeypatch):
    kept, _, _ = _frames(mcap_path, ImportOptions(), monkeypatch)
    monkeypatch.undo()
    again, opened, second = _frames(mcap_path, ImportOptions(keep_image_mb=0), monkeypatch)
    assert opened == 1 and second == 1  # the budget is exceeded: a second pass, and only one
    assert sorted(again) == sorted(kept)
    for s in kept:
        assert all(np.array_equal(a, b) for a, b in zip(kept[s], again[s], strict=True))


@pytest.mark.parametrize("bad", [-1, 1.5, True, "256"])
def test_keep_image_mb_is_checked_up_front(bad):
    with pytest.raises(ConfigError, match="keep_image_mb"):
        ImportOptions(keep_image_mb=bad)
