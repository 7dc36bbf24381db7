"""What a stream copy costs the loader against the layout it would be transcoded to (`auto`).

Frames decoded per read come from the advisor's GOP model (robodata.codecs.gop.decoded_counts, the
reader's own count) for the plan's read pattern, else for one random frame. With a plan from
`robodata advise` (its calibration: decode seconds per frame type of the layout's codec), frames
are priced in seconds: the source's own decode is measured on its first packets (CPU seconds per
frame, no RGB), the layout's from the calibration, scaled by pixels. Without one, frames are
compared as frames (the codecs' per-frame costs unknown).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

import av
import numpy as np
from av.video.codeccontext import VideoCodecContext

from robodata.codecs import video_codec
from robodata.codecs.gop import decoded_counts
from robodata.container import EpisodeMeta, TopicGroup, VideoSettings
from robodata.container.calibration import Calibration
from robodata.dataset.pattern import StreamWindow
from robodata.errors import ConfigError

MEASURED_PACKETS = 8  # packets of the source decoded to price its frames (whole GOPs past that)


@lru_cache(maxsize=1024)
def read_types(gop: int, bframes: int, fpc: int, frames: int, windows: tuple[StreamWindow, ...]) -> tuple:
    """Frames decoded per read by type (I, P, B), averaged over anchors spread over the episode, for
    each window (one random frame when there are none); episodes of one source share their
    structure, so the answer is cached."""
    ws = windows or (StreamWindow("frame", ("x",), "video"),)
    anchors = np.linspace(0, max(0, frames - 1), num=min(32, max(1, frames))).astype(int)
    total = np.zeros(3)
    for w in ws:
        for f in anchors:
            total += decoded_counts(gop, bframes, fpc, int(f) + w.first, int(f) + w.last, w.every, frames).types
    return tuple(total / (len(anchors) * len(ws)))


def decode_s_per_frame(codec: str, extradata: bytes, packets: list) -> float:
    """CPU seconds per frame of the source's own decoder (one thread) over its first packets."""
    n = min(len(packets), MEASURED_PACKETS)
    while n < len(packets) and not packets[n].key:
        n += 1  # whole GOPs: the mix of frame types a read decodes
    ctx = cast(VideoCodecContext, av.CodecContext.create(video_codec(codec).decoder, "r"))
    if extradata:
        ctx.extradata = extradata
    ctx.thread_count = 1
    c0, out = time.process_time(), 0
    for p in packets[:n]:
        pkt = av.Packet(p.data)
        pkt.pts, pkt.dts = p.pts, p.dts
        out += len(ctx.decode(pkt))
    out += len(ctx.decode(None))
    return (time.process_time() - c0) / max(1, out)


@dataclass(frozen=True)
class Priced:
    copy: float
    layout: float
    unit: str  # "frames" | "ms"


def price(
    g: TopicGroup,
    copied: VideoSettings,
    target: VideoSettings,
    meta: EpisodeMeta,
    frames: int,
    windows: list[StreamWindow],
    source_s: dict[str, float] | None,
    cal: Calibration | None,
) -> Priced:
    """Per read of the group: the copy's cost and the layout's, in ms where both are known."""
    rate = min(meta.streams[s].rate_hz for s in g.streams)
    mine = tuple(w for w in windows if set(w.streams) & set(g.streams))

    def fpc(v: VideoSettings) -> int:
        return max(1, round(g.chunk_span_s * rate / v.gop)) * v.gop

    src = np.asarray(read_types(copied.gop, copied.bframes, fpc(copied), frames, mine))
    tgt = np.asarray(read_types(target.gop, target.bframes, fpc(target), frames, mine))
    point = None
    if cal is not None and source_s and cal.codec == target.codec:
        try:
            point = cal.point(target.crf, target.bframes)
        except ConfigError:  # the layout's encoding was not calibrated: frames it is
            point = None
    if point is None or source_s is None or cal is None:
        return Priced(float(src.sum()), float(tgt.sum()), "frames")
    copy_ms = layout_ms = 0.0
    for cam in g.streams:
        h, w, _ = meta.streams[cam].shape
        copy_ms += float(src.sum()) * source_s[cam] * 1e3
        layout_ms += float(tgt @ np.asarray(point.decode_s)) * (h * w) / (cal.height * cal.width) * 1e3
    return Priced(copy_ms, layout_ms, "ms")
