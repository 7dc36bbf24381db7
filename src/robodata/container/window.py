"""Decoding a read's window: the fetched, CRC-checked parts of one stream -> its `Window`.

Array and event parts are decoded and cut to the window by robodata.container.parts; video
parts chunk by chunk, each from its keyframe, keeping every k-th frame. Every part is verified
against its index entry as it is decoded, and what it allocates is taken from the read's budgets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from robodata.codecs.video import VideoDecoder
from robodata.container.format import ChunkInfo, PartInfo
from robodata.container.meta import EpisodeMeta, Layout
from robodata.container.parts import PartDecoder, ReadBudgets
from robodata.errors import ContainerError, ContainerLimitError


@dataclass
class Window:
    """The samples of one stream in a window."""

    data: np.ndarray  # video: uint8 (T, H, W, 3); array: (N, *shape); events: object (N,)
    t: np.ndarray  # float64 seconds since episode start


@dataclass
class ReaderStats:
    """What this reader has read and decoded so far (benchmarks and tests read it)."""

    range_reads: int = 0
    bytes_read: int = 0
    chunks_read: int = 0
    frames_decoded: int = 0


class WindowDecoder:
    """Decodes the windows of one open container (its footer's meta, layout and codec extradata)."""

    def __init__(
        self,
        meta: EpisodeMeta,
        layout: Layout,
        extradata: dict[str, bytes],
        parts: PartDecoder,
        stats: ReaderStats,
        decode_threads: int,
        path: str,
    ):
        self.meta = meta
        self.layout = layout
        self.extradata = extradata
        self.parts = parts
        self.stats = stats
        self.decode_threads = decode_threads
        self.path = path

    def _error(self, message: str, chunk: int | None = None) -> ContainerError:
        return ContainerError(self.meta.episode_id, message, chunk, path=self.path)

    def stream(
        self,
        stream: str,
        pieces: list[tuple[ChunkInfo, PartInfo, bytes]],
        lo: int,
        hi: int,
        every: int,
        budgets: ReadBudgets,
    ) -> Window:
        """The samples of `stream` with lo <= t_ns <= hi from its fetched parts (`pieces`, file order)."""
        spec = self.meta.streams[stream]
        if spec.kind == "video":
            return self.video(stream, pieces, lo, hi, every, budgets)
        ts, vals = [], []
        for chunk, part, blob in pieces:
            t, v = self.parts.lowdim(spec, chunk, part, blob, lo, hi, budgets)
            ts.append(t)
            vals.append(v)
        if not ts:
            empty_shape = (0, *spec.shape) if spec.kind == "array" else (0,)
            return Window(np.empty(empty_shape, dtype=object if spec.kind == "events" else spec.dtype), np.empty(0))
        return Window(np.concatenate(vals), np.concatenate(ts) / 1e9)

    def video(
        self,
        stream: str,
        pieces: list[tuple[ChunkInfo, PartInfo, bytes]],
        lo: int,
        hi: int,
        every: int,
        budgets: ReadBudgets,
    ) -> Window:
        """Decode the window's frames of one camera, chunk by chunk, each from its keyframe.

        With every=k > 1 the window keeps every k-th frame. The phase is the first reference
        frame among the window's first k frames, so when the layout makes the frames in between
        non-reference (e.g. bframes = k-1), the decoder skips them (FFmpeg skip_frame=NONREF)
        and decodes only what it returns.
        """
        spec = self.meta.streams[stream]
        video = self.layout.group_of(stream).video
        assert video is not None  # footer check: video streams are in video groups
        extradata = self.extradata.get(stream, b"")
        frame_bytes = math.prod(spec.shape)
        frames: list[np.ndarray] = []
        times: list[int] = []
        k = 0
        phase: int | None = None
        for chunk, part, blob in pieces:
            table = self.parts.packets(stream, chunk, part, blob, budgets.decode)
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
            with self.parts.decoding(stream, chunk.index):
                budgets.frames.take(len(keep) * frame_bytes, f"{len(keep)} frames of {spec.shape}")
            wanted = {int(pts[i]): int(t[i]) for i in keep}
            first = min(keep, key=lambda i: pts[i])
            start = int(np.nonzero(key[: first + 1])[0][-1]) if key[: first + 1].any() else 0
            skip = every > 1 and bool(ref[keep].all())
            decoder = VideoDecoder(
                video.codec,
                extradata,
                threads=self.decode_threads,
                skip_nonref=skip,
                size=(spec.shape[0], spec.shape[1]),
            )
            dts = table.column("dts").to_numpy()
            data = table.column("data")
            packets = (
                (int(pts[i]), int(dts[i]), data[i].as_py()) for i in range(start, len(pts))
            )  # lazy: decode stops early
            try:
                got = decoder.decode(packets, set(wanted))
            except ContainerLimitError:
                raise
            except Exception as exc:  # libavcodec and the size check: a checksum-valid part that will not decode
                raise self._error(f"video {stream!r} failed to decode: {exc}", chunk.index) from exc
            missing = set(wanted) - set(got)
            if missing:
                raise self._error(f"video {stream!r}: {len(missing)} frame(s) did not decode", chunk.index)
            self.stats.frames_decoded += decoder.decoded
            for p in sorted(wanted):
                frames.append(got[p])
                times.append(wanted[p])
        if not frames:
            return Window(np.empty((0, *spec.shape), np.uint8), np.empty(0))
        return Window(np.stack(frames), np.asarray(times, dtype=np.int64) / 1e9)
