"""Decoded frames go into the container without an RGB round trip, and come back with the
right colours: a JPEG's full-range yuvj420p is encoded as full-range H.264, a limited-range
yuv420p frame as limited range, and RGB arrays as before."""

from __future__ import annotations

import io

import av
import numpy as np
import pytest
from PIL import Image

from robodata.codecs.image import decode_jpeg_bytes, image_shape
from robodata.container import EpisodeReader, EpisodeWriter
from robodata.errors import RobodataError
from tests.core.helpers_container import CAMS, small_layout, small_meta

H, W, FPS, N = 48, 64, 20.0, 20


def _scene(i: int) -> np.ndarray:
    """Black and white bars (the extremes show a range mix-up) plus a moving grey ramp."""
    img = np.zeros((H, W, 3), np.uint8)
    img[:, W // 2 :] = 255
    img[H // 3 : 2 * H // 3] = np.linspace(30, 220, W, dtype=np.uint8)[None, :, None]
    img[:4, (2 * i) % W] = (255, 0, 0)
    return img


def _jpeg(img: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, "JPEG", quality=95)
    return buf.getvalue()


def _write(path, images_for):
    t = (np.arange(N) * 1e9 / FPS).astype(np.int64) + 1_000
    with EpisodeWriter(path, small_meta(h=H, w=W, fps=FPS), small_layout(gop=5)) as w:
        for i in range(N):
            for c in CAMS:
                w.write_frame(c, images_for(c, i), int(t[i]))
    return EpisodeReader.open(path)


def _frames(r: EpisodeReader, cam: str) -> np.ndarray:
    return r.read_window(0.0, N / FPS + 1.0, [cam])[cam].data


def test_jpeg_frames_keep_full_range_and_match_the_rgb_decode(tmp_path, monkeypatch):
    jpegs = [_jpeg(_scene(i)) for i in range(N)]
    frame = decode_jpeg_bytes(jpegs[0])
    assert isinstance(frame, av.VideoFrame) and frame.format.name == "yuvj420p"
    assert image_shape(frame) == (H, W, 3)
    ref = np.stack([np.asarray(Image.open(io.BytesIO(j)).convert("RGB")) for j in jpegs])
    r = _write(tmp_path / "j.rdep", lambda c, i: decode_jpeg_bytes(jpegs[i]))
    import robodata.codecs.video as video

    formats = []

    def spy(frame):
        formats.append(frame.format.name)
        return to_rgb(frame)

    to_rgb = video.to_rgb
    monkeypatch.setattr(video, "to_rgb", spy)
    got = _frames(r, CAMS[0])
    assert got.shape == ref.shape
    # Stored as full-range H.264: it decodes back to yuvj420p (no range conversion on either side).
    assert formats and set(formats) == {"yuvj420p"}
    assert np.abs(got.astype(int) - ref).mean() < 3.0
    # A range mix-up moves black to ~16 and white to ~235: the bars must stay at the extremes.
    assert got[:, 6 : H // 3 - 2, 2 : W // 2 - 4].mean() <= 4
    assert got[:, 6 : H // 3 - 2, W // 2 + 4 :].mean() >= 251


def test_limited_range_yuv_frames_and_rgb_arrays_mix_in_one_stream(tmp_path):
    rf = av.video.reformatter.VideoReformatter()

    def limited(i):
        f = av.VideoFrame.from_ndarray(_scene(i), format="rgb24")
        return rf.reformat(f, format="yuv420p", dst_color_range=1)

    def image(c, i):
        if c == CAMS[0]:  # RGB first, then limited-range frames and RGB arrays in turn
            return limited(i) if i % 2 else _scene(i)
        if c == CAMS[1]:  # a JPEG frame first (full-range encoder), then JPEG frames and RGB arrays
            return decode_jpeg_bytes(_jpeg(_scene(i))) if i % 2 == 0 else _scene(i)
        return limited(i) if i % 2 == 0 else decode_jpeg_bytes(_jpeg(_scene(i)))  # limited first, then JPEGs too

    r = _write(tmp_path / "m.rdep", image)
    ref = np.stack([_scene(i) for i in range(N)])
    for c in CAMS:
        got = _frames(r, c)
        assert np.abs(got.astype(int) - ref).mean() < 3.0, c
        assert got[:, 6 : H // 3 - 2, 2 : W // 2 - 4].mean() <= 4, c
        assert got[:, 6 : H // 3 - 2, W // 2 + 4 :].mean() >= 251, c


def test_a_frame_of_the_wrong_size_is_refused(tmp_path):
    small = decode_jpeg_bytes(_jpeg(np.zeros((H // 2, W, 3), np.uint8)))
    with (
        pytest.raises(RobodataError, match=r"has shape \(24, 64, 3\)"),
        EpisodeWriter(tmp_path / "bad.rdep", small_meta(h=H, w=W, fps=FPS), small_layout()) as w,
    ):
        w.write_frame(CAMS[0], small, 1_000)
