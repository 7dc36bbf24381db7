"""Export manifest episodes as MCAP files (one per episode) that Foxglove opens.

Channels (JSON message encoding, JSON Schema schemas):
  /camera/<cam>       foxglove.CompressedVideo  H.264 Annex B, SPS/PPS repeated on keyframes
  /<state stream>     robodata.JointState       {timestamp, name[], position[]}
  /<action stream>    robodata.JointState
  /events             robodata.Event            {timestamp, label, payload}
Frames are re-encoded from the decoded container windows, so each keyframe message is
self-contained (Foxglove starts decoding at any keyframe). Log times are the episode's
wall-clock times (start_time_ns + stream time).
"""

from __future__ import annotations

import base64
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
from mcap.writer import CompressionType, Writer

from robodata.codecs.video import yuv420p_frame
from robodata.export.episodes import ExportError, arrays, check_ids, frames, open_episode, out_path

_TIME = {"type": "object", "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}}}
COMPRESSED_VIDEO_SCHEMA = {
    "title": "foxglove.CompressedVideo",
    "type": "object",
    "properties": {
        "timestamp": _TIME,
        "frame_id": {"type": "string"},
        "data": {"type": "string", "contentEncoding": "base64"},
        "format": {"type": "string"},
    },
}
JOINT_STATE_SCHEMA = {
    "title": "robodata.JointState",
    "type": "object",
    "properties": {
        "timestamp": _TIME,
        "name": {"type": "array", "items": {"type": "string"}},
        "position": {"type": "array", "items": {"type": "number"}},
    },
}
EVENT_SCHEMA = {
    "title": "robodata.Event",
    "type": "object",
    "properties": {"timestamp": _TIME, "label": {"type": "string"}, "payload": {"type": "string"}},
}


def _stamp(ns: int) -> dict[str, int]:
    return {"sec": int(ns // 1_000_000_000), "nsec": int(ns % 1_000_000_000)}


def export_mcap(rows: list[dict[str, Any]], out_dir: str | Path, progress=lambda n: None) -> dict[str, Any]:
    out = Path(out_dir)
    if not rows:
        raise ExportError("manifest selects no episodes; nothing to export")
    ids = check_ids(rows)
    out.mkdir(parents=True, exist_ok=True)
    files, messages = [], 0
    for row, eid in zip(rows, ids, strict=True):
        path = out_path(out, f"{eid}.mcap", "episode_id")
        tmp = out_path(out, f"{eid}.mcap.partial", "episode_id")
        try:
            messages += _episode(row, tmp)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        tmp.replace(path)
        files.append(str(path))
        progress(1)
    return {"format": "mcap", "dir": str(out), "episodes": len(files), "messages": messages, "files": files}


def _episode(row: dict[str, Any], path: Path) -> int:
    ep = open_episode(row)
    meta = ep.reader.meta
    t0 = int(meta.start_time_ns)
    count = 0
    with open(path, "wb") as f:
        w = Writer(f, compression=CompressionType.ZSTD)
        w.start(profile="", library="robodata")
        video_schema = w.register_schema(
            "foxglove.CompressedVideo", "jsonschema", json.dumps(COMPRESSED_VIDEO_SCHEMA).encode()
        )
        joint_schema = w.register_schema("robodata.JointState", "jsonschema", json.dumps(JOINT_STATE_SCHEMA).encode())
        cams = {c: w.register_channel(f"/camera/{c}", "json", video_schema) for c in ep.cameras}
        encoders = {c: _H264(meta.streams[c].shape, ep.fps) for c in ep.cameras}
        for t, imgs in frames(ep):
            for c, ch in cams.items():
                for ts, pkt in encoders[c].encode(imgs[c], t):
                    ns = t0 + int(round(ts * 1e9))
                    msg: dict[str, Any] = {
                        "timestamp": _stamp(ns),
                        "frame_id": c,
                        "format": "h264",
                        "data": base64.b64encode(pkt).decode(),
                    }
                    w.add_message(ch, log_time=ns, publish_time=ns, data=json.dumps(msg).encode())
                    count += 1
        for c, ch in cams.items():
            for ts, pkt in encoders[c].flush():
                ns = t0 + int(round(ts * 1e9))
                msg = {"timestamp": _stamp(ns), "frame_id": c, "format": "h264", "data": base64.b64encode(pkt).decode()}
                w.add_message(ch, log_time=ns, publish_time=ns, data=json.dumps(msg).encode())
                count += 1
        for stream, (ts, vals) in arrays(ep).items():
            spec = meta.streams[stream]
            names = list(spec.names) or [f"{stream}_{i}" for i in range(vals.shape[1])]
            ch = w.register_channel(f"/{stream}", "json", joint_schema)
            for t_s, v in zip(ts, vals, strict=True):
                ns = t0 + int(round(float(t_s) * 1e9))
                msg = {"timestamp": _stamp(ns), "name": names, "position": [float(x) for x in v]}
                w.add_message(ch, log_time=ns, publish_time=ns, data=json.dumps(msg).encode())
                count += 1
        count += _events(w, ep, t0)
        w.finish()
    return count


def _events(w: Writer, ep, t0: int) -> int:
    names = [s for s, spec in ep.reader.meta.streams.items() if spec.kind == "events"]
    if not names:
        return 0
    schema = w.register_schema("robodata.Event", "jsonschema", json.dumps(EVENT_SCHEMA).encode())
    win = ep.reader.read_window(0.0, ep.reader.meta.duration_s + 1.0, streams=names)
    n = 0
    for s in names:
        ch = w.register_channel(f"/{s}", "json", schema)
        data = win[s].data
        labels = data.get("label", []) if isinstance(data, dict) else list(data)
        payloads = data.get("payload", [""] * len(labels)) if isinstance(data, dict) else [""] * len(labels)
        for t_s, label, payload in zip(win[s].t, labels, payloads, strict=True):
            ns = t0 + int(round(float(t_s) * 1e9))
            msg = {
                "timestamp": _stamp(ns),
                "label": str(label),
                "payload": payload if isinstance(payload, str) else json.dumps(payload),
            }
            w.add_message(ch, log_time=ns, publish_time=ns, data=json.dumps(msg).encode())
            n += 1
    return n


class _H264:
    """libx264 Annex B packets with in-band SPS/PPS on every keyframe, no B-frames."""

    def __init__(self, shape: tuple[int, ...], fps: float):
        self.ctx = av.CodecContext.create("libx264", "w")
        self.ctx.width, self.ctx.height = int(shape[1]), int(shape[0])
        self.ctx.pix_fmt = "yuv420p"
        rate = Fraction(fps).limit_denominator(1001)
        self.ctx.time_base = 1 / rate
        self.ctx.framerate = rate
        self.ctx.options = {
            "preset": "veryfast",
            "crf": "23",
            "g": "30",
            "bf": "0",
            "x264-params": "repeat-headers=1:annexb=1",
        }
        self.fps = fps
        self.n = 0
        self.times: dict[int, float] = {}

    def encode(self, rgb: np.ndarray, t: np.ndarray):
        out = []
        for img, ts in zip(rgb, t, strict=True):
            frame = yuv420p_frame(img)
            frame.pts = self.n
            self.times[self.n] = float(ts)
            self.n += 1
            out += [(self.times.pop(_pts(p)), bytes(p)) for p in self.ctx.encode(frame)]
        return out

    def flush(self):
        return [(self.times.pop(_pts(p)), bytes(p)) for p in self.ctx.encode(None)]


def _pts(packet: av.Packet) -> int:
    if packet.pts is None:  # the encoder sets every packet's pts from its frame's
        raise ExportError("the H.264 encoder returned a packet without a pts")
    return int(packet.pts)
