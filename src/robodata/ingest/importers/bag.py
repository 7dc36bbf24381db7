"""MCAP files, ROS 2 bag directories and ROS 1 `.bag` files -> RawEpisode, streams chosen by a TopicMap.

One pass over the messages (here) collects timestamps, proprio arrays and events, and keeps the
camera messages it read (up to `keep_bytes` of image payload, ImportOptions.keep_image_mb), so that
frames() decodes them on the way to the encoder without reading the recording again; past that
budget the kept messages are dropped and frames() takes a second pass over the file. Per message
the device time is the header stamp and the host time the log (receive) time; each topic's clock is fit
from those pairs (robodata.ingest.clock.fit_offset).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from robodata.codecs.image import image_shape
from robodata.errors import RobodataError
from robodata.ingest.clock import fit_offset
from robodata.ingest.flatten import flatten
from robodata.ingest.importers.compressed_video import VideoTopic, is_compressed_video
from robodata.ingest.importers.messages import (
    decode_image,
    definitions_used,
    field,
    iter_messages,
    mcap_metadata,
    recording_kind,
    stamp_ns,
)
from robodata.ingest.raw import ArrayTrack, CameraTrack, RawEpisode, RawEpisodeError
from robodata.ingest.topics import TopicMap
from robodata.ingest.workers.prefetch import prefetch
from robodata.names import check_name, confine_tree

_MALFORMED = (TypeError, ValueError, KeyError, AttributeError, OverflowError, IndexError)
JOINT_FIELDS = (
    ("position", "joint_pos", "rad"),
    ("velocity", "joint_vel", "rad/s"),
    ("effort", "joint_cur", "A"),
    ("command", "cmd", "rad"),
)


def _numbers(value, path: Path, topic: str, name: str) -> np.ndarray:
    try:
        return np.atleast_1d(np.asarray(value, np.float32)).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise RawEpisodeError(f"{path}: topic {topic!r} field {name!r} is not numeric ({exc})") from None


def _narrowed(v: np.ndarray) -> np.ndarray:
    """float32 when that holds every value exactly, else float64 (a `vector` stream's int32 counter
    past 2**24, a float64 pose): what was recorded is what is stored."""
    if v.dtype == np.float32:
        return v
    v32 = v.astype(np.float32)
    return v32 if np.array_equal(v32.astype(v.dtype), v, equal_nan=True) else v


def _rate(t: np.ndarray) -> float:
    d = np.diff(t)
    d = d[d > 0]
    return float(1e9 / np.median(d)) if len(d) else 0.0


def _meta(path: Path) -> dict:
    """MCAP metadata `robodata.episode` (strings as written; other values JSON-encoded)."""
    md = mcap_metadata(path, "robodata.episode")
    out: dict = {}
    for k, v in md.items():
        try:
            dec = json.loads(v)
        except json.JSONDecodeError:
            dec = v
        out[k] = dec if isinstance(dec, str) or k == "success" else v  # text fields stay text
    return out


def _declared_cameras(md: dict, path: Path) -> dict[str, dict]:
    """metadata robodata.episode `cameras` ({name: {height, width, fps}}), {} when absent."""
    raw = md.get("cameras")
    if raw is None:
        return {}
    try:
        cams = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        raise RawEpisodeError(f"{path}: metadata robodata.episode field 'cameras' is not JSON") from None
    if not isinstance(cams, dict) or not all(isinstance(v, dict) for v in cams.values()):
        raise RawEpisodeError(f"{path}: metadata robodata.episode field 'cameras' must map names to objects")
    return cams


def _check_declared(path: Path, stream: str, shape: tuple, declared: dict) -> float | None:
    """The declared fps (None when none is declared; 0.0 when it is not a number, which QC refuses);
    RawEpisodeError when the decoded frame is not the declared size."""
    where = f"{path}: metadata robodata.episode field 'cameras.{stream}"
    for key, got in (("height", shape[0]), ("width", shape[1])):
        want = declared.get(key)
        if want is None:
            continue
        if not isinstance(want, int) or isinstance(want, bool):
            raise RawEpisodeError(f"{where}.{key}': expected an integer, got {want!r}")
        if want != got:
            raise RawEpisodeError(
                f"{where}.{key}': declares {declared.get('width')}x{declared.get('height')}, "
                f"frames decode as {shape[1]}x{shape[0]}"
            )
    if "fps" not in declared:
        return None
    fps = declared["fps"]
    return float(fps) if isinstance(fps, (int, float)) and not isinstance(fps, bool) else 0.0


class _Streams:
    """Stream names a topic map gives, checked once per topic (robodata.names) where they are
    read; a stream fed by two topics is refused (their samples would interleave)."""

    def __init__(self, path: Path):
        self.path = path
        self.checked: dict[str, str] = {}  # topic -> stream
        self.owner: dict[str, str] = {}  # stream -> topic

    def name(self, topic: str, stream: str, pattern: str) -> str:
        if topic in self.checked:
            return self.checked[topic]
        check_name(stream, field=f"stream name from topic {topic!r} (topic map rule {pattern!r})", source=self.path)
        self.checked[topic] = stream
        return stream

    def claim(self, stream: str, topic: str) -> None:
        other = self.owner.setdefault(stream, topic)
        if other != topic:
            raise RawEpisodeError(f"{self.path}: topics {other!r} and {topic!r} both map to stream {stream!r}")


def open_bag(uri: str, topic_map: TopicMap, msgs: str = "", keep_bytes: int = 256 << 20) -> RawEpisode:
    """`msgs`: a folder of .msg / .idl definitions for types the recording does not embed;
    `keep_bytes`: image payload kept from the first pass for frames() (0: none, a second pass)."""
    try:
        return _open_bag(uri, topic_map, msgs, keep_bytes)
    except RobodataError:
        raise
    except _MALFORMED as exc:  # e.g. a stamp past int64, a field of the wrong type
        raise RawEpisodeError(f"{uri}: malformed recording ({type(exc).__name__}: {exc})") from None


def _payload(msg) -> int:
    data = field(msg, "data")
    return len(data) if data is not None else 0


def _open_bag(uri: str, topic_map: TopicMap, msgs: str, keep_bytes: int) -> RawEpisode:
    path = Path(uri)
    if not path.exists():
        raise RawEpisodeError(f"{path}: missing")
    if path.is_dir():
        confine_tree(path, field="symlink", source=path)  # a bag folder's files stay inside it
    names = _Streams(path)
    video: dict[str, dict] = {}  # stream -> {topic, t_dev, t_host, shape}
    coded: dict[str, VideoTopic] = {}  # CompressedVideo streams: their packets, kept as recorded
    arrays: dict[str, dict] = defaultdict(lambda: {"t_dev": [], "t_host": [], "v": []})
    events: list[tuple[int, int, str]] = []
    unknown: dict[str, list] = {}
    kept: list[tuple[str, str, object]] | None = []  # (stream, schema, msg) of image topics; None: over budget
    kept_bytes = 0
    ev_topic = ""
    topic = ""
    try:
        for topic, schema, log_t, msg in iter_messages(path, None, msgs):
            hit = topic_map.resolve(topic)
            if hit is None:
                u = unknown.setdefault(topic, [schema, 0])
                u[1] += 1
                continue
            rule, stream = hit
            if rule.kind == "ignore":
                continue
            st = stamp_ns(msg)
            t_dev = log_t if st is None else st
            if rule.kind in ("video", "array", "vector"):
                stream = names.name(topic, stream, rule.topic)
            if rule.kind == "video":
                v = video.get(stream)
                if v is None:
                    names.claim(stream, topic)
                    if is_compressed_video(schema):  # its shape: from its first frame, after this pass
                        coded[stream], shape = VideoTopic(topic, f"{path}: {topic}"), None
                    else:
                        shape = image_shape(decode_image(schema, msg, f"{path}: {topic}"))
                    v = video[stream] = {
                        "topic": topic,
                        "t_dev": [],
                        "t_host": [],
                        "shape": shape,
                        "rate": rule.rate_hz,
                    }
                if stream in coded:
                    coded[stream].add(msg)
                elif kept is not None:
                    kept_bytes += _payload(msg)
                    if kept_bytes > keep_bytes:
                        kept = None
                    else:
                        kept.append((stream, schema, msg))
                v["t_dev"].append(t_dev)
                v["t_host"].append(log_t)
            elif rule.kind == "joint_state":
                joints = tuple(str(n) for n in field(msg, "name", ()) or ())
                for src, dst, units in JOINT_FIELDS:
                    raw_vals = field(msg, src)
                    vals = _numbers(raw_vals, path, topic, src) if raw_vals is not None else None
                    if vals is not None and len(vals):
                        names.claim(dst, topic)
                        a = arrays[dst]
                        a.update(names=joints, units=units, rate=rule.rate_hz, clock=topic)
                        a["t_dev"].append(t_dev)
                        a["t_host"].append(log_t)
                        a["v"].append(vals)
            elif rule.kind == "array":
                names.claim(stream, topic)
                vals = _numbers(field(msg, rule.field), path, topic, rule.field)
                a = arrays[stream]
                a.update(names=(), units=rule.units, rate=rule.rate_hz, clock=topic)
                a["t_dev"].append(t_dev)
                a["t_host"].append(log_t)
                a["v"].append(vals)
            elif rule.kind == "vector":
                names.claim(stream, topic)
                sub = field(msg, rule.field) if rule.field else msg
                labels, flat = flatten(sub)
                a = arrays[stream]
                if a["v"] and tuple(labels) != a["names"]:
                    raise RawEpisodeError(f"{path}: topic {topic!r}: fields change across messages")
                a.update(names=tuple(labels), units=rule.units, rate=rule.rate_hz, clock=topic)
                a["t_dev"].append(t_dev)
                a["t_host"].append(log_t)
                a["v"].append(np.asarray(flat, np.float64))
            elif rule.kind == "events":
                if ev_topic and ev_topic != topic:
                    raise RawEpisodeError(f"{path}: topics {ev_topic!r} and {topic!r} both map to the events stream")
                ev_topic = topic
                events.append((t_dev, log_t, str(field(msg, rule.field or "data", ""))))
    except RobodataError:
        raise
    except _MALFORMED as exc:
        raise RawEpisodeError(f"{path}: topic {topic!r}: malformed message ({type(exc).__name__}: {exc})") from None
    if not video and not arrays:
        raise RawEpisodeError(f"{path}: no camera or proprio topic matched the topic map (topics: {sorted(unknown)})")
    for s, vt in coded.items():
        video[s]["shape"] = vt.shape()
    md = _meta(path)
    all_host = [t for v in video.values() for t in v["t_host"][:1]] + [a["t_host"][0] for a in arrays.values()]
    epoch = int(min(all_host)) // 1_000_000_000 * 1_000_000_000
    clocks, cams, arrs = {}, {}, {}
    declared = _declared_cameras(md, path)
    for s, v in video.items():
        td, th = np.asarray(v["t_dev"], np.int64) - epoch, np.asarray(v["t_host"], np.int64) - epoch
        clocks[s] = fit_offset(td, th)
        h, w, _ = v["shape"]
        fps = _check_declared(path, s, v["shape"], declared.get(s, {}))
        cams[s] = CameraTrack(td, h, w, v["rate"] or (_rate(td) if fps is None else fps))
    for s, a in arrays.items():
        td, th = np.asarray(a["t_dev"], np.int64) - epoch, np.asarray(a["t_host"], np.int64) - epoch
        lens = {len(x) for x in a["v"]}
        if len(lens) != 1:
            raise RawEpisodeError(f"{path}: stream {s!r} changes dimension across messages ({sorted(lens)})")
        clock = f"clock:{a['clock']}"
        if clock not in clocks:
            clocks[clock] = fit_offset(td, th)
        arrs[s] = ArrayTrack(td, _narrowed(np.stack(a["v"])), a["rate"] or _rate(td), a["units"], a["names"], clock)
    ev_t = np.array([e[0] for e in events], np.int64) - epoch if events else np.empty(0, np.int64)
    if events:
        clocks[f"clock:{ev_topic}"] = fit_offset(ev_t, np.array([e[1] for e in events], np.int64) - epoch)
    issues = (
        []
        if topic_map.unknown == "ignore"
        else [
            f"unknown_topic: {t} ({schema or 'no schema'}, {n} messages) is not in the topic map"
            for t, (schema, n) in sorted(unknown.items())
        ]
    )
    issues += definitions_used(path, msgs)
    topic_of = {v["topic"]: s for s, v in video.items()}
    shapes = {s: v["shape"] for s, v in video.items()}

    def frames(skip: frozenset[str] | set[str] = frozenset()):
        # CompressedVideo streams decode from the packets of the first pass; the others from the
        # messages it kept, or (past its budget) a second pass over the file. Streams in `skip`
        # (stream-copied) are never decoded.
        for s, vt in coded.items():
            if s not in skip:
                yield from ((s, i, f) for i, f in enumerate(vt.frames()))
        wanted = {t: s for t, s in topic_of.items() if s not in skip and s not in coded}
        if not wanted:  # a camera-less recording (IMU, odometry, mocap): no second pass
            return
        counters = {s: 0 for s in video}

        def job(stream, i, schema, msg):
            img = decode_image(schema, msg, f"{path}: {video[stream]['topic']} frame {i}")
            if image_shape(img) != shapes[stream]:
                raise RawEpisodeError(
                    f"{path}: {video[stream]['topic']} frame {i} is {image_shape(img)}, "
                    f"first frame was {shapes[stream]}"
                )
            return stream, i, img

        def messages():
            if kept is not None:
                wanted_streams = set(wanted.values())
                yield from ((s, schema, msg) for s, schema, msg in kept if s in wanted_streams)
                return
            for topic, schema, _, msg in iter_messages(path, set(wanted), msgs):
                yield wanted[topic], schema, msg

        def jobs():
            for s, schema, msg in messages():
                i = counters[s]
                counters[s] += 1
                yield lambda s=s, i=i, schema=schema, msg=msg: job(s, i, schema, msg)

        yield from prefetch(jobs(), workers=2, depth=8)

    src = recording_kind(path)
    success = md.get("success")
    if success is not None and not isinstance(success, bool):
        raise RawEpisodeError(f"{path}: metadata robodata.episode success must be true or false, not {success!r}")
    if md.get("episode_id"):
        episode_id = check_name(md["episode_id"], field="metadata robodata.episode episode_id", source=path)
    else:
        episode_id = check_name(path.stem, field="file name (no episode_id in its metadata)", source=path)
    return RawEpisode(
        episode_id,
        src,
        str(path),
        str(md.get("robot", "")),
        str(md.get("site", "")),
        str(md.get("task", "")),
        str(md.get("vendor", "")),
        epoch,
        success,
        cams,
        arrs,
        ev_t,
        [e[2] for e in events],
        f"clock:{ev_topic}",
        clocks,
        issues,
        frames,
        robot_type=str(md.get("robot_type", "")),
        source_dataset=str(md.get("dataset", "")),
        language=str(md.get("language", "")),
        video_sources=(lambda cam: _coded_source(coded, cam, path)) if coded else None,
    )


def _coded_source(coded: dict[str, VideoTopic], cam: str, path: Path):
    if cam not in coded:
        raise RawEpisodeError(f"{path}: camera {cam!r} records images (no video bitstream to keep)")
    return coded[cam].source()
