"""The ingest encoder (x264 as the codec registry sets it up) writes the same bytes for the same
frames whatever instruction set x264 picks on the host: with its SIMD capped at SSE4 or switched off
(its C code) as with all the host offers. Without `cpu-independent` its C code chose otherwise than
its SIMD code, and on AVX-512 hosts encodes of the same frames differed from run to run."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest

import robodata.codecs as codecs
from robodata.codecs.video import VideoEncoder
from robodata.container.meta import VideoSettings

H, W, N = 48, 64, 45


def _frames() -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    yy, xx = np.mgrid[0:H, 0:W]
    out = []
    for i in range(N):
        wave = (np.sin((xx + 4 * i) / 23.0) + np.cos((yy - 2 * i) / 17.0)) * 60 + 128
        out.append(np.clip(wave[..., None] + rng.normal(0, 6, (H, W, 3)), 0, 255).astype(np.uint8))
    return out


def _encode(frames: list[np.ndarray]) -> str:
    v = VideoSettings()
    enc = VideoEncoder(v.codec, W, H, 30.0, v.gop, v.crf, v.preset, v.bframes, threads=1)
    packets = [p for f in frames for p in enc.encode(f)] + enc.flush()
    assert len(packets) == N
    return hashlib.sha256(b"".join(p.data for p in packets)).hexdigest()


@pytest.mark.parametrize("cap", [":asm=SSE4", ":no-asm=1"])
def test_the_encoders_bytes_do_not_depend_on_the_hosts_instruction_set(monkeypatch, cap):
    frames = _frames()
    native = _encode(frames)
    spec = codecs.video_codec("h264")

    def capped(*args, **kw) -> dict[str, str]:
        opts = spec.options(*args, **kw)
        return {**opts, "x264-params": opts["x264-params"] + cap}

    monkeypatch.setitem(codecs._REGISTRY, "h264", dataclasses.replace(spec, options=capped))
    assert _encode(frames) == native
    assert _encode(frames) == native
