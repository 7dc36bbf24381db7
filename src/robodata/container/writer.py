"""EpisodeWriter: streams frames and arrays into one container object.

Video is encoded as frames arrive; a camera-group chunk is written as soon as every camera
of the group has completed the chunk's GOPs, so memory holds at most about one chunk span
of compressed packets. Low-dimensional streams are buffered (they are small) and chunked
by their group's span at close.
"""

from __future__ import annotations

import base64
import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

import av
import numpy as np
import numpy.typing as npt

from robodata.codecs.arrays import packets_view
from robodata.codecs.image import Image, image_shape
from robodata.codecs.video import Packet
from robodata.container import inputs
from robodata.container.cameras import Camera, CopiedCamera, EncodedCamera
from robodata.container.format import (
    ChunkInfo,
    PartInfo,
    checksum,
    crc32_combine,
    encode_footer,
    pack_header,
    pack_trailer,
)
from robodata.container.lowdim import lowdim_chunks
from robodata.container.meta import EpisodeMeta, Layout, StreamSpec, TopicGroup
from robodata.errors import ContainerError


@dataclass(frozen=True)
class Written:
    """What a closed writer wrote, for the catalog (no reopen needed): where its footer is, its
    layout version and duration."""

    footer_offset: int
    footer_length: int
    layout_version: str
    duration_s: float


class EpisodeWriter:
    """Writes one episode container in a single sequential pass.

    Every call a user can get wrong raises ContainerError naming the episode (the stream and the
    expected values in the message); a writer left by an exception (``with`` block) writes no
    footer, so the object stays unreadable rather than half-valid.
    """

    def __init__(self, target: str | os.PathLike[str] | IO[bytes], meta: EpisodeMeta, layout: Layout):
        """Start a container.

        Args:
            target: a local path (opened, fsync'ed and closed by close()) or a writable binary file object.
            meta: the episode: id, origin, start time and every stream's spec.
            layout: topic groups and their chunk spans / video settings; every stream in exactly one.

        Raises:
            ContainerError: a stream is in no group, a camera shares a group with other streams, a
                stream name is unsafe, or a declared shape is more than a reader decodes.
        """
        if not isinstance(meta, EpisodeMeta) or not isinstance(layout, Layout):
            raise ContainerError(
                str(getattr(meta, "episode_id", "?")), "EpisodeWriter needs an EpisodeMeta and a Layout"
            )
        self.meta = meta
        for name, spec in meta.streams.items():
            inputs.check_stream(meta.episode_id, name, spec, layout)
        self.layout = layout
        self._own = isinstance(target, (str, os.PathLike))
        # closed by close()/__exit__, which also seal the footer. A path target is written under a
        # temporary name next to it and renamed when sealed, so the path holds a whole container or
        # nothing (an aborted or crashed write leaves no object there).
        self._path, self._tmp = "", ""
        if isinstance(target, (str, os.PathLike)):
            self._path = os.fspath(target)
            self._tmp = f"{self._path}.{os.getpid()}.{id(self):x}.tmp"
            self._f: IO[bytes] = open(self._tmp, "wb")  # noqa: SIM115
        else:
            self._f = target
        self._pos = 0
        self._chunks: list[ChunkInfo] = []
        self._cams: dict[str, Camera] = {}
        self._arrays: dict[str, list[tuple[np.ndarray, Any]]] = {}
        self._t_min: int | None = None
        self._t_max: int | None = None
        self._closed = False
        self.written: Written | None = None  # set by close()
        self._emit(pack_header())

    # ----------------------------------------------------------------- public API
    def write_frame(self, stream: str, image: Image, t_ns: int) -> None:
        """One camera frame: an RGB uint8 (H, W, 3) array or a decoded av.VideoFrame (see
        robodata.codecs.image); frames go to the encoder without an RGB round trip.

        Args:
            stream: a video stream of the episode.
            image: the frame, of the stream's declared (H, W, 3) shape.
            t_ns: its time in ns since meta.start_time_ns; strictly increasing per camera.

        Raises:
            ContainerError: unknown or non-video stream, wrong shape or dtype, a time that does
                not increase, an encoder failure, or a closed writer.
        """
        spec = self._spec(stream, "video")
        shape = image_shape(image)
        if shape != spec.shape or (isinstance(image, np.ndarray) and image.dtype != np.uint8):
            dtype = f" {image.dtype}" if isinstance(image, np.ndarray) else ""
            raise self._err(f"frame for {stream!r} has shape {shape}{dtype}, expected {spec.shape} uint8")
        t_ns = inputs.time(self.meta.episode_id, stream, t_ns)
        cam = self._cams.get(stream)
        if isinstance(cam, CopiedCamera):
            raise self._err(f"{stream!r} is a stream copy: its packets come through write_packet")
        if cam is not None and cam.last_t is not None and t_ns <= cam.last_t:
            raise self._err(f"{stream!r} timestamps must increase ({t_ns} after {cam.last_t})")
        try:
            if cam is None:
                cam = self._cams[stream] = EncodedCamera(self.layout.group_of(stream), spec.shape, spec.rate_hz, image)
            assert isinstance(cam, EncodedCamera)
            packets = cam.encoder.encode(image)
        except (av.error.FFmpegError, ValueError, TypeError) as exc:
            raise self._err(f"{stream!r}: the encoder refused the frame: {exc}") from exc
        cam.last_t = t_ns
        cam.t_by_pts[cam.frames] = t_ns
        cam.frames += 1
        self._touch(t_ns)
        cam.take(packets)
        self._flush_video(self.layout.group_of(stream), final=False)

    def write_packet(self, stream: str, packet: Packet, t_ns: int, extradata: bytes = b"") -> None:
        """One compressed packet stored as it is: write_packets with one packet."""
        self.write_packets(stream, [packet], [inputs.time(self.meta.episode_id, stream, t_ns)], extradata)

    def write_packets(
        self, stream: str, packets: Sequence[Packet], t_ns: npt.ArrayLike, extradata: bytes = b""
    ) -> None:
        """Compressed packets stored as they are (a stream copy: no decode, no encode); several
        calls append.

        Args:
            stream: a video stream of the episode whose group's codec is the packets'.
            packets: in decode order; `pts` is the frame's display index (0, 1, ... per camera),
                `dts` increases; a camera's first packet is a keyframe.
            t_ns: each packet's frame time in ns since meta.start_time_ns; increasing with pts.
            extradata: the decoder's parameter sets (avcC / hvcC / av1C or Annex B), taken from a
                camera's first call.

        Raises:
            ContainerError: unknown or non-video stream, a camera written by write_frame, a first
                packet that is no keyframe, a pts seen before, a dts that does not increase, a
                time that does not increase with pts (when its chunk is cut), or a closed writer.
        """
        self._spec(stream, "video")
        ts = inputs.times(self.meta.episode_id, stream, t_ns)
        if len(ts) != len(packets):
            raise self._err(f"{stream!r}: {len(ts)} times for {len(packets)} packets")
        if not len(packets):
            return
        cam = self._cams.get(stream)
        if cam is None:
            if not packets[0].key:
                raise self._err(f"{stream!r}: a stream copy must open on a keyframe (packet pts {packets[0].pts})")
            cam = self._cams[stream] = CopiedCamera(bytes(extradata))
        if not isinstance(cam, CopiedCamera):
            raise self._err(f"{stream!r} is encoded from frames: write_packet cannot add to it")
        why = cam.accept(packets, ts.tolist())
        if why:
            raise self._err(f"{stream!r}: {why}")
        self._touch(int(ts.min()))
        self._touch(int(ts.max()))
        self._flush_video(self.layout.group_of(stream), final=False)  # completed GOPs: a chunk may be due

    def copied(self, stream: str) -> tuple[list[Packet], bytes]:
        """A stream-copied camera's packets as written into its chunks, in order, and its extradata."""
        cam = self._cams.get(stream)
        return (list(cam.stored), cam.extradata) if isinstance(cam, CopiedCamera) else ([], b"")

    def write_array(self, stream: str, t_ns: npt.ArrayLike, values: npt.ArrayLike) -> None:
        """Samples of an array stream; may be called several times, in time order.

        Args:
            stream: an array stream of the episode.
            t_ns: (N,) times in ns since meta.start_time_ns, sorted, not before earlier calls.
            values: (N, *shape) values, convertible to the stream's dtype.

        Raises:
            ContainerError: unknown or non-array stream, shapes that do not match, values that
                do not convert, unsorted or backward times, or a closed writer.
        """
        spec = self._spec(stream, "array")
        t_ns = inputs.times(self.meta.episode_id, stream, t_ns)
        try:
            values = np.asarray(values, dtype=spec.dtype)
        except (TypeError, ValueError, OverflowError) as exc:
            raise self._err(f"{stream!r} values do not convert to {spec.dtype}: {exc}") from None
        if values.ndim == 0 or values.shape[1:] != spec.shape or len(values) != len(t_ns):
            raise self._err(
                f"{stream!r} values {values.shape} do not match {len(t_ns)} timestamps x shape {spec.shape}"
            )
        self._append(stream, t_ns, values)

    def write_events(
        self, stream: str, t_ns: npt.ArrayLike, labels: list[str], payloads: list[dict] | None = None
    ) -> None:
        """Events (a label and an optional JSON payload each); may be called several times, in time order.

        Args:
            stream: an events stream of the episode.
            t_ns: (N,) sorted times in ns since meta.start_time_ns, not before earlier calls.
            labels: N strings.
            payloads: N JSON-serialisable dicts, or None for empty ones.

        Raises:
            ContainerError: unknown or non-events stream, labels that are not strings, payloads
                that are not JSON objects, counts that do not match, unsorted times, a closed writer.
        """
        self._spec(stream, "events")
        t = inputs.times(self.meta.episode_id, stream, t_ns)
        self._append(stream, t, inputs.events(self.meta.episode_id, stream, len(t), labels, payloads))

    def close(self) -> None:
        """Write the last chunks, the footer and the trailer; closes (and fsyncs) a path target.

        Raises:
            ContainerError: a chunk or the footer would be more than a default reader decodes
                (ReaderConfig); the writer is aborted then (no footer).
        """
        if self._closed:
            return
        try:
            self._seal()
        except BaseException:
            self.abort()
            raise

    def _seal(self) -> None:
        for cam in self._cams.values():
            cam.finish()
        for g in self.layout.groups:
            if g.video is not None:
                self._flush_video(g, final=True)
            else:
                self._flush_lowdim(g)
        self.meta.duration_s = 0.0 if self._t_min is None else (self._t_max - self._t_min) / 1e9  # type: ignore[operator]
        codec_data = {n: base64.b64encode(c.extradata).decode() for n, c in self._cams.items()}
        footer = encode_footer(
            self.meta.to_dict(), {**self.layout.to_dict(), "version": self.layout.version}, codec_data, self._chunks
        )
        if len(footer) > inputs.READABLE.max_footer_bytes:
            raise self._err(f"footer of {len(footer):,} bytes is over ReaderConfig.max_footer_bytes (too many chunks)")
        footer_offset = self._pos
        self._emit(footer)
        self._emit(pack_trailer(footer_offset, footer))
        self._f.flush()
        if self._own:
            os.fsync(self._f.fileno())
            self._f.close()
            os.replace(self._tmp, self._path)
        self._closed = True
        self.written = Written(footer_offset, len(footer), str(self.layout.version), self.meta.duration_s)

    def abort(self) -> None:
        """Stop without writing a footer: a path target's temporary file is removed (nothing at the
        path); a file-like target is left without a footer (unreadable rather than half-valid)."""
        self._closed = True
        if self._own:
            self._f.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._tmp)

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    # ----------------------------------------------------------------- internals
    def _err(self, message: str) -> ContainerError:
        return ContainerError(self.meta.episode_id, message)

    def _spec(self, stream: str, kind: str) -> StreamSpec:
        if self._closed:
            raise self._err(f"write to {stream!r} after the writer was closed")
        spec = self.meta.streams.get(stream) if isinstance(stream, str) else None
        if spec is None:
            raise self._err(f"unknown stream {stream!r}; declared: {sorted(self.meta.streams)}")
        if spec.kind != kind:
            raise self._err(f"stream {stream!r} is {spec.kind}, not {kind}")
        return spec

    def _touch(self, t: int) -> None:
        self._t_min = t if self._t_min is None else min(self._t_min, t)
        self._t_max = t if self._t_max is None else max(self._t_max, t)

    def _append(self, stream: str, t_ns: np.ndarray, values: Any) -> None:
        if len(t_ns) == 0:
            return
        if np.any(np.diff(t_ns) < 0):
            raise self._err(f"{stream!r} timestamps are not sorted")
        prev = self._arrays.get(stream)
        if prev and t_ns[0] < prev[-1][0][-1]:
            raise self._err(f"{stream!r} appended data goes back in time")
        self._arrays.setdefault(stream, []).append((t_ns, values))
        self._touch(int(t_ns[0]))
        self._touch(int(t_ns[-1]))

    def _emit(self, data: bytes | memoryview) -> None:
        self._f.write(data)
        self._pos += len(data)

    def _write_chunk(self, group: str, parts: Sequence[tuple[str, bytes | memoryview, int, int, int]]) -> None:
        offset, rel, infos = self._pos, 0, []
        crc = 0
        for stream, blob, t0, t1, count in parts:
            infos.append(PartInfo(stream, rel, len(blob), checksum(blob), t0, t1, count))
            crc = crc32_combine(crc, infos[-1].checksum, len(blob))  # the chunk's, from its parts' (one pass)
            self._emit(blob)
            rel += len(blob)
        self._chunks.append(
            ChunkInfo(
                len(self._chunks),
                group,
                min(p.t_start for p in infos),
                max(p.t_end for p in infos),
                offset,
                rel,
                crc & 0xFFFFFFFF,
                tuple(infos),
            )
        )

    def _flush_video(self, group: TopicGroup, final: bool) -> None:
        cams = [self._cams[s] for s in group.streams if s in self._cams]
        if not cams:
            return
        per_chunk = {
            s: max(1, round(group.chunk_span_s * self.meta.streams[s].rate_hz / group.video.gop))  # type: ignore[union-attr]
            for s in group.streams
        }
        while True:
            names = [s for s in group.streams if s in self._cams]
            if not final and any(len(self._cams[s].ready) < per_chunk[s] for s in names):
                return
            if final and all(not self._cams[s].ready for s in names):
                return
            parts = []
            for s in names:
                cam = self._cams[s]
                gops = [cam.ready.popleft() for _ in range(min(per_chunk[s], len(cam.ready)))]
                pkts = [p for g in gops for p in g]
                if not pkts:
                    continue
                ts = [cam.t_by_pts.pop(p.pts) for p in pkts]
                why = cam.store(pkts, ts) if isinstance(cam, CopiedCamera) else ""
                if why:
                    raise self._err(f"{s!r}: {why}")
                blob = packets_view(
                    (
                        [p.pts for p in pkts],
                        [p.dts for p in pkts],
                        [p.key for p in pkts],
                        ts,
                        [p.data for p in pkts],
                        [p.ref for p in pkts],
                    ),
                    stream=s,
                )
                parts.append((s, blob, min(ts), max(ts), len(pkts)))
            self._write_chunk(group.name, parts)

    def _flush_lowdim(self, group: TopicGroup) -> None:
        data = {s: self._arrays.pop(s) for s in group.streams if s in self._arrays}
        for parts in lowdim_chunks(self.meta, group, data):
            self._write_chunk(group.name, parts)
