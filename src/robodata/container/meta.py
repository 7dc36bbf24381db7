"""Typed descriptions of an episode: its streams, topic groups and layout."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from robodata.config import require

STREAM_KINDS = ("video", "array", "events")
_LATER_VIDEO_DEFAULTS = {"entropy": "cabac", "deblock": True}  # VideoSettings fields newer than the format


@dataclass(frozen=True)
class VideoSettings:
    """Encoding of one camera group. gop = frames between keyframes (closed GOPs)."""

    codec: str = "h264"  # registry name in robodata.codecs: h264 | hevc | av1
    gop: int = 30
    crf: int = 23
    preset: str = "veryfast"
    bframes: int = 0
    threads: int = 0  # encoder threads per camera; 0 = codec default (not in the layout's identity; changes bytes)
    # H.264's entropy coder: "cabac" (the default, fewer bytes) or "cavlc" (cheaper to decode, more
    # bytes); every other codec has its own arithmetic coder alone, "cabac" here
    entropy: str = "cabac"
    # the in-loop filters (H.264's deblocking; HEVC's deblocking and SAO): False writes streams whose
    # slices switch them off, so every decoder skips them (an H.264 keyframe decodes ~25 %, a P-frame
    # ~35 % cheaper at 640x480) for a little blockiness (the advisor holds it to its quality floor);
    # AV1: True alone
    deblock: bool = True

    def __post_init__(self) -> None:
        from robodata.codecs import ENTROPY_CODERS, video_codec

        spec = video_codec(self.codec)  # raises ConfigError for unknown codecs
        require(self.entropy in ENTROPY_CODERS, f"entropy must be one of {list(ENTROPY_CODERS)}, got {self.entropy!r}")
        require(
            self.entropy in spec.entropies,
            f"entropy={self.entropy!r} is H.264's alone: codec {self.codec!r} has {list(spec.entropies)}"
            " (set entropy: cabac, or codec: h264)",
        )
        require(isinstance(self.deblock, bool), f"deblock must be true or false, got {self.deblock!r}")
        require(
            self.deblock in spec.deblocks,
            f"deblock=false needs a codec whose encoder can switch the filter off (h264, hevc), not {self.codec!r}"
            " (set deblock: true)",
        )
        require(1 <= self.gop <= 1000, f"gop must be in [1, 1000], got {self.gop}")
        require(0 <= self.crf <= 63, f"crf must be in [0, 63], got {self.crf}")
        require(0 <= self.bframes <= 8, f"bframes must be in [0, 8], got {self.bframes}")
        require(0 <= self.threads <= 64, f"threads must be in [0, 64] (0 = the codec's choice), got {self.threads}")


@dataclass(frozen=True)
class TopicGroup:
    """Streams stored together. A chunk holds one group over one time span, never two groups."""

    name: str
    streams: tuple[str, ...]
    chunk_span_s: float = 2.0
    video: VideoSettings | None = None  # set for camera groups

    def __post_init__(self) -> None:
        object.__setattr__(self, "streams", tuple(self.streams))
        require(bool(self.name), "topic group needs a name")
        require(len(self.streams) > 0, f"topic group {self.name!r} has no streams")
        require(len(set(self.streams)) == len(self.streams), f"topic group {self.name!r} lists a stream twice")
        require(self.chunk_span_s > 0, f"topic group {self.name!r}: chunk_span_s must be > 0")


@dataclass(frozen=True)
class Layout:
    """How an episode's streams are grouped into chunks; validated on construction (ConfigError).

    Every stream of an episode is in exactly one group; `version` identifies the layout."""

    groups: tuple[TopicGroup, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "groups", tuple(self.groups))
        names = [g.name for g in self.groups]
        require(len(set(names)) == len(names), f"duplicate topic group names in {names}")
        seen: dict[str, str] = {}
        for g in self.groups:
            for s in g.streams:
                require(
                    s not in seen, f"stream {s!r} is in groups {seen.get(s)!r} and {g.name!r}; one group per stream"
                )
                seen[s] = g.name

    def group_of(self, stream: str) -> TopicGroup:
        """The group holding `stream`. Raises KeyError when none does."""
        for g in self.groups:
            if stream in g.streams:
                return g
        raise KeyError(stream)

    def to_dict(self) -> dict[str, Any]:
        """The defaults of the encoder fields added later (entropy cabac, deblock on) are left out: a
        layout that keeps them has the dict, footer and version it had before the fields, and readers
        that predate them read it."""
        d = {"groups": [asdict(g) for g in self.groups]}
        for g in d["groups"]:
            for key, default in _LATER_VIDEO_DEFAULTS.items():
                if g.get("video") and g["video"].get(key) == default:
                    del g["video"][key]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Layout:
        groups = []
        for g in d["groups"]:
            g = dict(g)
            video = g.pop("video", None)
            groups.append(TopicGroup(**g, video=VideoSettings(**video) if video else None))
        return cls(groups=tuple(groups))

    @property
    def version(self) -> str:
        """Stable id of this layout: format version + hash of the settings.

        Encoder threads change how fast a layout is written, not its settings: they are hashed
        as 0 (the value every earlier container has), so a container encoded on one thread is
        in the same layout as one encoded with the codec's own threading (relayout skips it).
        They do change the bytes: x264 cuts each picture into a slice a thread, so only encodes
        on as many threads are byte for byte the same (IngestSettings.for_bulk encodes on one).
        The defaults of later encoder fields are not in the dict (to_dict): every layout written
        before them keeps its version."""
        d = self.to_dict()
        for g in d["groups"]:
            if g.get("video"):
                g["video"]["threads"] = 0
        blob = json.dumps(d, sort_keys=True).encode()
        return f"v1-{hashlib.sha256(blob).hexdigest()[:12]}"


@dataclass(frozen=True)
class StreamSpec:
    """One stream of an episode; validated on construction (ConfigError)."""

    name: str
    kind: str  # video | array | events
    rate_hz: float = 0.0  # nominal rate (0 for irregular event streams)
    shape: tuple[int, ...] = ()  # video: (H, W, 3); array: per-sample shape, e.g. (7,)
    dtype: str = "float32"
    units: str = ""
    names: tuple[str, ...] = ()  # e.g. joint names

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(x) for x in self.shape))
        object.__setattr__(self, "names", tuple(self.names))
        require(
            self.kind in STREAM_KINDS, f"stream {self.name!r}: kind must be one of {STREAM_KINDS}, got {self.kind!r}"
        )
        require(self.rate_hz >= 0, f"stream {self.name!r}: rate_hz must be >= 0")
        if self.kind == "video":
            require(len(self.shape) == 3 and self.shape[2] == 3, f"video stream {self.name!r}: shape must be (H, W, 3)")
            require(
                self.shape[0] % 2 == 0 and self.shape[1] % 2 == 0, f"video stream {self.name!r}: H and W must be even"
            )
            require(self.rate_hz > 0, f"video stream {self.name!r} needs rate_hz")


@dataclass
class EpisodeMeta:
    """An episode's identity, origin, start time and streams (the footer's `meta`)."""

    episode_id: str
    robot: str
    site: str
    task: str
    start_time_ns: int
    streams: dict[str, StreamSpec]
    vendor: str = ""
    duration_s: float = 0.0  # filled in by the writer from the data
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        require(bool(self.episode_id), "episode_id must not be empty")
        for k, s in self.streams.items():
            require(k == s.name, f"stream key {k!r} != spec name {s.name!r}")

    def to_dict(self) -> dict[str, Any]:
        # asdict(self) would deep-copy the streams only to have them converted again
        return {
            f.name: {k: asdict(v) for k, v in self.streams.items()}
            if f.name == "streams"
            else copy.deepcopy(getattr(self, f.name))
            for f in fields(self)
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EpisodeMeta:
        d = dict(d)
        d["streams"] = {k: StreamSpec(**v) for k, v in d["streams"].items()}
        return cls(**d)


def default_layout(
    cameras: tuple[str, ...] | list[str],
    proprio: tuple[str, ...] | list[str] = ("joint_pos", "joint_cur", "cmd"),
    events: tuple[str, ...] | list[str] = ("events",),
    video: VideoSettings | None = None,
    camera_span_s: float = 2.0,
    proprio_span_s: float = 10.0,
) -> Layout:
    """cameras / proprio / events groups: the layout ingestion uses unless a plan says otherwise.
    A group the episode has no stream for is left out: an IMU, odometry or telemetry recording is
    a container without a `cameras` group, a camera-only one has no `proprio` group."""
    groups = []
    if cameras:
        groups.append(TopicGroup("cameras", tuple(cameras), camera_span_s, video or VideoSettings()))
    if proprio:
        groups.append(TopicGroup("proprio", tuple(proprio), proprio_span_s))
    if events:
        groups.append(TopicGroup("events", tuple(events), 60.0))
    return Layout(groups=tuple(groups))
