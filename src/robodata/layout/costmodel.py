"""Predicted loader cost of a topic group's settings for the windows a pattern reads from it.

Per sample: decoded frames by type (gop.decoded_counts, i.e. ~ window + GOP/2 for random
starts, ~ window/every with skipped B-frames), range reads and bytes (whole chunks of the
group: chunk span rounded up to whole GOPs), CPU from the calibration; storage per episode
second. Page rounding of the bytes is in page_cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from robodata.codecs.gop import B, I, P, decoded_counts, decoded_counts_gopwise, frame_types
from robodata.container import EpisodeMeta
from robodata.container.calibration import Calibration
from robodata.dataset.pattern import StreamWindow
from robodata.layout.workload import Sample, window_frames, window_rate, window_seconds

PACKET_ROW_BYTES = 30.0  # pts, dts, key, ref, t_ns and the offset of one packet row


@dataclass(frozen=True)
class VideoChoice:
    gop: int
    bframes: int
    crf: int
    span_s: float
    entropy: str = "cabac"  # H.264's entropy coder (VideoSettings.entropy)
    deblock: bool = True  # the in-loop deblocking filter (VideoSettings.deblock)

    def label(self) -> str:
        coder = ("/cavlc" if self.entropy == "cavlc" else "") + ("" if self.deblock else "/nodeblock")
        return f"gop{self.gop}/b{self.bframes}/crf{self.crf}{coder}/span{self.span_s:g}s"


@dataclass
class Cost:
    cpu_s: float = 0.0  # per sample
    bytes: float = 0.0  # per sample
    ranges: float = 0.0  # range reads per sample
    frames_decoded: float = 0.0  # per sample
    storage_bps: float = 0.0  # stored bytes per episode second
    range_sizes: list[float] = field(default_factory=list)  # one entry per range read of the samples

    def __add__(self, o: Cost) -> Cost:
        return Cost(
            self.cpu_s + o.cpu_s,
            self.bytes + o.bytes,
            self.ranges + o.ranges,
            self.frames_decoded + o.frames_decoded,
            self.storage_bps + o.storage_bps,
            self.range_sizes + o.range_sizes,
        )


def frames_per_chunk(choice: VideoChoice, rate: float) -> int:
    """What the writer does: max(1, round(span * rate / gop)) whole GOPs per chunk."""
    return max(1, round(choice.span_s * rate / choice.gop)) * choice.gop


def frame_bytes(cal: Calibration, choice: VideoChoice, pixels_scale: float) -> np.ndarray:
    pt = cal.point(choice.crf, choice.bframes, choice.entropy, choice.deblock)
    if choice.gop == 1:
        return np.array([pt.intra_bytes, 0.0, 0.0]) * pixels_scale + PACKET_ROW_BYTES
    return np.asarray(pt.bytes) * pixels_scale + PACKET_ROW_BYTES


def camera_storage_bps(cal: Calibration, choice: VideoChoice, rate: float, pixels_scale: float) -> float:
    types = np.bincount(frame_types(choice.gop, choice.bframes), minlength=3)
    return float(types @ frame_bytes(cal, choice, pixels_scale)) * rate / choice.gop


def predict_video(
    w: StreamWindow,
    cams: tuple[str, ...],
    choice: VideoChoice,
    cal: Calibration,
    metas: list[EpisodeMeta],
    samples: list[Sample],
    loader: str = "reader",
) -> Cost:
    """Cost of window `w` reading the cameras `cams` of one group laid out with `choice`, through
    EpisodeReader.read_window (loader="reader") or the delivery dataset's GOP decoder ("dataset")."""
    counts = decoded_counts if loader == "reader" else decoded_counts_gopwise
    pt = cal.point(choice.crf, choice.bframes, choice.entropy, choice.deblock)
    skip_s = pt.skip_s if loader == "reader" else 0.0
    dec = np.array([pt.intra_decode_s, 0.0, 0.0]) if choice.gop == 1 else np.asarray(pt.decode_s)
    total = Cost()
    for s in samples:
        meta = metas[s.episode]
        rate = window_rate(w, meta)
        fpc = frames_per_chunk(choice, rate)
        first, last = window_frames(w, meta, s.t)
        n_frames = int(round(meta.duration_s * rate)) + 1
        chunk_bytes = 0.0
        cpu = cal.call_s + (cal.pool_s if len(cams) > 1 or loader == "dataset" else 0.0)
        frames = 0.0
        chunks = 0
        for c in cams:
            h, wd, _ = meta.streams[c].shape
            scale = (h * wd) / (cal.height * cal.width)
            fb = frame_bytes(cal, choice, scale)
            types = np.bincount(frame_types(choice.gop, choice.bframes), minlength=3)
            chunk_bytes += float(types @ fb) * fpc / choice.gop
            d = counts(choice.gop, choice.bframes, fpc, first, last, w.every, n_frames)
            cpu += float(d.types @ dec) * scale + d.skipped * skip_s + d.opens * cal.open_s
            per_packet = cal.packet_s if len(cams) > 1 else cal.packet1_s
            cpu += float(d.types.sum() + d.skipped) * per_packet
            cpu += d.kept * (cal.rgb_s * scale + cal.frame_s) + d.chunks * cal.part_s + d.opens * cal.video_part_s
            frames += float(d.types.sum())
            chunks = max(chunks, d.chunks)
        # the reader fetches each touched chunk of the group whole (every camera is wanted)
        bytes_ = chunks * chunk_bytes
        cpu += chunks * cal.range_s + bytes_ * cal.byte_s
        total = total + Cost(cpu, bytes_, chunks, frames, 0.0, [chunk_bytes] * chunks)
    n = len(samples)
    meta0 = metas[0]
    rate0 = window_rate(w, meta0)
    storage = sum(
        camera_storage_bps(
            cal, choice, rate0, (meta0.streams[c].shape[0] * meta0.streams[c].shape[1]) / (cal.height * cal.width)
        )
        for c in cams
    )
    return Cost(
        total.cpu_s / n, total.bytes / n, total.ranges / n, total.frames_decoded / n, storage, total.range_sizes
    )


def array_part_bytes(cal: Calibration, stream: str, count: float, sample_bytes: float) -> float:
    fixed, per = cal.array_part_bytes.get(stream, (600.0, sample_bytes))
    return fixed + per * count


def _extents(windows: list[StreamWindow], meta: EpisodeMeta, t: float, loader: str):
    """(streams, t0, t1) per read: one read_window per window (reader), or one read covering
    every array window of the sample (dataset)."""
    ext = [(w.streams, *window_seconds(w, meta, t)) for w in windows]
    if loader == "dataset" and ext:
        return [(tuple(x for e in ext for x in e[0]), min(e[1] for e in ext), max(e[2] for e in ext))]
    return ext


def predict_arrays(
    windows: list[StreamWindow],
    order: tuple[str, ...],
    span_s: float,
    cal: Calibration,
    metas: list[EpisodeMeta],
    samples: list[Sample],
    loader: str = "reader",
) -> Cost:
    """Cost of the array windows reading one group whose streams (in `order`) are chunked every span_s."""
    total = Cost()
    for s in samples:
        meta = metas[s.episode]
        for streams, t0, t1 in _extents(windows, meta, s.t, loader):
            streams = tuple(x for x in streams if x in order)  # this group's share of the read
            if not streams:
                continue
            t0, t1 = max(t0, 0.0), min(t1, meta.duration_s)
            c0, c1 = int(t0 // span_s), int(t1 // span_s)
            idx = [order.index(x) for x in streams]
            touched = order[min(idx) : max(idx) + 1]  # the contiguous part range the reader fetches
            per_chunk = 0.0
            for x in touched:
                sp = meta.streams[x]
                item = 8 + int(np.prod(sp.shape or (1,))) * np.dtype(sp.dtype).itemsize
                per_chunk += array_part_bytes(cal, x, span_s * sp.rate_hz, item)
            chunks = c1 - c0 + 1
            bytes_ = chunks * per_chunk
            cpu = cal.call_s + chunks * (cal.range_s + len(streams) * cal.part_s) + bytes_ * cal.byte_s
            total = total + Cost(cpu, bytes_, chunks, 0.0, 0.0, [per_chunk] * chunks)
    n = len(samples)
    meta0 = metas[0]
    storage = 0.0
    for x in order:
        sp = meta0.streams[x]
        item = 8 + int(np.prod(sp.shape or (1,))) * np.dtype(sp.dtype).itemsize
        storage += array_part_bytes(cal, x, span_s * sp.rate_hz, item) / span_s
    return Cost(total.cpu_s / n, total.bytes / n, total.ranges / n, 0.0, storage, total.range_sizes)


def page_cost(range_sizes: list[float], n_samples: int, page: int, store) -> float:
    """Cold-cache seconds per sample for one page size: each range read touches 1 + (B-1)/P pages
    on average (random alignment) and fetches them whole: latency + pages*P/bandwidth + pages*page_cpu."""
    if not range_sizes:
        return 0.0
    b = np.asarray(range_sizes)
    pages = 1.0 + np.maximum(b - 1.0, 0.0) / page
    t = len(b) * store.latency_s + float(pages.sum()) * (page / store.bandwidth_bps + store.page_cpu_s)
    return t / n_samples


__all__ = [
    "VideoChoice",
    "Cost",
    "predict_video",
    "predict_arrays",
    "page_cost",
    "frames_per_chunk",
    "camera_storage_bps",
    "I",
    "P",
    "B",
]
