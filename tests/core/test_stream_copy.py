"""Issue 40: a source's video bitstream kept as it is (stream copy) where it fits, checked from packet
headers before the write and against the source after it; everything else transcoded, with a reason.
Frames are compared with PyAV's own decode of the source file, never with robodata's output."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import av
import numpy as np
import pytest

from robodata.codecs.demux import SourceVideo, demux_video
from robodata.codecs.video import Packet
from robodata.container import EpisodeReader, EpisodeWriter
from robodata.container.meta import EpisodeMeta, Layout, StreamSpec, TopicGroup, VideoSettings
from robodata.errors import ConfigError, ContainerError
from robodata.ingest import convert as convert_mod
from robodata.ingest.align import aligned_tracks
from robodata.ingest.convert import convert
from robodata.ingest.copy_verify import check_written, sample_gops, verify_copy
from robodata.ingest.importers import open_raw
from robodata.ingest.synth.lerobot import write_lerobot
from robodata.ingest.video_copy import CopyRefused, VideoCopyConfig, inspect


def _dataset(tmp: Path, codec: str = "h264", gop: int = 2, bframes: int = 0, n: int = 24) -> Path:
    return write_lerobot(
        tmp / f"ds-{codec}-{gop}-{bframes}", episodes=1, frames_per_episode=n, fps=10, height=64, width=64,
        codec=codec, cameras=("top",), gop=gop, bframes=bframes,
    )  # fmt: skip


def _source_frames(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def _convert(root: Path, tmp: Path, mode: str, **kw) -> tuple[EpisodeReader, dict]:
    raw = open_raw(f"{root}#0", "lerobot-v2.1")
    al = aligned_tracks(raw)
    out = tmp / f"{root.name}-{mode}.rdep"
    convert(raw, al, out, copy=VideoCopyConfig(mode=mode, **kw))
    r = EpisodeReader.open(out)
    return r, r.meta.extra["video"]["top"]


def _video(root: Path) -> Path:
    return next((root / "videos").rglob("*.mp4"))


@pytest.mark.parametrize(("codec", "gop", "bframes"), [("av1", 2, 0), ("h264", 2, 0), ("h264", 6, 2)])
def test_copied_stream_reads_the_sources_frames_bit_for_bit(tmp_path, codec, gop, bframes):
    root = _dataset(tmp_path, codec, gop, bframes)
    r, decision = _convert(root, tmp_path, "copy")
    assert decision["mode"] == "copy", decision
    v = r.layout.group_of("top").video
    assert (v.codec, v.gop, v.preset) == (codec, gop, "copy")
    got = r.read_window(0, float("inf"), ["top"])["top"].data
    want = _source_frames(_video(root))
    assert len(got) == len(want) == 24
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))
    # a window from the middle decodes from its own GOP
    mid = r.read_window(0.95, 1.25, ["top"])["top"]
    assert np.array_equal(mid.data[0], want[10])


def test_auto_copies_a_short_gop_and_transcodes_a_long_one(tmp_path):
    short, _ = _convert(_dataset(tmp_path, "h264", 2), tmp_path, "auto")
    assert short.meta.extra["video"]["top"]["mode"] == "copy"
    long_root = _dataset(tmp_path, "h264", 60, n=60)
    r, decision = _convert(long_root, tmp_path, "auto")
    assert decision["mode"] == "transcode" and "gop 60" in decision["reason"], decision
    assert r.layout.group_of("top").video.preset != "copy"
    forced, decision = _convert(long_root, tmp_path, "copy")
    assert decision["mode"] == "copy" and forced.layout.group_of("top").video.gop == 60


def test_transcode_mode_records_its_reason(tmp_path):
    r, decision = _convert(_dataset(tmp_path, "h264", 2), tmp_path, "transcode")
    assert decision == {"mode": "transcode", "reason": "--video transcode"}
    assert r.layout.group_of("top").video == VideoSettings()


@pytest.mark.parametrize("readback", [False, True])
def test_a_copy_that_fails_verification_is_transcoded_with_the_finding(tmp_path, monkeypatch, readback):
    check = "check_stored" if readback else "check_written"  # VideoCopyConfig.verify_readback picks one
    monkeypatch.setattr(convert_mod, check, lambda where, copies: {"top": "GOP 0 does not decode"})
    r, decision = _convert(_dataset(tmp_path, "h264", 2), tmp_path, "copy", verify_readback=readback)
    assert decision["mode"] == "transcode"
    assert decision["reason"] == "copy failed verification: GOP 0 does not decode"
    assert r.layout.group_of("top").video.preset != "copy"
    assert len(r.read_window(0, float("inf"), ["top"])["top"].data) == 24


def _source(root: Path) -> SourceVideo:
    return demux_video(_video(root))


def _refused(src: SourceVideo, frames: int = 24) -> str:
    with pytest.raises(CopyRefused) as e:
        inspect("top", src, frames, (64, 64, 3))
    return str(e.value)


def test_lying_packets_are_refused_before_the_write(tmp_path):
    """Hostile sources (issue 40): flags, pts, truncation and missing extradata, each named."""
    src = _source(_dataset(tmp_path, "h264", 2))
    assert inspect("top", src, 24, (64, 64, 3)).keys == tuple(range(0, 24, 2))
    pk = src.packets

    def with_packets(packets, **kw):
        return dataclasses.replace(src, packets=packets, **kw)

    flipped = [dataclasses.replace(p, key=not p.key) if i == 2 else p for i, p in enumerate(pk)]
    assert "flagged key=False, its bitstream says key=True" in _refused(with_packets(flipped))
    dup = [dataclasses.replace(p, pts=pk[0].pts) if i == 3 else p for i, p in enumerate(pk)]
    assert "pts missing or repeated" in _refused(with_packets(dup))
    cut = [dataclasses.replace(p, data=p.data[: len(p.data) // 2]) if i == 5 else p for i, p in enumerate(pk)]
    assert "packet 5" in _refused(with_packets(cut)) and "runs past" in _refused(with_packets(cut))
    assert "extradata is missing" in _refused(with_packets(pk, extradata=b""))
    assert "does not open on a keyframe" in _refused(with_packets(pk[1:]), 23)
    assert "not consecutive" in _refused(with_packets(pk[:4] + pk[5:] + pk[4:5]))
    assert "packets for the episode's 25 frames" in _refused(src, 25)
    assert "not one the loader decodes" in _refused(with_packets(pk, codec="mpeg4"))
    assert "coded size" in _refused(dataclasses.replace(src, width=32))


def test_a_gop_whose_frames_reach_into_another_is_refused(tmp_path):
    """Closed GOPs: a GOP shows its keyframe first and exactly its own frames (pts swapped across a
    keyframe, or a B-frame shown before its GOP's keyframe, are refused, naming the GOP)."""
    src = _source(_dataset(tmp_path, "h264", 6, 2))
    pk = src.packets
    assert inspect("top", src, 24, (64, 64, 3)).reorder > 0  # B-frames: display order is not decode order
    k = [i for i, p in enumerate(pk) if p.key][1]  # the second GOP's keyframe
    across = [
        *pk[: k - 1],
        dataclasses.replace(pk[k - 1], pts=pk[k].pts),
        dataclasses.replace(pk[k], pts=pk[k - 1].pts),
    ]
    why = _refused(dataclasses.replace(src, packets=across + pk[k + 1 :]))
    assert k == 6 and "the GOP at packet 0 is not closed" in why, why


def test_av1_pts_out_of_decode_order_and_bad_extradata_are_refused(tmp_path):
    src = _source(_dataset(tmp_path, "av1", 2))
    pk = src.packets
    swapped = [*pk[:3], dataclasses.replace(pk[3], pts=pk[4].pts), dataclasses.replace(pk[4], pts=pk[3].pts), *pk[5:]]
    assert "AV1 stream shows its packets in decode order" in _refused(dataclasses.replace(src, packets=swapped))
    assert "extradata does not parse" in _refused(dataclasses.replace(src, extradata=b"\x81\x00\x0c\x00\x0a\x7f"))
    # keyframes carry their sequence header in band: without extradata the stream still decodes alone
    assert inspect("top", dataclasses.replace(src, extradata=b""), 24, (64, 64, 3)).keys[0] == 0


def test_verification_compares_the_stored_stream_with_the_source(tmp_path):
    root = _dataset(tmp_path, "h264", 2)
    r, _ = _convert(root, tmp_path, "copy")
    cc = inspect("top", _source(root), 24, (64, 64, 3))
    path = r.source.name
    assert verify_copy(path, {"top": cc}, gops=3) == {}
    other = dataclasses.replace(cc, packets=[*cc.packets[:7], dataclasses.replace(cc.packets[7], data=b"x")])
    other.packets += cc.packets[8:]
    assert verify_copy(path, {"top": other}, 3) == {"top": "stored packet 7 differs from the source's bytes"}
    assert "packets" in verify_copy(path, {"top": dataclasses.replace(cc, packets=cc.packets[:-2])}, 3)["top"]
    # the default check: the packets and extradata the writer stored, without reading them back
    stored = {"top": (cc.packets, cc.extradata)}
    assert check_written(stored, {"top": cc}) == {}
    assert check_written(stored, {"top": other}) == {"top": "stored packet 7 differs from the source's size"}
    short = {"top": (cc.packets[:-2], cc.extradata)}
    assert check_written(short, {"top": cc}) == {"top": "stored 22 packets, the source has 24"}
    moved = [dataclasses.replace(p, key=not p.key) if i == 2 else p for i, p in enumerate(cc.packets)]
    assert "keyframe positions" in check_written({"top": (moved, cc.extradata)}, {"top": cc})["top"]
    later = [dataclasses.replace(p, dts=p.dts + 1) for p in cc.packets]
    assert "dts" in check_written({"top": (later, cc.extradata)}, {"top": cc})["top"]
    assert "extradata" in check_written({"top": (cc.packets, b"x")}, {"top": cc})["top"]
    assert sample_gops(12, 3) == [0, 6, 11] and sample_gops(2, 5) == [0, 1] and sample_gops(5, 0) == []


def _meta() -> tuple[EpisodeMeta, Layout]:
    meta = EpisodeMeta("e", "r", "s", "t", 0, {"top": StreamSpec("top", "video", 10.0, (64, 64, 3))})
    return meta, Layout((TopicGroup("cameras", ("top",), 2.0, VideoSettings("h264", 2, 0, "copy")),))


def test_writer_refuses_packets_a_stream_copy_cannot_hold(tmp_path):
    meta, layout = _meta()
    with pytest.raises(ContainerError, match="open on a keyframe"), EpisodeWriter(tmp_path / "a", meta, layout) as w:
        w.write_packet("top", Packet(0, 0, False, b"\0"), 0)
    with pytest.raises(ContainerError, match="does not increase"), EpisodeWriter(tmp_path / "b", meta, layout) as w:
        w.write_packet("top", Packet(0, 0, True, b"\0"), 0)
        w.write_packet("top", Packet(1, 0, False, b"\0"), 1)
    with pytest.raises(ContainerError, match="not a new frame"), EpisodeWriter(tmp_path / "c", meta, layout) as w:
        w.write_packet("top", Packet(0, 0, True, b"\0"), 0)
        w.write_packet("top", Packet(0, 1, False, b"\0"), 1)
    with pytest.raises(ContainerError, match="write_packet"), EpisodeWriter(tmp_path / "d", meta, layout) as w:
        w.write_packet("top", Packet(0, 0, True, b"\0"), 0)
        w.write_frame("top", np.zeros((64, 64, 3), np.uint8), 1)
    assert not any(tmp_path.iterdir())  # no container left by a refused write


def test_video_copy_config_is_validated_up_front():
    with pytest.raises(ConfigError, match="video mode"):
        VideoCopyConfig(mode="fast")
    with pytest.raises(ConfigError, match="verify_gops"):
        VideoCopyConfig(verify_gops=-1)
    with pytest.raises(ConfigError, match="annexb_decode"):
        VideoCopyConfig(annexb_decode="some")


def test_cli_ingest_records_each_cameras_decision_in_the_catalog(tmp_path):
    """`robodata ingest --video`: the decision and its reason reach the catalog (video_json)."""
    import json

    from deltalake import DeltaTable
    from typer.testing import CliRunner

    from robodata.cli import app
    from robodata.ingest.tables import IngestPaths

    landing = tmp_path / "landing"
    _dataset(landing, "h264", 2)
    for mode, want in (("auto", "copy"), ("transcode", "transcode")):
        root = tmp_path / f"state-{mode}"
        res = CliRunner().invoke(app, ["ingest", str(landing), "--root", str(root), "--video", mode, "-q"])
        assert res.exit_code == 0, res.output
        rows = DeltaTable(IngestPaths(str(root)).catalog).to_pyarrow_table().to_pylist()
        assert [json.loads(r["video_json"])["top"]["mode"] for r in rows] == [want]
        summary = json.loads(res.output.strip().splitlines()[-1])["episodes"]  # the asset's metadata
        assert (summary["video_copied_streams"], summary["video_transcoded_streams"]) == (
            (1, 0) if want == "copy" else (0, 1)
        )
    res = CliRunner().invoke(app, ["ingest", str(landing), "--root", str(tmp_path / "x"), "--video", "fast"])
    assert res.exit_code != 0 and "video mode" in res.output


def _calibration(decode_s: float):
    from robodata.container.calibration import Calibration, CodecPoint

    point = CodecPoint(23, 0, (1e4, 1e3, 1e3), (decode_s,) * 3, 1e4, decode_s, 40.0, 40.0)
    return Calibration("h264", "veryfast", 64, 64, [point], 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize(("layout_decode_s", "mode"), [(1e-9, "transcode"), (1.0, "copy")])
def test_auto_prices_the_sources_decode_against_the_plans_calibration(tmp_path, layout_decode_s, mode):
    """With a plan's calibration, auto compares decode seconds per read: the source's measured, the
    layout's calibrated (here made free, or dear)."""
    from robodata.ingest.convert import episode_meta, layout_for
    from robodata.ingest.video_copy import plan_copy

    root = _dataset(tmp_path, "av1", 2)
    raw = open_raw(f"{root}#0", "lerobot-v2.1")
    meta, layout = episode_meta(raw, aligned_tracks(raw)), layout_for(raw)
    got = plan_copy(
        meta,
        layout,
        {"top": raw.video_sources("top")},
        {"top": 24},
        VideoCopyConfig(),
        {"": []},
        _calibration(layout_decode_s),
    )
    d = got.decisions["top"]
    assert d["mode"] == mode and "ms decoded per read" in d["reason"], d
    assert ("top" in got.copies) == (mode == "copy")
