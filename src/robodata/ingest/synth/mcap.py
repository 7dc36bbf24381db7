"""Write a synthetic episode as one MCAP file (foxglove.CompressedImage + JointState-like JSON)."""

from __future__ import annotations

import base64
import json
from datetime import datetime
from pathlib import Path

from mcap.writer import Writer

from robodata.ingest.synth.episode import SynthEpisode, jpeg_bytes
from robodata.ingest.synth.mcap_video import COMPRESSED_VIDEO_SCHEMA, CompressedVideoSpec, VideoMessages, annexb_h264

# foxglove.CompressedImage has CompressedVideo's fields: timestamp, frame_id, data (base64), format
COMPRESSED_IMAGE_SCHEMA = {**COMPRESSED_VIDEO_SCHEMA, "title": "foxglove.CompressedImage"}
JOINT_STATE_SCHEMA = {
    "title": "robodata.JointState",
    "type": "object",
    "properties": {
        "timestamp": {"type": "object", "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}}},
        "name": {"type": "array", "items": {"type": "string"}},
        "position": {"type": "array", "items": {"type": "number"}},
        "effort": {"type": "array", "items": {"type": "number"}},
        "command": {"type": "array", "items": {"type": "number"}},
    },
}
EVENT_SCHEMA = {
    "title": "robodata.Event",
    "type": "object",
    "properties": {"timestamp": {"type": "object"}, "event": {"type": "string"}},
}


def _stamp(t_ns: int) -> dict[str, int]:
    return {"sec": int(t_ns // 1_000_000_000), "nsec": int(t_ns % 1_000_000_000)}


def write_mcap_episode(
    ep: SynthEpisode, root: Path, quality: int = 90, video: CompressedVideoSpec | None = None
) -> Path:
    """Timestamps are device-clock times on the episode's epoch (start_time + t). Cameras are
    foxglove.CompressedImage JPEGs, or with `video` foxglove.CompressedVideo H.264 (topic /<camera>/image)."""
    path = root / f"{ep.episode_id}.mcap"
    base = int(datetime.fromisoformat(ep.meta["start_time"]).timestamp() * 1e9)
    tmp = path.with_suffix(".mcap.partial")
    with open(tmp, "wb") as f:
        w = Writer(f)
        w.start(profile="", library="robodata-synth")
        img = (
            0
            if video
            else w.register_schema(
                "foxglove.CompressedImage", "jsonschema", json.dumps(COMPRESSED_IMAGE_SCHEMA).encode()
            )
        )
        js = w.register_schema("robodata.JointState", "jsonschema", json.dumps(JOINT_STATE_SCHEMA).encode())
        ev = w.register_schema("robodata.Event", "jsonschema", json.dumps(EVENT_SCHEMA).encode())
        w.add_metadata(
            "robodata.episode", {k: json.dumps(v) if not isinstance(v, str) else v for k, v in ep.meta.items()}
        )
        if video is None:
            chans = {c: w.register_channel(f"/{c}/image/compressed", "json", img) for c in ep.frame_t}
        else:
            vm = VideoMessages(w, video)
            chans = {c: w.register_channel(f"/{c}/image", vm.message_encoding, vm.schema_id) for c in ep.frame_t}
        joint = w.register_channel("/joint_states", "json", js)
        events = w.register_channel("/events", "json", ev)
        for cam, ch in chans.items():
            if video is not None:
                ts = [int(t) + base for t in ep.frame_t[cam]]
                units = annexb_h264((rgb for _, rgb in ep.frames(cam)), ep.meta["cameras"][cam]["fps"], video)
                for i, (t, unit) in enumerate(zip(ts, units, strict=True)):
                    w.add_message(ch, log_time=t, publish_time=t, data=vm.encode(t, cam, unit), sequence=i)
                continue
            for i, (t, rgb) in enumerate(ep.frames(cam)):
                t += base
                msg = {
                    "timestamp": _stamp(t),
                    "frame_id": cam,
                    "format": "jpeg",
                    "data": base64.b64encode(jpeg_bytes(rgb, quality)).decode(),
                }
                w.add_message(ch, log_time=t, publish_time=t, data=json.dumps(msg).encode(), sequence=i)
        names = ep.meta["state"]["joint_names"]
        for i, t in enumerate(ep.state_t + base):
            msg = {
                "timestamp": _stamp(int(t)),
                "name": names,
                "position": ep.joint_pos[i].tolist(),
                "effort": ep.joint_cur[i].tolist(),
                "command": ep.cmd[i].tolist(),
            }
            w.add_message(joint, log_time=int(t), publish_time=int(t), data=json.dumps(msg).encode(), sequence=i)
        for i, (t, e) in enumerate(ep.events):
            t += base
            w.add_message(
                events,
                log_time=t,
                publish_time=t,
                data=json.dumps({"timestamp": _stamp(t), "event": e}).encode(),
                sequence=i,
            )
        w.finish()
    tmp.rename(path)
    return path
