"""The delivery decoder's per-frame levers (robodata.dataset.frames): unwanted non-reference
packets are never sent to the decoder, and channel-first output comes from swscale's planar
RGB; both must return exactly the frames a plain decode of every packet returns."""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np
import pyarrow as pa
import pytest

import robodata.dataset.frames as frames_mod
from robodata.codecs.bitstream import Scanner
from robodata.container import EpisodeReader, Layout, TopicGroup, VideoSettings
from robodata.dataset.frames import GopDecoder, StreamFrames, fetch_streams
from tests.core.helpers_container import CAMS, write_small


def _encode(codec: str, params: str, n: int = 36, gop: int = 12, h: int = 48, w: int = 64):
    """Raw packets of a stream whose B-frames may be references (b-pyramid), in decode order."""
    enc = av.CodecContext.create({"h264": "libx264", "hevc": "libx265"}[codec], "w")
    enc.width, enc.height, enc.pix_fmt = w, h, "yuv420p"
    enc.time_base, enc.framerate = Fraction(1, 20), Fraction(20, 1)
    enc.options = {"crf": "20", "preset": "veryfast", f"{'x264' if codec == 'h264' else 'x265'}-params": params}
    rng = np.random.default_rng(1)
    base = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    pkts = []
    for i in range(n):
        img = np.roll(base, i, axis=1)
        img[: 4 + i % 7] = (i * 37) % 256  # changes every frame: a reference picture matters
        fr = av.VideoFrame.from_ndarray(img, format="rgb24").reformat(format="yuv420p")
        fr.pts = i
        pkts += enc.encode(fr)
    pkts += enc.encode(None)
    return [(int(p.pts), int(p.dts), bool(p.is_keyframe), bytes(p)) for p in pkts]


def _stream(codec: str, pkts) -> StreamFrames:
    sc = Scanner(codec)
    pts = np.array([p[0] for p in pkts], np.int64)
    return StreamFrames(
        pts,
        np.array([p[1] for p in pkts], np.int64),
        np.array([p[2] for p in pkts]),
        np.array([sc.scan(p[3]).ref for p in pkts]),
        pts / 20.0,
        pa.chunked_array([pa.array([p[3] for p in pkts], pa.binary())]),
        np.zeros(len(pkts), np.int64),
    )


def _full_decode(codec: str, pkts) -> dict[int, np.ndarray]:
    """Every packet sent, in order, no frame skipped: the reference."""
    ctx = av.CodecContext.create(codec, "r")
    out = {}
    for pts, dts, _k, data in pkts:
        p = av.Packet(data)
        p.pts, p.dts = pts, dts
        for f in ctx.decode(p):
            out[f.pts] = f.to_ndarray(format="rgb24")
    for f in ctx.decode(None):
        out[f.pts] = f.to_ndarray(format="rgb24")
    return out


@pytest.mark.parametrize(
    "codec,params",
    [
        ("h264", "keyint=12:min-keyint=12:scenecut=0:bframes=2:b-adapt=0:b-pyramid=none"),  # what our writer makes
        ("h264", "keyint=12:min-keyint=12:scenecut=0:bframes=3:b-adapt=0:b-pyramid=normal"),  # referenced B-frames
        ("hevc", "keyint=12:min-keyint=12:scenecut=0:bframes=3:b-adapt=0:b-pyramid=1:open-gop=0:log-level=error"),
    ],
)
def test_skipping_unwanted_nonreference_packets_returns_the_full_decodes_frames(codec, params, monkeypatch):
    pkts = _encode(codec, params)
    sf = _stream(codec, pkts)
    bframes = sum(1 for i in range(1, len(pkts)) if pkts[i][0] < pkts[i - 1][0])
    assert bframes > 0 and not sf.ref.all()  # B-frames, some droppable
    if "pyramid=normal" in params or "pyramid=1" in params:  # a referenced B: its nal_ref_idc/type says so
        reordered = [i for i in range(1, len(pkts) - 1) if pkts[i][0] < pkts[i - 1][0]]
        assert any(sf.ref[i] for i in reordered)
    full = _full_decode(codec, pkts)
    sent = []
    real = frames_mod._decoder

    class Spy:
        def __init__(self, ctx):
            self.ctx = ctx

        def decode(self, p):
            if p is not None:
                sent.append(int(p.pts))
            return self.ctx.decode(p)

        def flush_buffers(self):
            self.ctx.flush_buffers()

        def __setattr__(self, k, v):
            object.__setattr__(self, k, v) if k == "ctx" else setattr(self.ctx, k, v)

    monkeypatch.setattr(frames_mod, "_decoder", lambda c, e: Spy(real(c, e)))
    dec = GopDecoder(codec, b"", None, "ep", "cam")
    rng = np.random.default_rng(0)
    for wanted in [{0}, {4, 5}, {10, 11}, {13}, {22, 23}, {11, 12}, set(rng.choice(36, 6, replace=False).tolist())]:
        sent.clear()
        got = dec.decode(sf, {int(p) for p in wanted})
        assert set(got) == wanted
        for p in wanted:
            np.testing.assert_array_equal(got[p], full[p], err_msg=f"{codec} pts {p}")
        skipped = [int(p) for p, r in zip(sf.pts, sf.ref, strict=True) if not r and int(p) not in wanted]
        assert not set(sent) & set(skipped)  # no droppable unwanted picture reached the decoder
    sent.clear()
    dec.decode(sf, {10, 11})
    assert len(sent) < 12  # of the GOP's 12 packets, the unwanted droppable ones were never sent


@pytest.mark.parametrize("width,planar_taken", [(64, True), (100, None)])
def test_planar_frames_are_the_rgb24_frames_channels_first(tmp_path, monkeypatch, width, planar_taken):
    """Channel-first sinks get R, G, B planes: from gbrp where swscale's gbrp equals its rgb24
    (checked once per geometry), else views of the rgb24 frame (swscale 9.5's gbrp has garbage in
    the last columns of a width that is not a multiple of 16): the same bytes either way."""
    layout = Layout(
        groups=(
            TopicGroup("cameras", CAMS, 1.0, VideoSettings(gop=6, crf=23, bframes=2)),
            TopicGroup("proprio", ("joint_pos", "cmd"), 2.0),
            TopicGroup("events", ("events",), 60.0),
        )
    )
    write_small(tmp_path / "e.rdep", duration_s=1.5, layout=layout, w=width)
    r = EpisodeReader.open(tmp_path / "e.rdep")
    sf = fetch_streams(r, {"cam_left": (0.0, 2.0)})["cam_left"]
    wanted = {int(p) for p in sf.pts[::4]}
    hwc = GopDecoder("h264", r._extradata["cam_left"], None, "ep", "cam_left").decode(sf, wanted)
    gbrp = []
    real = frames_mod._planes
    monkeypatch.setattr(frames_mod, "_PLANAR_OK", {})  # the check runs here, once (its probe: one gbrp frame)
    monkeypatch.setattr(frames_mod, "_planes", lambda f: gbrp.append(1) or real(f))
    got: dict[int, tuple] = {}
    planar = GopDecoder("h264", r._extradata["cam_left"], None, "ep", "cam_left", planar=True)
    planar.decode_into(sf, wanted, lambda p, planes: got.__setitem__(p, tuple(x.copy() for x in planes)))
    assert set(got) == wanted
    for p in wanted:
        np.testing.assert_array_equal(np.stack(got[p]), hwc[p].transpose(2, 0, 1), err_msg=f"pts {p}")
    key = next(k for k in frames_mod._PLANAR_OK if k[1:3] == (width, 48))
    if planar_taken:  # a width of 64: gbrp is exact, and it is what the planes came from
        assert frames_mod._PLANAR_OK[key] and len(gbrp) == 1 + len(wanted)
    elif not frames_mod._PLANAR_OK[key]:  # gbrp not exact here: the planes are the rgb24 frame's
        assert len(gbrp) == 1  # the probe's only
