"""The fallback for a part Rerun cannot play as stored (packets out of presentation order, i.e.
B-frames, or a bitstream the muxer cannot rewrite): decode it and encode it again as H.264
without B-frames, one keyframe at the part's start. Every frame that goes through here is
counted (ViewStats.reencoded_frames) and the recording carries a note saying so."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from robodata.codecs.video import VideoDecoder, VideoEncoder
from robodata.errors import CodecError
from robodata.viz.samples import Samples


def reencode_part(
    codec: str,
    extradata: bytes,
    packets: pa.Table,
    shape: tuple[int, ...],
    rate_hz: float,
    window: tuple[int, int] = (-(1 << 63), (1 << 63) - 1),
) -> Samples:
    """The part's frames with window[0] <= t_ns <= window[1], decoded and re-encoded as H.264
    (Annex B, parameter sets in front of the first, key, frame), in presentation order with the
    part's own pts and times.

    Raises:
        CodecError: a frame of the window did not decode (libavcodec's own errors propagate).
    """
    pts = packets.column("pts").to_numpy()
    dts = packets.column("dts").to_numpy()
    t_ns = packets.column("t_ns").to_numpy()
    data = packets.column("data").to_pylist()
    frames = VideoDecoder(codec, extradata, size=(shape[0], shape[1])).decode(
        ((int(p), int(d), b) for p, d, b in zip(pts, dts, data, strict=True)), {int(p) for p in pts}
    )
    order = np.argsort(pts, kind="stable")
    order = order[(t_ns[order] >= window[0]) & (t_ns[order] <= window[1])]
    missing = sum(int(p) not in frames for p in pts[order])
    if missing:
        raise CodecError(f"{missing} of the part's frames did not decode")
    if not len(order):
        return Samples(t_ns[:0], pts[:0], np.zeros(0, dtype=bool), pa.array([], pa.binary()))
    enc = VideoEncoder("h264", shape[1], shape[0], rate_hz or 30.0, gop=max(1, len(order)), crf=18, bframes=0)
    out: list[bytes] = []
    for i in order:
        out += [p.data for p in enc.encode(frames[int(pts[i])])]
    out += [p.data for p in enc.flush()]
    if len(out) != len(order):
        raise CodecError(f"re-encoding {len(order)} frames gave {len(out)} packets")
    out[0] = enc.extradata + out[0]
    key = np.zeros(len(order), dtype=bool)
    key[0] = True
    return Samples(t_ns[order], pts[order], key, pa.array(out, pa.binary()))
