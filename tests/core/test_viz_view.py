"""`robodata view --save`: the .rrd read back with Rerun's own reader holds the container's video
samples (one per stored frame, at its time, decoding to read_window's frames), every array
sample, every event, and QC findings at the times they refer to."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rerun")

from typer.testing import CliRunner  # noqa: E402

from robodata.cli import app  # noqa: E402
from robodata.container import EpisodeReader, Layout, TopicGroup, VideoSettings  # noqa: E402
from robodata.viz.paramsets import obus  # noqa: E402
from tests.core.helpers_container import CAMS, write_small  # noqa: E402
from tests.core.helpers_viz import decode, rrd_columns, sample_bytes, stored_times  # noqa: E402


def _view(*args: str) -> dict:
    r = CliRunner().invoke(app, ["view", *args, "--quiet"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    return json.loads(r.output.strip().splitlines()[-1])


def _layout(codec: str = "h264", bframes: int = 0) -> Layout:
    return Layout(
        groups=(
            TopicGroup("cameras", CAMS, 1.0, VideoSettings(codec=codec, gop=10, crf=20, bframes=bframes)),
            TopicGroup("proprio", ("joint_pos", "cmd"), 2.0),
            TopicGroup("events", ("events",), 60.0),
        )
    )


@pytest.mark.parametrize("codec", ["h264", "hevc", "av1"])
def test_view_logs_the_stored_samples_and_every_stream(tmp_path: Path, codec: str):
    ep, rrd = tmp_path / "ep.rdep", tmp_path / "ep.rrd"
    data = write_small(ep, duration_s=3.0, layout=_layout(codec))
    out = _view(str(ep), "--save", str(rrd))
    assert out["reencoded_frames"] == 0 and out["notes"] == []
    cols = rrd_columns(rrd)
    assert {f"/cameras/{c}" for c in CAMS} | {
        "/streams/joint_pos",
        "/streams/cmd",
        "/events/events",
        "/episode",
    } <= set(cols)
    win = EpisodeReader.open(ep).read_window(0, float("inf"))
    for c in CAMS:
        cam = cols[f"/cameras/{c}"]
        times = [t for t in cam["episode_time"] if t is not None]
        # one sample per stored frame, at the container's own times
        assert np.array_equal(np.asarray(times), stored_times(ep, c))
        assert len(times) == len(data["frames"][c])
        samples = sample_bytes([s for s in cam["VideoStream:sample"] if s is not None])
        keys = [k[0] for k in cam["VideoStream:is_keyframe"] if k is not None]
        if codec == "av1":  # low-overhead OBUs; every keyframe carries a sequence header OBU (type 1)
            assert all(
                any(t == 1 for t, _, _ in obus(smp, "packet")) for smp, k in zip(samples, keys, strict=True) if k
            )
        else:  # Annex B, parameter sets (SPS: h264 type 7, hevc type 33) in every keyframe
            assert all(smp.startswith(b"\x00\x00\x00\x01") or smp.startswith(b"\x00\x00\x01") for smp in samples)
            sps = b"\x00\x00\x01\x67" if codec == "h264" else b"\x00\x00\x01\x42"
            assert all((sps in smp) == k for smp, k in zip(samples, keys, strict=True))
        # decoded by a decoder that has only the logged samples: read_window's frames, exactly
        assert np.array_equal(decode(codec, samples), win[c].data)
    for s in ("joint_pos", "cmd"):
        got = cols[f"/streams/{s}"]
        assert np.array_equal(np.asarray(got["episode_time"]), data["tj" if s == "joint_pos" else "tc"])
        assert np.allclose(np.asarray(got["Scalars:scalars"]), data[s])
    assert cols["/events/events"]["TextLog:text"] == [["start"], ["grasp"]]


def test_view_reencodes_b_frames_and_says_so(tmp_path: Path):
    ep, rrd = tmp_path / "ep.rdep", tmp_path / "ep.rrd"
    write_small(ep, duration_s=2.0, layout=_layout("h264", bframes=2))
    out = _view(str(ep), "--save", str(rrd), "--start", "0", "--end", "0.9")
    n = sum(out["frames"].values())
    assert out["reencoded_frames"] == n > 0 and out["notes"]
    cols = rrd_columns(rrd)
    assert any("re-encoded" in t[0] for t in cols["/notes"]["TextLog:text"])
    win = EpisodeReader.open(ep).read_window(0, 0.9, ["cam_left"])["cam_left"]
    cam = cols["/cameras/cam_left"]
    got = decode("h264", sample_bytes([s for s in cam["VideoStream:sample"] if s is not None]))
    assert got.shape == win.data.shape
    mse = np.mean((got.astype(float) - win.data.astype(float)) ** 2)
    assert 10 * np.log10(255**2 / max(mse, 1e-9)) > 30  # re-encoded at crf 18: close, not exact


def test_view_window_starts_at_a_keyframe(tmp_path: Path):
    ep, rrd = tmp_path / "ep.rdep", tmp_path / "ep.rrd"
    write_small(ep, duration_s=3.0)
    _view(str(ep), "--save", str(rrd), "--start", "1.3", "--end", "1.6")
    cam = rrd_columns(rrd)["/cameras/wrist"]
    t = np.asarray(cam["episode_time"])
    assert t.max() <= 1.6e9 and t.min() <= 1.3e9  # from the keyframe before the window
    assert cam["VideoStream:is_keyframe"][0] == [True]
    win = EpisodeReader.open(ep).read_window(1.3, 1.6, ["wrist"])["wrist"]
    frames = decode("h264", sample_bytes(cam["VideoStream:sample"]))
    assert np.array_equal(frames[-len(win.data) :], win.data)


def test_qc_results_are_annotated_at_their_times(tmp_path: Path):
    """With --root, the episode's qc_results rows become TextLogs on `qc`: a joints failure at the
    stream's largest |value|, a rate failure (no time) at 0, levels by verdict; the batch
    preview helpers see the same table."""
    import pyarrow as pa

    from robodata.ingest.steps.qc_results import QC_SCHEMA
    from robodata.ingest.tables import IngestPaths
    from robodata.viz.preview import batch_episodes

    root = tmp_path / "root"
    paths = IngestPaths(str(root))
    ep = Path(paths.container("b1", "ep-test"))
    ep.parent.mkdir(parents=True)
    data = write_small(ep, duration_s=2.0)
    base = {"batch": "b1", "uri": "landing/x", "episode_id": "ep-test", "vendor": "", "source": "", "checked_at": 0.0}
    rows = [
        {**base, "stage": "pre", "check": "joints", "passed": False, "blocking": True, "reason": "joint_pos: range"},
        {**base, "stage": "pre", "check": "rate", "passed": False, "blocking": False, "reason": "cmd: 40 Hz"},
        {**base, "stage": "post", "check": "readable", "passed": True, "blocking": True, "reason": ""},
        {**base, "stage": "summary", "check": "status", "passed": False, "blocking": True, "reason": "joints"},
    ]
    paths.replace("qc_results", pa.Table.from_pylist([{**r, "score": None} for r in rows], QC_SCHEMA), "b1")
    rrd = tmp_path / "ep.rrd"
    out = _view(str(ep), "--save", str(rrd), "--root", str(root))
    assert out["qc_annotations"] == 4
    qc = rrd_columns(rrd)["/qc"]
    by_text = dict(zip([t[0] for t in qc["TextLog:text"]], qc["episode_time"], strict=True))
    peak = int(data["tj"][int(np.argmax(np.abs(data["joint_pos"]).max(axis=1)))])
    assert by_text["[pre] joints: FAIL: joint_pos: range"] == peak
    assert by_text["[pre] rate: warn: cmd: 40 Hz"] == 0
    assert [lvl[0] for lvl in qc["TextLog:level"]].count("ERROR") == 2
    passing, quarantined = batch_episodes(str(root), "b1")
    assert passing == [] and quarantined[0][0] == str(ep)
    assert {f.check for f in quarantined[0][1]} == {"joints", "rate", "status"}


def test_episode_is_streamed_slab_by_slab(tmp_path: Path, monkeypatch):
    """Each slab reads exactly its own chunks (every byte once, nothing ahead), so memory is a
    slab's worth whatever the episode's length."""
    import rerun as rr

    import robodata.viz.record as record

    ep = tmp_path / "ep.rdep"
    write_small(ep, duration_s=6.0)
    monkeypatch.setattr(record, "SLAB_S", 1.0)
    r = EpisodeReader.open(ep)
    rec = rr.RecordingStream("robodata-test", recording_id="slabs")
    rec.save(str(tmp_path / "x.rrd"))
    log = record.EpisodeLogger(r, rec)
    log.log_static()
    slabs = list(log.slabs())
    assert len(slabs) >= 6 and sorted(c.index for s in slabs for c in s) == [c.index for c in r.chunks]
    for slab in slabs:
        before = r.stats.bytes_read
        log.log_chunks(slab, 0, 1 << 62)
        assert r.stats.bytes_read - before <= sum(c.length for c in slab) + 16  # + the header, once
    log.flush_arrays()
    assert sum(log.stats.frames.values()) == 3 * 120 and log.stats.scalars == {"joint_pos": 600, "cmd": 300}


def test_spawn_without_a_display_or_a_viewer_says_what_to_do_instead(tmp_path: Path, monkeypatch):
    path = tmp_path / "ep.rdep"
    write_small(path, duration_s=1.0, layout=_layout())
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    r = CliRunner().invoke(app, ["view", str(path), "--spawn", "--quiet"])
    assert r.exit_code == 2 and r.exception is not None and isinstance(r.exception, SystemExit)
    assert "ViewerUnavailable: --spawn needs a display" in r.output and "--save ep.rrd" in r.output
    monkeypatch.setenv("DISPLAY", ":99")
    monkeypatch.setenv("PATH", str(tmp_path))  # no viewer executable to be found
    r = CliRunner().invoke(app, ["view", str(path), "--spawn", "--quiet"])
    assert r.exit_code == 2 and "could not start the Rerun viewer" in r.output
