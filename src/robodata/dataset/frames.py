"""Batch-level video decoding: one GOP decode serves every sample of a batch that needs it.

For one episode and the frames a whole batch wants from it, the camera parts are fetched
with one range read per chunk, each GOP that holds a wanted frame is decoded once from
its keyframe up to the last wanted frame, and frames nobody wants are never decoded when
they are not reference frames (the container's per-packet `ref` flags; FFmpeg
skip_frame=NONREF toggled per packet for files without them): with B-frames, a 10 fps
window of a 30 fps camera decodes only I/P frames.

Channel-first consumers (`planar=True`) get the R, G and B planes of swscale's planar RGB
output (gbrp): three contiguous copies instead of a strided HWC -> CHW transpose (~0.3 ms a
640x480 frame). Where gbrp is not bit-identical to rgb24 (swscale 9.5 writes garbage into the
last columns of a width that is not a multiple of 16), the planes are views of the rgb24 frame.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import cast

import av
import numpy as np
import pyarrow as pa
from av.video.codeccontext import VideoCodecContext
from av.video.reformatter import VideoReformatter

from robodata.codecs import video_codec
from robodata.container import EpisodeReader
from robodata.errors import ContainerError

_tls = threading.local()
_KEEP: list = []  # every reformatter ever made here; see _reformatter
_DECODERS_PER_THREAD = 8
_PLANAR_OK: dict[tuple, bool] = {}  # (format, width, height, colorspace, range) -> gbrp == rgb24


def _reformatter() -> VideoReformatter:
    """One reformatter per thread (it caches its SwsContext across frames), single-threaded.

    swscale's own slice threads would oversubscribe dataloader workers, and a SwsContext
    that owns threads cannot be freed in a forked child (freeing joins threads that only
    existed in the parent: a deadlock). So threads=1, and reformatters are never freed:
    a child that inherits a thread-local one simply makes its own.
    """
    rf = getattr(_tls, "reformatter", None)
    if rf is None or getattr(_tls, "pid", None) != os.getpid():
        rf = _tls.reformatter = VideoReformatter()
        _tls.pid = os.getpid()
        _KEEP.append(rf)
    return rf


@dataclass
class StreamFrames:
    """The packets of one camera over a time range, in decode order."""

    pts: np.ndarray
    dts: np.ndarray
    key: np.ndarray
    ref: np.ndarray | None  # reference-picture flag per packet (None: unknown, ask the decoder to skip)
    t_s: np.ndarray  # seconds since episode start of the frame with that pts
    data: pa.ChunkedArray  # the packets' bytes: indexed per decoded packet (no Python object for the rest)
    chunk: np.ndarray  # chunk index of each packet (for error messages)

    def by_time(self) -> tuple[np.ndarray, np.ndarray]:
        """(times sorted, pts in that order): for nearest-frame lookups."""
        order = np.argsort(self.t_s, kind="stable")
        return self.t_s[order], self.pts[order]


def fetch_streams(
    reader: EpisodeReader, ranges: Mapping[str, tuple[float, float] | list[tuple[float, float]]]
) -> dict[str, StreamFrames]:
    """Packets of each camera overlapping its (t0, t1) seconds, or any of several such spans (the
    chunks of samples scattered over an episode, not everything between them); one read per chunk,
    each part verified against its index entry (the reader's part_table) as read_window does."""
    pieces: dict[str, list] = {s: [] for s in ranges}
    spans = {s: [r] if isinstance(r, tuple) else r for s, r in ranges.items()}
    ns = {s: [(int(t0 * 1e9), int(t1 * 1e9)) for t0, t1 in rs] for s, rs in spans.items()}
    for chunk, part, blob in reader.fetch_parts(ns):
        pieces[part.stream].append((chunk.index, reader.part_table(chunk, part, blob)))
    out = {}
    for s, tabs in pieces.items():
        if not tabs:
            none = np.empty(0, np.int64)
            out[s] = StreamFrames(
                none, none, none.astype(bool), None, np.empty(0), pa.chunked_array([], pa.binary()), none
            )
            continue
        cols = {
            k: np.concatenate([t.column(k).to_numpy(zero_copy_only=False) for _, t in tabs])
            for k in ("pts", "dts", "key", "t_ns")
        }
        ref = (
            np.concatenate([t.column("ref").to_numpy(zero_copy_only=False) for _, t in tabs]).astype(bool)
            if all("ref" in t.column_names for _, t in tabs)
            else None
        )
        data = pa.chunked_array(
            [c for _, t in tabs for c in t.column("data").chunks], tabs[0][1].schema.field("data").type
        )
        chunks = np.concatenate([np.full(t.num_rows, ci) for ci, t in tabs])
        out[s] = StreamFrames(cols["pts"], cols["dts"], cols["key"].astype(bool), ref, cols["t_ns"] / 1e9, data, chunks)
    return out


class GopDecoder:
    """Decodes wanted frames of one camera, GOP by GOP, skipping unwanted non-reference frames."""

    def __init__(
        self,
        codec: str,
        extradata: bytes,
        resize: tuple[int, int] | None,
        episode: str,
        stream: str,
        planar: bool = False,
    ):
        self.codec = video_codec(codec).decoder
        self.extradata = extradata
        self.resize = resize
        self.episode = episode
        self.stream = stream
        self.planar = planar  # sinks get (R, G, B) planes (H, W) instead of one (H, W, 3) frame

    def decode(self, frames: StreamFrames, wanted: set[int]) -> dict[int, np.ndarray]:
        """{pts: RGB frame} for every wanted pts."""
        out: dict[int, np.ndarray] = {}
        self.decode_into(frames, wanted, out.__setitem__)
        return out

    def decode_into(self, frames: StreamFrames, wanted: set[int], sink: Callable[[int, np.ndarray], None]) -> int:
        """Calls sink(pts, rgb) once per wanted pts, in decode order; returns how many.

        `rgb` is a view of the reformatted frame, (H, W, 3), or with `planar` a tuple of its
        R, G and B planes (H, W): a sink that copies it where it belongs and drops it keeps one
        RGB frame per camera alive at a time, not one per wanted pts."""
        if not wanted:
            return 0
        keys = np.nonzero(frames.key)[0]
        if len(keys) == 0 or keys[0] != 0:
            raise ContainerError(
                self.episode,
                f"video {self.stream!r}: packets do not start with a keyframe",
                int(frames.chunk[0]) if len(frames.chunk) else None,
            )
        bounds = [int(k) for k in keys] + [len(frames.pts)]
        done: set[int] = set()
        for g in range(len(keys)):
            lo, hi = bounds[g], bounds[g + 1]
            need = [i for i in range(lo, hi) if int(frames.pts[i]) in wanted]
            if not need:
                continue
            gop_wanted = {int(frames.pts[i]) for i in need}
            self._decode_gop(frames, lo, max(need) + 1, gop_wanted, done, sink)
        missing = wanted - done
        if missing:
            raise ContainerError(
                self.episode,
                f"video {self.stream!r}: {len(missing)} wanted frame(s) are not in the fetched packets",
                int(frames.chunk[0]),
            )
        return len(done)

    def _decode_gop(self, f: StreamFrames, lo: int, hi: int, wanted: set[int], done: set[int], sink) -> None:
        ctx = _decoder(self.codec, self.extradata)
        try:
            for i in range(lo, hi):
                pts = int(f.pts[i])
                if f.ref is not None:
                    if pts not in wanted and not f.ref[i]:
                        continue  # a droppable picture nobody wants: never sent to the decoder
                else:
                    ctx.skip_frame = "DEFAULT" if pts in wanted else "NONREF"
                pkt = av.Packet(f.data[i].as_buffer())  # the arrow buffer, no bytes copy first
                pkt.pts, pkt.dts = pts, int(f.dts[i])
                for frame in ctx.decode(pkt):
                    self._take(frame, wanted, done, sink)
            ctx.skip_frame = "DEFAULT"
            for frame in ctx.decode(None):
                self._take(frame, wanted, done, sink)
        except av.error.FFmpegError as exc:
            _drop_decoder(self.codec, self.extradata)
            raise ContainerError(
                self.episode, f"video {self.stream!r} failed to decode: {exc}", int(f.chunk[lo])
            ) from exc
        finally:
            ctx.flush_buffers()  # ready for the next GOP's keyframe, whatever happened to this one

    def _take(self, frame, wanted: set[int], done: set[int], sink) -> None:
        if frame.pts in wanted and frame.pts not in done:
            rf = _reformatter()
            done.add(frame.pts)
            same = self.resize is None or tuple(self.resize) == (frame.height, frame.width)
            if self.planar and same and _planar_ok(frame):
                sink(frame.pts, _planes(rf.reformat(frame, format="gbrp", threads=1)))
                return
            if same:
                rgb = rf.reformat(frame, format="rgb24", threads=1).to_ndarray()
            else:
                h, w = self.resize  # type: ignore[misc]  # not same: a resize is set
                rgb = rf.reformat(frame, width=w, height=h, format="rgb24", threads=1).to_ndarray()
            sink(frame.pts, (rgb[:, :, 0], rgb[:, :, 1], rgb[:, :, 2]) if self.planar else rgb)


def _planes(gbrp: av.VideoFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The R, G and B planes (H, W) of a gbrp frame, views of its buffers (gbrp stores G, B, R)."""
    h, w = gbrp.height, gbrp.width
    g, b, r = (
        np.frombuffer(memoryview(p), np.uint8, count=h * p.line_size).reshape(h, p.line_size)[:, :w]
        for p in gbrp.planes
    )
    return r, g, b


def _planar_ok(frame: av.VideoFrame) -> bool:
    """Whether swscale's gbrp output equals its rgb24 output for frames like `frame` (format,
    size, colorspace, range): checked once per process on a frame of random samples."""
    key = (frame.format.name, frame.width, frame.height, int(frame.colorspace), int(frame.color_range))
    ok = _PLANAR_OK.get(key)
    if ok is None:
        probe = av.VideoFrame(frame.width, frame.height, frame.format.name)
        probe.colorspace, probe.color_range = frame.colorspace, frame.color_range
        rng = np.random.default_rng(0)
        for p in probe.planes:
            np.frombuffer(memoryview(p), np.uint8)[:] = rng.integers(0, 256, p.buffer_size, dtype=np.uint8)
        rf = _reformatter()
        rgb = rf.reformat(probe, format="rgb24", threads=1).to_ndarray()
        r, g, b = _planes(rf.reformat(probe, format="gbrp", threads=1))
        ok = _PLANAR_OK[key] = bool(
            np.array_equal(rgb[:, :, 0], r) and np.array_equal(rgb[:, :, 1], g) and np.array_equal(rgb[:, :, 2], b)
        )
    return ok


def _decoder(codec: str, extradata: bytes) -> VideoCodecContext:
    """This thread's open decoder for (codec, extradata), reused GOP after GOP (flushed
    in between) so its frame buffers are reused too; a few per thread at most."""
    cache = getattr(_tls, "decoders", None)
    if cache is None or getattr(_tls, "dec_pid", None) != os.getpid():
        cache = _tls.decoders = OrderedDict()
        _tls.dec_pid = os.getpid()
    key = (codec, extradata)
    ctx = cache.get(key)
    if ctx is None:
        ctx = cast(VideoCodecContext, av.CodecContext.create(codec, "r"))
        if extradata:
            ctx.extradata = extradata
        ctx.thread_type = "NONE"
        cache[key] = ctx
        while len(cache) > _DECODERS_PER_THREAD:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return ctx


def _drop_decoder(codec: str, extradata: bytes) -> None:
    cache = getattr(_tls, "decoders", None)
    if cache is not None:
        cache.pop((codec, extradata), None)


def nearest(times: np.ndarray, targets: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """Index of the sample nearest each target time and whether it is within `tol` seconds."""
    if len(times) == 0:
        return np.zeros(len(targets), np.int64), np.zeros(len(targets), bool)
    j = np.searchsorted(times, targets)
    j = np.clip(j, 1, len(times) - 1) if len(times) > 1 else np.zeros_like(j)
    if len(times) > 1:
        left_closer = np.abs(times[j - 1] - targets) <= np.abs(times[j] - targets)
        j = np.where(left_closer, j - 1, j)
    ok = np.abs(times[j] - targets) <= tol
    return j, ok


def spans(lo: np.ndarray, hi: np.ndarray) -> list[tuple[float, float]]:
    """The union of the intervals [lo[i], hi[i]] as sorted disjoint (lo, hi) pairs."""
    out: list[tuple[float, float]] = []
    for a, b in sorted(zip(lo.tolist(), hi.tolist(), strict=True)):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def decode_pool(n: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=max(1, n), thread_name_prefix="rd-gop")
