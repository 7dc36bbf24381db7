"""foxglove.CompressedVideo topics (MCAP in JSON, protobuf or ROS 2 CDR): one message a frame.

Each message's `data` is one frame's packet as its encoder wrote it (H.264 / H.265 in Annex B with
the parameter sets on keyframes, AV1 as OBUs), `format` names the codec; B-frames are not part of
the schema, so frames are shown in message order. The packets are kept as recorded: a stream copy
stores them as they are (robodata.ingest.video_copy checks them from their headers: the keyframes
are found from the bitstream here, NAL unit / OBU types, there being no container flag to trust);
a transcode decodes them. The decoder's extradata is the first keyframe's parameter sets.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, cast

import av
from av.video.codeccontext import VideoCodecContext

from robodata.codecs import decoder_for
from robodata.codecs.bitstream import BitstreamError, Scanner, annexb_parameter_sets
from robodata.codecs.demux import SourcePacket, SourceVideo
from robodata.ingest.importers.messages import field as msg_field
from robodata.ingest.raw import RawEpisodeError

# CompressedVideo `format` -> codec (robodata's registry name where it has one, else FFmpeg's decoder)
FORMATS = {"h264": "h264", "h265": "hevc", "hevc": "hevc", "av1": "av1", "vp9": "vp9"}


def is_compressed_video(schema: str) -> bool:
    """foxglove.CompressedVideo (protobuf / JSON schema) or foxglove_msgs/msg/CompressedVideo (ROS 2)."""
    return schema.replace("/", ".").rsplit(".", 1)[-1] == "CompressedVideo"


@dataclass
class VideoTopic:
    """One CompressedVideo topic's packets, in message order."""

    topic: str
    where: str  # "<file>: <topic>", for messages
    codec: str = ""
    packets: list[bytes] = field(default_factory=list)
    size: tuple[int, int] | None = None  # (H, W) of the first frame, once decoded

    def add(self, msg: Any) -> None:
        fmt = str(msg_field(msg, "format", "")).lower()
        codec = FORMATS.get(fmt)
        if codec is None:
            raise RawEpisodeError(
                f"{self.where}: message {len(self.packets)}: CompressedVideo format {fmt!r} is not one of "
                f"{sorted(FORMATS)}"
            )
        if self.codec and codec != self.codec:
            raise RawEpisodeError(f"{self.where}: message {len(self.packets)}: format changes to {fmt!r}")
        self.codec = codec
        data = msg_field(msg, "data")
        data = base64.b64decode(data) if isinstance(data, str) else bytes(data)
        if not data:
            raise RawEpisodeError(f"{self.where}: message {len(self.packets)} holds no data")
        self.packets.append(data)

    def frames(self) -> Iterator[av.VideoFrame]:
        """Every message's frame, decoded in order. RawEpisodeError when the stream does not decode."""
        ctx = cast(VideoCodecContext, av.CodecContext.create(decoder_for(self.codec), "r"))
        try:
            for i, data in enumerate(self.packets):
                pkt = av.Packet(data)
                pkt.pts = pkt.dts = i
                yield from ctx.decode(pkt)
            yield from ctx.decode(None)
        except av.error.FFmpegError as exc:
            raise RawEpisodeError(f"{self.where}: the {self.codec} stream does not decode ({exc})") from None

    def shape(self) -> tuple[int, int, int]:
        """(H, W, 3) of the first decoded frame."""
        if self.size is None:
            f = next(iter(self.frames()), None)
            if f is None:
                raise RawEpisodeError(f"{self.where}: {len(self.packets)} messages decode to no frame")
            self.size = (f.height, f.width)
        return (*self.size, 3)

    def source(self) -> SourceVideo:
        """The packets for a stream copy: pts = dts = message index, keyframes read from the bitstream
        (a packet that does not parse is not one: robodata.ingest.video_copy refuses it, naming why)."""
        h, w, _ = self.shape()
        try:
            scanner: Scanner | None = Scanner(self.codec)
        except BitstreamError:
            scanner = None  # no header reader for the codec: video_copy refuses it as a codec the loader lacks
        keys = [_key(scanner, p) for p in self.packets]
        first = next((p for p, k in zip(self.packets, keys, strict=True) if k), b"")
        extradata = annexb_parameter_sets(self.codec, first) if self.codec in ("h264", "hevc") else b""
        packets = [SourcePacket(i, i, k, p, i) for i, (p, k) in enumerate(zip(self.packets, keys, strict=True))]
        return SourceVideo(self.codec, extradata, w, h, Fraction(1, 1), packets, self.where)


def _key(scanner: Scanner | None, data: bytes) -> bool:
    if scanner is None:
        return False
    try:
        return scanner.scan(data).key
    except BitstreamError:
        return False
