"""Issue 40: an Annex B camera's verification decodes every GOP (copy_verify, annexb_decode="all"),
so each such camera is decoded in a task of its own, beside the others' and beside the write (two
cameras: two cores); sampled cameras share one task. Whatever the split, every camera's finding is
its own."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

import robodata.ingest.convert as convert_mod
from robodata.ingest.align import aligned_tracks
from robodata.ingest.importers import open_raw
from robodata.ingest.synth.episode import SynthConfig, make_episode
from robodata.ingest.synth.mcap import write_mcap_episode
from robodata.ingest.synth.mcap_video import CompressedVideoSpec
from robodata.ingest.video_copy import VideoCopyConfig


@pytest.fixture
def two_cameras(tmp_path):
    cams = ("top", "wrist")
    cfg = SynthConfig(episodes=1, duration_s=1.2, cameras=cams, height=48, width=64, fps=10.0, format="mcap")
    raw = open_raw(str(write_mcap_episode(make_episode(cfg, 0), tmp_path, video=CompressedVideoSpec(gop=2))), "mcap")
    return raw, aligned_tracks(raw)


def _record(monkeypatch, nap: float = 0.15) -> list[tuple[tuple[str, ...], float, float, str]]:
    """decode_sample as convert calls it, each call's cameras, start, end and thread recorded."""
    calls: list[tuple[tuple[str, ...], float, float, str]] = []
    real = convert_mod.decode_sample

    def spy(copies, *args, **kw):
        t0 = time.perf_counter()
        time.sleep(nap)  # long enough that two tasks run at once or visibly do not
        out = real(copies, *args, **kw)
        calls.append((tuple(copies), t0, time.perf_counter(), threading.current_thread().name))
        return out

    monkeypatch.setattr(convert_mod, "decode_sample", spy)
    return calls


def test_annexb_cameras_decoded_whole_each_in_a_task_of_its_own_at_once(tmp_path, monkeypatch, two_cameras):
    raw, al = two_cameras
    calls = _record(monkeypatch)
    res = convert_mod.convert(raw, al, tmp_path / "a.rdep", copy=VideoCopyConfig(mode="copy"))
    assert {c: d["mode"] for c, d in res.video.items()} == {"top": "copy", "wrist": "copy"}, res.video
    assert sorted(c for c, *_ in calls) == [("top",), ("wrist",)]
    (_, a0, a1, ta), (_, b0, b1, tb) = calls
    assert ta != tb and a0 < b1 and b0 < a1, calls  # on two threads, overlapping


def test_sampled_cameras_share_one_task(tmp_path, monkeypatch, two_cameras):
    raw, al = two_cameras
    calls = _record(monkeypatch)
    convert_mod.convert(raw, al, tmp_path / "s.rdep", copy=VideoCopyConfig(mode="copy", annexb_decode="sample"))
    assert [c for c, *_ in calls] == [("top", "wrist")]


def test_a_camera_cut_short_is_named_by_its_own_task(tmp_path, two_cameras):
    raw, al = two_cameras
    good = raw.video_sources

    def hostile(cam):
        src = good(cam)
        if cam != "wrist":
            return src
        pk = src.packets
        cut = [p if i != 5 else dataclasses.replace(p, data=p.data[: len(p.data) // 3]) for i, p in enumerate(pk)]
        return dataclasses.replace(src, packets=cut)

    raw.video_sources = hostile
    res = convert_mod.convert(raw, al, tmp_path / "c.rdep", copy=VideoCopyConfig(mode="copy"))
    assert res.video["wrist"]["mode"] == "transcode"
    assert "GOP 2 (packets 4..5) does not decode at packet 5" in res.video["wrist"]["reason"], res.video


def test_the_readback_fsync_never_waits_for_a_decode(tmp_path, monkeypatch):
    """Four Annex B cameras decoded whole keep every decode thread busy; the read-back's fsync has its own."""
    cams = ("a", "b", "c", "d")
    cfg = SynthConfig(episodes=1, duration_s=0.6, cameras=cams, height=32, width=48, fps=10.0, format="mcap")
    raw = open_raw(str(write_mcap_episode(make_episode(cfg, 0), tmp_path, video=CompressedVideoSpec(gop=2))), "mcap")
    calls = _record(monkeypatch, nap=0.5)
    synced: list[float] = []
    real_fsync = convert_mod.fsync_path

    def fsync(path):
        synced.append(time.perf_counter())
        return real_fsync(path)

    monkeypatch.setattr(convert_mod, "fsync_path", fsync)
    res = convert_mod.convert(
        raw, aligned_tracks(raw), tmp_path / "r.rdep", copy=VideoCopyConfig(mode="copy", verify_readback=True)
    )
    assert {d["mode"] for d in res.video.values()} == {"copy"}, res.video
    assert len(calls) == 4 and len(synced) == 1
    assert synced[0] < min(end for _, _, end, _ in calls), (synced, calls)  # begun before any decode ended
