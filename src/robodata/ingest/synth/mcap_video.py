"""foxglove.CompressedVideo topics for a synthetic MCAP episode: each camera's frames encoded by
libx264 (PyAV) into Annex B access units, parameter sets repeated on every keyframe, no B-frames
(what the schema asks of a recorder), one message a frame, in JSON or protobuf encoding."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import av
import numpy as np

from robodata.codecs.video import yuv420p_frame
from robodata.config import require

COMPRESSED_VIDEO_SCHEMA = {
    "title": "foxglove.CompressedVideo",
    "type": "object",
    "properties": {
        "timestamp": {"type": "object", "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}}},
        "frame_id": {"type": "string"},
        "data": {"type": "string", "contentEncoding": "base64"},
        "format": {"type": "string"},
    },
}


@dataclass(frozen=True)
class CompressedVideoSpec:
    gop: int = 2  # frames between keyframes
    crf: int = 23
    encoding: str = "json"  # json | protobuf (foxglove's own schema, a FileDescriptorSet)

    def __post_init__(self) -> None:
        require(1 <= self.gop <= 600, f"gop must be in [1, 600], got {self.gop}")
        require(self.encoding in ("json", "protobuf"), f"encoding must be json or protobuf, got {self.encoding!r}")


def annexb_h264(frames: Iterable[np.ndarray], fps: float, spec: CompressedVideoSpec) -> Iterator[bytes]:
    """One Annex B access unit per RGB frame (libx264, no global header: SPS / PPS in band)."""
    ctx: Any = None
    for i, rgb in enumerate(frames):
        if ctx is None:
            ctx = av.CodecContext.create("libx264", "w")
            ctx.width, ctx.height, ctx.pix_fmt = rgb.shape[1], rgb.shape[0], "yuv420p"
            ctx.time_base = Fraction(1, round(fps))
            ctx.thread_count = 1  # one slice a picture on any host (x264 cuts a slice a thread)
            ctx.options = {
                "crf": str(spec.crf),
                "preset": "veryfast",
                "x264-params": f"keyint={spec.gop}:min-keyint={spec.gop}:scenecut=0:bframes=0:repeat-headers=1"
                ":cpu-independent=1",  # the same bytes every run (docs/container-format.md)
            }
        f = yuv420p_frame(rgb)
        f.pts = i
        yield from (bytes(p) for p in ctx.encode(f))
    if ctx is not None:
        yield from (bytes(p) for p in ctx.encode(None))


def _descriptor_set() -> bytes:
    """foxglove/CompressedVideo.proto (timestamp = 1, frame_id = 2, data = 3, format = 4) and its import."""
    from google.protobuf import descriptor_pb2, timestamp_pb2

    fds = descriptor_pb2.FileDescriptorSet()
    timestamp_pb2.DESCRIPTOR.CopyToProto(fds.file.add())
    f = fds.file.add(name="foxglove/CompressedVideo.proto", package="foxglove", syntax="proto3")
    f.dependency.append("google/protobuf/timestamp.proto")
    m = f.message_type.add(name="CompressedVideo")
    t = descriptor_pb2.FieldDescriptorProto
    for number, (name, typ) in enumerate(
        (("timestamp", t.TYPE_MESSAGE), ("frame_id", t.TYPE_STRING), ("data", t.TYPE_BYTES), ("format", t.TYPE_STRING)),
        start=1,
    ):
        m.field.add(name=name, number=number, type=typ, label=t.LABEL_OPTIONAL)
    m.field[0].type_name = ".google.protobuf.Timestamp"
    return fds.SerializeToString()


class VideoMessages:
    """Registers the schema on an mcap Writer and serialises CompressedVideo messages."""

    def __init__(self, writer, spec: CompressedVideoSpec):
        self.spec = spec
        if spec.encoding == "json":
            schema = json.dumps(COMPRESSED_VIDEO_SCHEMA).encode()
            self.schema_id = writer.register_schema("foxglove.CompressedVideo", "jsonschema", schema)
            self.cls = None
        else:
            from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

            data = _descriptor_set()
            pool = descriptor_pool.DescriptorPool()
            for fd in descriptor_pb2.FileDescriptorSet.FromString(data).file:
                pool.Add(fd)
            self.cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("foxglove.CompressedVideo"))
            self.schema_id = writer.register_schema("foxglove.CompressedVideo", "protobuf", data)

    @property
    def message_encoding(self) -> str:
        return self.spec.encoding

    def encode(self, t_ns: int, frame_id: str, data: bytes) -> bytes:
        sec, nsec = divmod(int(t_ns), 1_000_000_000)
        if self.cls is None:
            msg = {
                "timestamp": {"sec": sec, "nsec": nsec},
                "frame_id": frame_id,
                "data": base64.b64encode(data).decode(),
                "format": "h264",
            }
            return json.dumps(msg).encode()
        m = self.cls(frame_id=frame_id, data=data, format="h264")
        m.timestamp.seconds, m.timestamp.nanos = sec, nsec
        return m.SerializeToString()
