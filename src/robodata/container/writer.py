"""EpisodeWriter: streams frames and arrays into one container object.

Video is encoded as frames arrive; a camera-group chunk is written as soon as every camera
of the group has completed the chunk's GOPs, so memory holds at most about one chunk span
of compressed packets. Low-dimensional streams are buffered (they are small) and chunked
by their group's span at close.
"""

from __future__ import annotations

import base64
import os
import zlib
from collections import deque
from typing import IO, Any

import numpy as np

from robodata.codecs.arrays import encode_array, encode_events, encode_packets
from robodata.codecs.image import Image, image_shape
from robodata.codecs.video import Packet, VideoEncoder, encoder_pix_fmt
from robodata.container.format import ChunkInfo, PartInfo, checksum, encode_footer, pack_header, pack_trailer
from robodata.container.meta import EpisodeMeta, Layout, TopicGroup
from robodata.errors import RobodataError


class _Camera:
    def __init__(self, group: TopicGroup, spec_shape: tuple[int, ...], rate_hz: float, first: Image):
        v = group.video
        assert v is not None
        h, w, _ = spec_shape
        self.encoder = VideoEncoder(
            v.codec,
            w,
            h,
            rate_hz,
            v.gop,
            v.crf,
            v.preset,
            v.bframes,
            v.threads,
            pix_fmt=encoder_pix_fmt(v.codec, first),
        )
        self.shape = spec_shape
        self.t_by_pts: dict[int, int] = {}
        self.last_t: int | None = None
        self.current: list[Packet] = []  # GOP being filled
        self.ready: deque[list[Packet]] = deque()  # completed GOPs not yet written
        self.frames = 0

    def take(self, packets: list[Packet]) -> None:
        for p in packets:
            if p.key and self.current:
                self.ready.append(self.current)
                self.current = []
            self.current.append(p)

    def finish(self) -> None:
        self.take(self.encoder.flush())
        if self.current:
            self.ready.append(self.current)
            self.current = []


class EpisodeWriter:
    def __init__(self, target: str | os.PathLike[str] | IO[bytes], meta: EpisodeMeta, layout: Layout):
        for name, spec in meta.streams.items():
            try:
                g = layout.group_of(name)
            except KeyError:
                raise RobodataError(
                    f"episode {meta.episode_id!r}: stream {name!r} is in no topic group of the layout"
                ) from None
            if (spec.kind == "video") != (g.video is not None):
                raise RobodataError(
                    f"episode {meta.episode_id!r}: stream {name!r} ({spec.kind}) is in group {g.name!r} "
                    f"which {'has' if g.video else 'has no'} video settings; never mix cameras and other streams"
                )
        self.meta = meta
        self.layout = layout
        self._own = isinstance(target, (str, os.PathLike))
        # closed by close()/__exit__, which also seal the footer
        self._f: IO[bytes] = open(target, "wb") if self._own else target  # type: ignore[arg-type]  # noqa: SIM115
        self._pos = 0
        self._chunks: list[ChunkInfo] = []
        self._cams: dict[str, _Camera] = {}
        self._arrays: dict[str, list[tuple[np.ndarray, Any]]] = {}
        self._t_min: int | None = None
        self._t_max: int | None = None
        self._closed = False
        self._emit(pack_header())

    # ----------------------------------------------------------------- public API
    def write_frame(self, stream: str, image: Image, t_ns: int) -> None:
        """One camera frame: an RGB uint8 (H, W, 3) array or a decoded av.VideoFrame (see
        robodata.codecs.image); frames go to the encoder without an RGB round trip."""
        spec = self._spec(stream, "video")
        shape = image_shape(image)
        if shape != spec.shape or (isinstance(image, np.ndarray) and image.dtype != np.uint8):
            dtype = f" {image.dtype}" if isinstance(image, np.ndarray) else ""
            raise RobodataError(
                f"episode {self.meta.episode_id!r}: frame for {stream!r} has shape {shape}{dtype}, "
                f"expected {spec.shape} uint8"
            )
        cam = self._cams.get(stream)
        if cam is None:
            cam = self._cams[stream] = _Camera(self.layout.group_of(stream), spec.shape, spec.rate_hz, image)
        t_ns = int(t_ns)
        if cam.last_t is not None and t_ns <= cam.last_t:
            raise RobodataError(
                f"episode {self.meta.episode_id!r}: {stream!r} timestamps must increase ({t_ns} after {cam.last_t})"
            )
        cam.last_t = t_ns
        cam.t_by_pts[cam.frames] = t_ns
        cam.frames += 1
        self._touch(t_ns)
        cam.take(cam.encoder.encode(image))
        self._flush_video(self.layout.group_of(stream), final=False)

    def write_array(self, stream: str, t_ns: np.ndarray, values: np.ndarray) -> None:
        spec = self._spec(stream, "array")
        t_ns = np.asarray(t_ns, dtype=np.int64)
        values = np.asarray(values, dtype=spec.dtype)
        if values.shape[1:] != spec.shape or len(values) != len(t_ns):
            raise RobodataError(
                f"episode {self.meta.episode_id!r}: {stream!r} values {values.shape} do not match "
                f"{len(t_ns)} timestamps x shape {spec.shape}"
            )
        self._append(stream, t_ns, values)

    def write_events(
        self, stream: str, t_ns: np.ndarray, labels: list[str], payloads: list[dict] | None = None
    ) -> None:
        self._spec(stream, "events")
        t_ns = np.asarray(t_ns, dtype=np.int64)
        if len(labels) != len(t_ns):
            raise RobodataError(
                f"episode {self.meta.episode_id!r}: {stream!r}: {len(labels)} labels for {len(t_ns)} timestamps"
            )
        self._append(stream, t_ns, (list(labels), list(payloads) if payloads else [{}] * len(labels)))

    def close(self) -> None:
        if self._closed:
            return
        for cam in self._cams.values():
            cam.finish()
        for g in self.layout.groups:
            if g.video is not None:
                self._flush_video(g, final=True)
            else:
                self._flush_lowdim(g)
        self.meta.duration_s = 0.0 if self._t_min is None else (self._t_max - self._t_min) / 1e9  # type: ignore[operator]
        codec_data = {n: base64.b64encode(c.encoder.extradata).decode() for n, c in self._cams.items()}
        footer = encode_footer(
            self.meta.to_dict(), {**self.layout.to_dict(), "version": self.layout.version}, codec_data, self._chunks
        )
        footer_offset = self._pos
        self._emit(footer)
        self._emit(pack_trailer(footer_offset, footer))
        self._f.flush()
        if self._own:
            os.fsync(self._f.fileno())
            self._f.close()
        self._closed = True

    def abort(self) -> None:
        """Stop without writing a footer: the object stays unreadable rather than half-valid."""
        self._closed = True
        if self._own:
            self._f.close()

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    # ----------------------------------------------------------------- internals
    def _spec(self, stream: str, kind: str):
        spec = self.meta.streams.get(stream)
        if spec is None:
            raise RobodataError(
                f"episode {self.meta.episode_id!r}: unknown stream {stream!r}; declared: {sorted(self.meta.streams)}"
            )
        if spec.kind != kind:
            raise RobodataError(f"episode {self.meta.episode_id!r}: stream {stream!r} is {spec.kind}, not {kind}")
        return spec

    def _touch(self, t: int) -> None:
        self._t_min = t if self._t_min is None else min(self._t_min, t)
        self._t_max = t if self._t_max is None else max(self._t_max, t)

    def _append(self, stream: str, t_ns: np.ndarray, values: Any) -> None:
        if len(t_ns) == 0:
            return
        if np.any(np.diff(t_ns) < 0):
            raise RobodataError(f"episode {self.meta.episode_id!r}: {stream!r} timestamps are not sorted")
        prev = self._arrays.get(stream)
        if prev and t_ns[0] < prev[-1][0][-1]:
            raise RobodataError(f"episode {self.meta.episode_id!r}: {stream!r} appended data goes back in time")
        self._arrays.setdefault(stream, []).append((t_ns, values))
        self._touch(int(t_ns[0]))
        self._touch(int(t_ns[-1]))

    def _emit(self, data: bytes) -> None:
        self._f.write(data)
        self._pos += len(data)

    def _write_chunk(self, group: str, parts: list[tuple[str, bytes, int, int, int]]) -> None:
        offset, rel, infos = self._pos, 0, []
        crc = 0
        for stream, blob, t0, t1, count in parts:
            infos.append(PartInfo(stream, rel, len(blob), checksum(blob), t0, t1, count))
            crc = zlib.crc32(blob, crc)
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
                blob = encode_packets(
                    [p.pts for p in pkts],
                    [p.dts for p in pkts],
                    [p.key for p in pkts],
                    ts,
                    [p.data for p in pkts],
                    [p.ref for p in pkts],
                )
                parts.append((s, blob, min(ts), max(ts), len(pkts)))
            self._write_chunk(group.name, parts)

    def _flush_lowdim(self, group: TopicGroup) -> None:
        data = {s: self._arrays.pop(s) for s in group.streams if s in self._arrays}
        if not data:
            return
        merged: dict[str, tuple[np.ndarray, Any]] = {}
        for s, pieces in data.items():
            t = np.concatenate([p[0] for p in pieces])
            if self.meta.streams[s].kind == "events":
                merged[s] = (t, ([x for p in pieces for x in p[1][0]], [x for p in pieces for x in p[1][1]]))
            else:
                merged[s] = (t, np.concatenate([p[1] for p in pieces]))
        t_lo = min(int(v[0][0]) for v in merged.values())
        t_hi = max(int(v[0][-1]) for v in merged.values())
        span = int(group.chunk_span_s * 1e9)
        for start in range(t_lo, t_hi + 1, span):
            parts = []
            for s, (t, vals) in merged.items():
                lo, hi = np.searchsorted(t, start), np.searchsorted(t, start + span)
                if hi <= lo:
                    continue
                if self.meta.streams[s].kind == "events":
                    blob = encode_events(t[lo:hi], vals[0][lo:hi], vals[1][lo:hi])
                else:
                    blob = encode_array(t[lo:hi], vals[lo:hi])
                parts.append((s, blob, int(t[lo]), int(t[hi - 1]), int(hi - lo)))
            if parts:
                self._write_chunk(group.name, parts)
