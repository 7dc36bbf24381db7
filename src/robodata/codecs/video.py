"""Raw video bitstream encode/decode with PyAV codec contexts (no muxer in the way)."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

import av
import numpy as np
from av.video.reformatter import VideoReformatter

_tls = threading.local()


def to_rgb(frame: av.VideoFrame) -> np.ndarray:
    """YUV -> RGB24 through a per-thread reformatter: its cached SwsContext saves ~1.5 ms/frame
    over frame.to_ndarray(format="rgb24"), which builds a new one for every frame."""
    rf = getattr(_tls, "reformatter", None)
    if rf is None:
        rf = _tls.reformatter = VideoReformatter()
    return rf.reformat(frame, format="rgb24").to_ndarray()

from robodata.codecs import video_codec


@dataclass
class Packet:
    pts: int
    dts: int
    key: bool
    data: bytes


class VideoEncoder:
    """Encodes RGB uint8 frames (H, W, 3) into packets; keyframes every `gop` frames exactly."""

    def __init__(self, codec: str, width: int, height: int, rate_hz: float, gop: int, crf: int,
                 preset: str = "veryfast", bframes: int = 0, threads: int = 0):
        spec = video_codec(codec)
        self.gop = gop
        ctx = av.CodecContext.create(spec.encoder, "w")
        ctx.width, ctx.height = width, height
        ctx.pix_fmt = "yuv420p"
        rate = Fraction(rate_hz).limit_denominator(1001)
        ctx.framerate = rate
        ctx.time_base = 1 / rate
        ctx.gop_size = gop
        ctx.max_b_frames = bframes
        if threads:
            ctx.thread_count = threads
        # Global header: parameter sets go to extradata once, not into every keyframe.
        ctx.flags |= av.codec.context.Flags.global_header
        ctx.options = spec.options(gop, crf, preset, bframes)
        ctx.open()
        self._ctx = ctx
        self._n = 0
        self._closed = False

    @property
    def extradata(self) -> bytes:
        return bytes(self._ctx.extradata or b"")

    def encode(self, rgb: np.ndarray) -> list[Packet]:
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        frame.pts = self._n
        if self._n % self.gop == 0:
            frame.pict_type = av.video.frame.PictureType.I
        self._n += 1
        return self._packets(self._ctx.encode(frame))

    def flush(self) -> list[Packet]:
        if self._closed:
            return []
        self._closed = True
        return self._packets(self._ctx.encode(None))

    @staticmethod
    def _packets(pkts: list[av.Packet]) -> list[Packet]:
        return [Packet(int(p.pts), int(p.dts if p.dts is not None else p.pts), bool(p.is_keyframe), bytes(p)) for p in pkts]


class VideoDecoder:
    """Decodes packets of one camera from a keyframe on; returns RGB uint8 frames by pts."""

    def __init__(self, codec: str, extradata: bytes, threads: int = 1, skip_nonref: bool = False):
        spec = video_codec(codec)
        self._codec = spec.decoder
        self._extradata = extradata
        self._threads = threads
        self._skip_nonref = skip_nonref

    def _context(self) -> av.CodecContext:
        ctx = av.CodecContext.create(self._codec, "r")
        if self._extradata:
            ctx.extradata = self._extradata
        ctx.thread_count = self._threads
        ctx.thread_type = "SLICE" if self._threads > 1 else "NONE"
        if self._skip_nonref:
            ctx.skip_frame = "NONREF"
        return ctx

    def decode(self, packets: Iterable[tuple[int, int, bytes]], wanted: set[int]) -> dict[int, np.ndarray]:
        """Decode (pts, dts, data) packets in decode order starting at a keyframe.

        Stops as soon as every wanted pts has come out; returns {pts: rgb}.
        """
        ctx = self._context()
        out: dict[int, np.ndarray] = {}
        for pts, dts, data in packets:
            pkt = av.Packet(data)
            pkt.pts, pkt.dts = pts, dts
            for frame in ctx.decode(pkt):
                if frame.pts in wanted:
                    out[frame.pts] = to_rgb(frame)
            if len(out) == len(wanted):
                return out
        for frame in ctx.decode(None):
            if frame.pts in wanted:
                out[frame.pts] = to_rgb(frame)
        return out
