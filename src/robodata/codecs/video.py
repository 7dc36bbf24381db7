"""Raw video bitstream encode/decode with PyAV codec contexts (no muxer in the way)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import cast

import av
import numpy as np
from av.video.codeccontext import VideoCodecContext
from av.video.reformatter import VideoReformatter

from robodata.codecs import video_codec
from robodata.errors import CodecError, ConfigError

_tls = threading.local()


def yuv420p_frame(rgb: np.ndarray) -> av.VideoFrame:
    """An RGB uint8 array (H, W, 3) as a yuv420p frame, converted by single-threaded swscale. Handed
    an RGB frame, PyAV converts it inside `encode` on the encoder's thread count: with the default
    (auto) one, x264's output differed from run to run while other threads of the process decoded
    video (49 of 100 encodes of one clip, 96x64, 2026-12-07); converted here first, 0 of 100."""
    return av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24").reformat(format="yuv420p", threads=1)


def to_rgb(frame: av.VideoFrame) -> np.ndarray:
    """YUV -> RGB24 through a per-thread reformatter: its cached SwsContext saves ~1.5 ms/frame
    over frame.to_ndarray(format="rgb24"), which builds a new one for every frame."""
    # Single-threaded swscale, and a fresh reformatter per process: an inherited one (after
    # fork, e.g. DataLoader workers) may hold slice threads that no longer exist.
    rf = getattr(_tls, "reformatter", None)
    if rf is None or getattr(_tls, "pid", None) != os.getpid():
        rf = _tls.reformatter = VideoReformatter()
        _tls.pid = os.getpid()
    return rf.reformat(frame, format="rgb24", threads=1).to_ndarray()


@dataclass
class Packet:
    pts: int
    dts: int
    key: bool
    data: bytes
    ref: bool = True  # other frames may reference this one (False: droppable, skip_frame=NONREF)


def _annexb_nal_headers(data: bytes):
    i, n = 0, len(data)
    while True:
        j = data.find(b"\x00\x00\x01", i)
        if j < 0 or j + 3 >= n:
            return
        yield data[j + 3 : j + 5]
        i = j + 3


def is_reference(codec: str, data: bytes) -> bool:
    """Whether a packet's picture is a reference picture, from its first slice NAL header.

    H.264: nal_ref_idc != 0. HEVC: VCL types 0-14 that are even are sub-layer non-reference.
    Unknown codecs (AV1) are treated as reference (never skipped).
    """
    for head in _annexb_nal_headers(data):
        if codec == "h264":
            nal_type = head[0] & 0x1F
            if 1 <= nal_type <= 5:
                return (head[0] >> 5) & 0x3 != 0
        elif codec == "hevc":
            nal_type = (head[0] >> 1) & 0x3F
            if nal_type < 32:
                return not (nal_type <= 14 and nal_type % 2 == 0)
        else:
            return True
    return True


def _full_range(frame: av.VideoFrame) -> bool:
    """Full-range samples: the J formats, frames tagged JPEG range, and RGB."""
    name = frame.format.name
    return name.startswith("yuvj") or int(frame.color_range) == 2 or not name.startswith("yuv")


def encoder_pix_fmt(codec: str, first: np.ndarray | av.VideoFrame) -> str:
    """The encoder's input format for a stream whose first frame is `first`: H.264 takes a
    JPEG's full-range yuvj420p as it is (tagged full range in the bitstream, decoded back as
    yuvj420p); everything else is converted to yuv420p."""
    if codec == "h264" and isinstance(first, av.VideoFrame) and first.format.name == "yuvj420p":
        return "yuvj420p"
    return "yuv420p"


class VideoEncoder:
    """Encodes frames (RGB uint8 (H, W, 3) arrays or av.VideoFrames) into packets; keyframes
    every `gop` frames exactly."""

    def __init__(
        self,
        codec: str,
        width: int,
        height: int,
        rate_hz: float,
        gop: int,
        crf: int,
        preset: str = "veryfast",
        bframes: int = 0,
        threads: int = 0,
        pix_fmt: str = "yuv420p",
        entropy: str = "cabac",
        deblock: bool = True,
    ):
        spec = video_codec(codec)
        if entropy not in spec.entropies:
            raise ConfigError(f"entropy={entropy!r}: codec {codec!r} offers {list(spec.entropies)}")
        if deblock not in spec.deblocks:
            raise ConfigError(f"deblock={deblock!r}: codec {codec!r} offers {list(spec.deblocks)}")
        self.gop = gop
        self.codec = codec
        ctx = cast(VideoCodecContext, av.CodecContext.create(spec.encoder, "w"))
        ctx.width, ctx.height = width, height
        ctx.pix_fmt = pix_fmt
        self.pix_fmt = pix_fmt
        self._full_range = pix_fmt.startswith("yuvj")
        self._reformatter = VideoReformatter()
        rate = Fraction(rate_hz).limit_denominator(1001)
        ctx.framerate = rate
        ctx.time_base = 1 / rate
        ctx.gop_size = gop
        ctx.max_b_frames = bframes
        if threads:
            ctx.thread_count = threads
        # Global header: parameter sets go to extradata once, not into every keyframe.
        ctx.flags |= av.codec.context.Flags.global_header
        ctx.options = spec.options(gop, crf, preset, bframes, entropy, deblock)
        ctx.open()
        self._ctx = ctx
        self._n = 0
        self._closed = False

    @property
    def extradata(self) -> bytes:
        return bytes(self._ctx.extradata or b"")

    def encode(self, image: np.ndarray | av.VideoFrame) -> list[Packet]:
        """One frame: an RGB uint8 array, or a decoded frame in any pixel format (a frame already
        in the encoder's format, e.g. a JPEG's yuvj420p for a yuvj420p encoder, goes in as is)."""
        if isinstance(image, av.VideoFrame):
            same = image.format.name == self.pix_fmt and _full_range(image) == self._full_range
            frame = image if same else self._convert(image)
        else:
            frame = self._convert(av.VideoFrame.from_ndarray(image, format="rgb24"))
        frame.pts = self._n
        frame.time_base = self._ctx.time_base  # a demuxed frame carries its file's time base: PyAV would rescale pts
        # Decoded JPEG frames all carry pict_type I: set the type of every frame explicitly.
        frame.pict_type = av.video.frame.PictureType.I if self._n % self.gop == 0 else av.video.frame.PictureType.NONE
        self._n += 1
        return self._packets(self._ctx.encode(frame))

    def _convert(self, frame: av.VideoFrame) -> av.VideoFrame:
        """To the encoder's pixel format with explicit colour ranges (swscale does not infer them)."""
        return self._reformatter.reformat(
            frame,
            format=self.pix_fmt,
            threads=1,
            src_color_range=2 if _full_range(frame) else 1,
            dst_color_range=2 if self._full_range else 1,
        )

    def flush(self) -> list[Packet]:
        if self._closed:
            return []
        self._closed = True
        return self._packets(self._ctx.encode(None))

    def _packets(self, pkts: list[av.Packet]) -> list[Packet]:
        out = []
        for p in pkts:
            data = bytes(p)
            if p.pts is None:
                raise CodecError(f"{self.codec} encoder returned a packet without a pts")
            out.append(
                Packet(
                    int(p.pts),
                    int(p.dts if p.dts is not None else p.pts),
                    bool(p.is_keyframe),
                    data,
                    is_reference(self.codec, data),
                )
            )
        return out


def timing_decoder(codec: str, extradata: bytes) -> VideoCodecContext:
    """A decoder for `codec` (a registry name) on the calling thread alone, no frame or slice
    threads: what a CPU timing of decode work measures (the advisor's calibration, the stream-copy
    gate's pricing of a source)."""
    ctx = cast(VideoCodecContext, av.CodecContext.create(video_codec(codec).decoder, "r"))
    if extradata:
        ctx.extradata = extradata
    ctx.thread_count = 1
    ctx.thread_type = "NONE"
    return ctx


class VideoDecoder:
    """Decodes packets of one camera from a keyframe on; returns RGB uint8 frames by pts.

    With `size` = (H, W), a frame of any other size raises CodecError before it is converted
    (a bitstream may declare dimensions its container does not)."""

    def __init__(
        self,
        codec: str,
        extradata: bytes,
        threads: int = 1,
        skip_nonref: bool = False,
        size: tuple[int, int] | None = None,
    ):
        spec = video_codec(codec)
        self._codec = spec.decoder
        self._extradata = extradata
        self._threads = threads
        self._skip_nonref = skip_nonref
        self._size = size
        self.decoded = 0  # frames that came out of the decoder (work done), wanted or not

    def _rgb(self, frame: av.VideoFrame) -> np.ndarray:
        if self._size is not None and (frame.height, frame.width) != self._size:
            raise CodecError(
                f"decoded a {frame.height}x{frame.width} frame, the stream declares {self._size[0]}x{self._size[1]}"
            )
        return to_rgb(frame)

    def _context(self) -> VideoCodecContext:
        ctx = cast(VideoCodecContext, av.CodecContext.create(self._codec, "r"))
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
                self.decoded += 1
                if frame.pts in wanted:
                    out[frame.pts] = self._rgb(frame)
            if len(out) == len(wanted):
                return out
        for frame in ctx.decode(None):
            self.decoded += 1
            if frame.pts in wanted:
                out[frame.pts] = self._rgb(frame)
        return out
