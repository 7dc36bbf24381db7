"""EpisodeReader: open a container by its footer, read time windows touching only needed chunks."""

from __future__ import annotations

import base64
import os
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robodata.codecs.arrays import decode_array, decode_events, decode_packets
from robodata.codecs.video import VideoDecoder
from robodata.container.format import TRAILER, ChunkInfo, PartInfo, checksum, decode_footer, unpack_trailer
from robodata.container.meta import EpisodeMeta, Layout
from robodata.container.source import RangeSource, open_source
from robodata.errors import ContainerError

_TAIL_GUESS = 64 * 1024  # first read at open: trailer plus, usually, the whole footer


@dataclass
class Window:
    data: np.ndarray  # video: uint8 (T, H, W, 3); array: (N, *shape); events: object (N,)
    t: np.ndarray  # float64 seconds since episode start


@dataclass
class ReaderStats:
    range_reads: int = 0
    bytes_read: int = 0
    chunks_read: int = 0
    frames_decoded: int = 0


@dataclass
class _Wanted:
    chunk: ChunkInfo
    parts: list[PartInfo] = field(default_factory=list)


class EpisodeReader:
    def __init__(
        self, source: RangeSource, doc: dict[str, Any], footer_offset: int, footer_length: int, decode_threads: int = 1
    ):
        self.source = source
        self.meta = EpisodeMeta.from_dict(doc["meta"])
        self.layout = Layout.from_dict({"groups": doc["layout"]["groups"]})
        self.layout_version: str = doc["layout"]["version"]
        self.chunks = [ChunkInfo.from_json(c) for c in doc["chunks"]]
        self.footer_offset = footer_offset
        self.footer_length = footer_length
        self.stats = ReaderStats()
        self._extradata = {k: base64.b64decode(v) for k, v in doc.get("codec_data", {}).items()}
        self._decode_threads = decode_threads
        self._pool: ThreadPoolExecutor | None = None
        self._pool_pid = 0
        size = source.size()
        for c in self.chunks:
            if c.offset + c.length > footer_offset or c.offset < 0:
                raise ContainerError(
                    self.meta.episode_id,
                    f"index points past the data region ({c.offset}+{c.length} > {footer_offset}, size {size})",
                    c.index,
                )

    # ----------------------------------------------------------------- opening
    @classmethod
    def open(
        cls,
        target: Any,
        footer_offset: int | None = None,
        footer_length: int | None = None,
        decode_threads: int = 1,
        **storage_options: Any,
    ) -> EpisodeReader:
        source = open_source(target, **storage_options)
        name = source.name
        size = source.size()
        if footer_offset is not None and footer_length is not None:
            raw = source.read(footer_offset, footer_length + TRAILER.size)
            off, length, crc = unpack_trailer(name, raw[-TRAILER.size :], size)
            if (off, length) != (footer_offset, footer_length):
                raise ContainerError(name, "footer hint does not match the trailer (stale manifest?)")
            footer = raw[:footer_length]
        else:
            tail_len = min(size, _TAIL_GUESS)
            tail = source.read(size - tail_len, tail_len) if size else b""
            off, length, crc = unpack_trailer(name, tail[-TRAILER.size :], size)
            if length + TRAILER.size <= len(tail):
                footer = tail[len(tail) - TRAILER.size - length : len(tail) - TRAILER.size]
            else:
                footer = source.read(off, length)
        doc = decode_footer(name, footer, crc)
        return cls(source, doc, off, length, decode_threads)

    # ----------------------------------------------------------------- reading
    def read_window(self, t0: float, t1: float, streams: list[str] | None = None, every: int = 1) -> dict[str, Window]:
        """All samples of `streams` with t0 <= t <= t1 (seconds since episode start).

        Video frames are decoded from the nearest keyframe at or before t0; `every` keeps
        every k-th frame (and lets the decoder skip non-reference frames).
        """
        streams = list(self.meta.streams) if streams is None else list(streams)
        for s in streams:
            if s not in self.meta.streams:
                raise KeyError(f"episode {self.meta.episode_id!r} has no stream {s!r}; has {sorted(self.meta.streams)}")
        lo, hi = int(round(t0 * 1e9)), int(round(t1 * 1e9))  # stream timestamps: ns since meta.start_time_ns
        fetched = self.fetch_parts({s: (lo, hi) for s in streams})

        def decode(s: str) -> Window:
            return self._decode_stream(s, [f for f in fetched if f[1].stream == s], lo, hi, every)

        cams = [s for s in streams if self.meta.streams[s].kind == "video"]
        # one decode thread per camera (PyAV releases the GIL while decoding)
        decoded = dict(zip(cams, self._decode_pool().map(decode, cams), strict=True)) if len(cams) > 1 else {}
        return {s: decoded[s] if s in decoded else decode(s) for s in streams}

    def _decode_pool(self) -> ThreadPoolExecutor:
        # A pool inherited through fork has no threads behind it: make a fresh one per process.
        if self._pool is None or self._pool_pid != os.getpid():
            n = sum(1 for s in self.meta.streams.values() if s.kind == "video")
            self._pool = ThreadPoolExecutor(max_workers=max(1, n), thread_name_prefix="rd-decode")
            self._pool_pid = os.getpid()
        return self._pool

    def close(self) -> None:
        if self._pool is not None and self._pool_pid == os.getpid():
            self._pool.shutdown(wait=False)
        self._pool = None
        close = getattr(self.source, "close", None)
        if close is not None:
            close()

    def fetch_parts(self, ranges: dict[str, tuple[int, int]]) -> list[tuple[ChunkInfo, PartInfo, bytes]]:
        """Verified bytes of every part of `stream` overlapping its [lo_ns, hi_ns], in file order.

        One range read per touched chunk (covering only the wanted parts of it); the chunk CRC is
        checked when the whole chunk is read, else each part's CRC.
        """
        plan = []
        for c in self.chunks:
            parts = [
                p
                for p in c.parts
                if p.stream in ranges and p.t_end >= ranges[p.stream][0] and p.t_start <= ranges[p.stream][1]
            ]
            if parts:
                plan.append(_Wanted(c, parts))
        blobs = self._fetch(plan)
        return [(w.chunk, p, blobs[(w.chunk.index, p.stream)]) for w in plan for p in w.parts]

    def codec_extradata(self, stream: str) -> bytes:
        """Codec parameter sets of a video stream (what a decoder needs before the first packet)."""
        return self._extradata.get(stream, b"")

    def _fetch(self, wanted: list[_Wanted]) -> dict[tuple[int, str], bytes]:
        out: dict[tuple[int, str], bytes] = {}
        for w in wanted:
            c = w.chunk
            whole = len(w.parts) == len(c.parts)
            start = c.offset + (0 if whole else min(p.offset for p in w.parts))
            end = c.offset + (c.length if whole else max(p.offset + p.length for p in w.parts))
            data = self.source.read(start, end - start)
            self.stats.range_reads += 1
            self.stats.bytes_read += len(data)
            self.stats.chunks_read += 1
            if len(data) != end - start:
                raise ContainerError(
                    self.meta.episode_id, f"short read ({len(data)} of {end - start} bytes): truncated file", c.index
                )
            if whole and (zlib.crc32(data) & 0xFFFFFFFF) != c.checksum:
                raise ContainerError(self.meta.episode_id, "chunk checksum mismatch (corrupted data)", c.index)
            for p in w.parts:
                rel = c.offset + p.offset - start
                blob = data[rel : rel + p.length]
                if not whole and checksum(blob) != p.checksum:
                    raise ContainerError(
                        self.meta.episode_id, f"part {p.stream!r} checksum mismatch (corrupted data)", c.index
                    )
                out[(c.index, p.stream)] = blob
        return out

    def _decode_stream(
        self, stream: str, pieces: list[tuple[ChunkInfo, PartInfo, bytes]], lo: int, hi: int, every: int
    ) -> Window:
        spec = self.meta.streams[stream]
        try:
            if spec.kind == "video":
                return self._decode_video(stream, pieces, lo, hi, every)
            ts, vals = [], []
            for _, _, blob in pieces:
                if spec.kind == "events":
                    t, v = decode_events(blob)
                else:
                    t, v = decode_array(blob, spec.shape, spec.dtype)
                m = (t >= lo) & (t <= hi)
                ts.append(t[m])
                vals.append(v[m])
        except ContainerError:
            raise
        except Exception as exc:  # a checksum-valid part that still fails to decode
            chunk = pieces[0][0].index if pieces else None
            raise ContainerError(self.meta.episode_id, f"cannot decode {stream!r}: {exc}", chunk) from exc
        if not ts:
            empty_shape = (0, *spec.shape)
            return Window(np.empty(empty_shape, dtype=object if spec.kind == "events" else spec.dtype), np.empty(0))
        t_all = np.concatenate(ts)
        return Window(np.concatenate(vals), t_all / 1e9)

    def _decode_video(self, stream: str, pieces, lo: int, hi: int, every: int) -> Window:
        """Decode the window's frames of one camera, chunk by chunk, each from its keyframe.

        With every=k > 1 the window keeps every k-th frame. The phase is the first reference
        frame among the window's first k frames, so when the layout makes the frames in between
        non-reference (e.g. bframes = k-1), the decoder skips them (FFmpeg skip_frame=NONREF)
        and decodes only what it returns.
        """
        spec = self.meta.streams[stream]
        codec = self.layout.group_of(stream).video.codec  # type: ignore[union-attr]
        extradata = self._extradata.get(stream, b"")
        frames: list[np.ndarray] = []
        times: list[int] = []
        k = 0
        phase: int | None = None
        for chunk, _, blob in pieces:
            table = decode_packets(blob)
            pts = table.column("pts").to_numpy()
            t = table.column("t_ns").to_numpy()
            key = table.column("key").to_numpy(zero_copy_only=False)
            ref = (
                table.column("ref").to_numpy(zero_copy_only=False)
                if "ref" in table.column_names
                else np.ones(len(pts), dtype=bool)
            )
            sel = np.nonzero((t >= lo) & (t <= hi))[0]
            if len(sel) == 0:
                continue
            order = sel[np.argsort(pts[sel])]
            if phase is None:
                head = [j for j, i in enumerate(order[:every]) if ref[i]]
                phase = head[0] if every > 1 and head else 0
            keep = [i for j, i in enumerate(order) if (k + j) % every == phase]
            k += len(order)
            if not keep:
                continue
            wanted = {int(pts[i]): int(t[i]) for i in keep}
            first = min(keep, key=lambda i: pts[i])
            start = int(np.nonzero(key[: first + 1])[0][-1]) if key[: first + 1].any() else 0
            skip = every > 1 and bool(ref[keep].all())
            decoder = VideoDecoder(codec, extradata, threads=self._decode_threads, skip_nonref=skip)
            dts = table.column("dts").to_numpy()
            data = table.column("data")
            packets = (
                (int(pts[i]), int(dts[i]), data[i].as_py()) for i in range(start, len(pts))
            )  # lazy: decode stops early
            try:
                got = decoder.decode(packets, set(wanted))
            except Exception as exc:
                raise ContainerError(
                    self.meta.episode_id, f"video {stream!r} failed to decode: {exc}", chunk.index
                ) from exc
            missing = set(wanted) - set(got)
            if missing:
                raise ContainerError(
                    self.meta.episode_id, f"video {stream!r}: {len(missing)} frame(s) did not decode", chunk.index
                )
            self.stats.frames_decoded += decoder.decoded
            for p in sorted(wanted):
                frames.append(got[p])
                times.append(wanted[p])
        if not frames:
            return Window(np.empty((0, *spec.shape), np.uint8), np.empty(0))
        return Window(np.stack(frames), np.asarray(times, dtype=np.int64) / 1e9)


def read_window(
    episode: Any, t0: float, t1: float, streams: list[str] | None = None, every: int = 1, **storage_options: Any
) -> dict[str, Window]:
    """One-shot form of EpisodeReader.read_window: `episode` is a path, URL, file-like or reader."""
    reader = episode if isinstance(episode, EpisodeReader) else EpisodeReader.open(episode, **storage_options)
    return reader.read_window(t0, t1, streams, every)
