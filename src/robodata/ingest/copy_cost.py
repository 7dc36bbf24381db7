"""What a stream copy costs the loader against the layout it would be transcoded to (`auto`).

Frames decoded per read come from the advisor's GOP model of the training loader
(robodata.codecs.gop.decoded_counts_gopwise: the delivery dataset's GopDecoder, each wanted GOP fed
from its keyframe, unwanted non-reference frames never sent) for a read pattern's windows, else
for one random frame. (EpisodeReader's count, decoded_counts, charges a layout with B-frames for
the ones the loader skips: LeRobot's AV1 against the one plan's GOP 15 / 2 B-frames was priced
0.72x of the layout for VLA and read 1.5x its CPU per sample.) With a plan from
`robodata advise` (its calibration: decode seconds per frame type of the layout's codec), frames
are priced in seconds: the source's own decode is measured on its first packets (CPU seconds of a
keyframe and of any other frame, one thread, no RGB: a keyframe of LeRobot's 640x480 AV1 costs
~4 ms and a frame between ~0.3 ms, so a read that decodes more keyframes than the stream's mix
costs more than its frames' mean says), the layout's from the calibration, scaled by pixels.
Without one, frames are compared as frames (the codecs' per-frame costs unknown).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import lru_cache

import av
import numpy as np

from robodata.codecs.gop import decoded_counts_gopwise
from robodata.codecs.video import timing_decoder
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
            total += decoded_counts_gopwise(gop, bframes, fpc, int(f) + w.first, int(f) + w.last, w.every, frames).types
    return tuple(total / (len(anchors) * len(ws)))


def decode_s_by_type(codec: str, extradata: bytes, packets: list, passes: int = 3) -> tuple[float, float]:
    """CPU seconds of the source's own decoder (one thread) per keyframe and per other frame, over
    its first packets (whole GOPs), the least of `passes` (as the calibration times the layout's).
    Each GOP is decoded as the loader decodes one (robodata.dataset.frames.GopDecoder: fed from
    its keyframe, drained, the decoder flushed for the next); the drain and flush are the
    keyframe's, one per GOP opened."""
    n = min(len(packets), MEASURED_PACKETS)
    while n < len(packets) and not packets[n].key:
        n += 1  # whole GOPs: the mix of frame types a read decodes
    best = [float("inf"), float("inf")]
    for _ in range(passes):
        ctx = timing_decoder(codec, extradata)
        spent, count = [0.0, 0.0], [0, 0]
        for i, p in enumerate(packets[:n]):
            pkt = av.Packet(p.data)
            pkt.pts, pkt.dts = p.pts, p.dts
            t = time.thread_time()
            ctx.decode(pkt)
            spent[0 if p.key else 1] += time.thread_time() - t
            count[0 if p.key else 1] += 1
            if i + 1 == n or packets[i + 1].key:
                t = time.thread_time()
                ctx.decode(None)
                ctx.flush_buffers()
                spent[0] += time.thread_time() - t
        for k in (0, 1):
            if count[k]:
                best[k] = min(best[k], spent[k] / count[k])
    key = best[0] if best[0] != float("inf") else 0.0
    return key, best[1] if best[1] != float("inf") else key


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
    source_s: dict[str, tuple[float, float]] | None,
    cal: Calibration | None,
) -> Priced:
    """Per read of the group: the copy's cost and the layout's, in ms where both are known;
    `source_s`: each camera's (keyframe, other frame) decode seconds (decode_s_by_type)."""
    rate = min(meta.streams[s].rate_hz for s in g.streams)
    mine = tuple(w for w in windows if set(w.streams) & set(g.streams))

    def fpc(v: VideoSettings) -> int:
        return max(1, round(g.chunk_span_s * rate / v.gop)) * v.gop

    src = np.asarray(read_types(copied.gop, copied.bframes, fpc(copied), frames, mine))
    tgt = np.asarray(read_types(target.gop, target.bframes, fpc(target), frames, mine))
    point = None
    if cal is not None and source_s and cal.codec == target.codec:
        try:
            point = cal.point(target.crf, target.bframes, target.entropy, target.deblock)
        except ConfigError:  # the layout's encoding was not calibrated: frames it is
            point = None
    if point is None or source_s is None or cal is None:
        return Priced(float(src.sum()), float(tgt.sum()), "frames")
    copy_ms = layout_ms = 0.0
    for cam in g.streams:
        h, w, _ = meta.streams[cam].shape
        key_s, other_s = source_s[cam]
        copy_ms += (float(src[0]) * key_s + float(src[1:].sum()) * other_s) * 1e3
        layout_ms += float(tgt @ np.asarray(point.decode_s)) * (h * w) / (cal.height * cal.width) * 1e3
    return Priced(copy_ms, layout_ms, "ms")
