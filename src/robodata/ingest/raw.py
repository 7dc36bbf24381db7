"""What every importer produces: one raw episode, streams still on their device clocks.

Importers only read; alignment (robodata.ingest.align) maps clocks onto one timeline,
QC judges the result and conversion (robodata.ingest.convert) writes the container.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from robodata.codecs.demux import SourceVideo
from robodata.codecs.image import Image
from robodata.errors import RobodataError
from robodata.ingest.clock import IDENTITY, ClockFit
from robodata.names import UnsafeNameError, check_name

ROLE_STREAMS = {"state": "joint_pos", "action": "cmd"}  # what importers name a stream whose role they know


class RawEpisodeError(RobodataError):
    """A raw episode cannot be read or converted; the message says what is wrong with which file."""


def relocated(exc: RobodataError, local: str, base: str) -> RobodataError:
    """The same error naming the landing uri instead of its local staging path."""
    if local == base:
        return exc
    if isinstance(exc, UnsafeNameError):
        return UnsafeNameError(exc.source.replace(local, base), exc.field, exc.value, exc.why.replace(local, base))
    return RawEpisodeError(str(exc).replace(local, base))


# what a library's bare exception means when its message says nothing (MemoryError: "")
_BARE = {
    MemoryError: "needs more memory than this process may use (a size the data does not hold?)",
    RecursionError: "nested too deeply to read",
    OverflowError: "a number too large for its type",
}
_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def describe(exc: BaseException, limit: int = 200) -> str:
    """A library's exception as the detail of a reason that already names the file and field: its
    type and message, the message cut to `limit` characters (never a file's bulk), object reprs
    (`<_io.BytesIO object at 0x...>`) left out, never empty."""
    msg = " ".join(_REPR.sub("", str(exc)).split())
    if len(msg) > limit:
        msg = msg[:limit] + "..."
    bare = next((v for k, v in _BARE.items() if isinstance(exc, k)), "")
    return f"{type(exc).__name__}: {msg or bare or 'no message'}"


@dataclass
class CameraTrack:
    t_ns: np.ndarray  # device clock, one per frame, in file order
    height: int
    width: int
    fps: float  # nominal rate
    clock: str = ""  # key into RawEpisode.clocks ("" -> the camera's own name)


@dataclass
class ArrayTrack:
    t_ns: np.ndarray
    values: np.ndarray  # (N, D) float32; float64 where float32 would change a value (bag `vector` streams)
    rate_hz: float
    units: str = ""
    names: tuple[str, ...] = ()
    clock: str = "state"


@dataclass
class RawEpisode:
    episode_id: str
    source: str  # the item kind: a format's kind (robodata.ingest.formats), `lerobot-v3.0` versioned
    uri: str
    robot: str
    site: str
    task: str
    vendor: str
    epoch_ns: int  # wall time of host-timeline zero (device times are relative to it)
    success: bool | None
    cameras: dict[str, CameraTrack]
    arrays: dict[str, ArrayTrack]
    events_t: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    events: list[str] = field(default_factory=list)
    events_clock: str = "state"
    clocks: dict[str, ClockFit] = field(default_factory=dict)
    issues: list[str] = field(default_factory=list)  # findings while reading (e.g. unknown topics)
    frames: Callable[..., Iterator[tuple[str, int, Image]]] | None = field(default=None, repr=False)
    # frames(): yields (camera, frame_index, image), each camera in order; cameras interleaved. An image
    # is RGB uint8 HxWx3 or a decoded av.VideoFrame in its own pixel format (robodata.codecs.image).
    robot_type: str = ""  # embodiment (LeRobot robot_type, a key map's robot_type); catalog column
    source_dataset: str = ""  # the public / fleet dataset the item belongs to; catalog column
    language: str = ""  # the instruction text, "" when the recording has none; catalog column
    # role -> stream, as the source declares it ("state": the observed state, "action": the command
    # stream), beside the convention below; kept in the container (meta.extra["roles"]) for the
    # catalog and the exporters, which never guess a stream's role
    roles: dict[str, str] = field(default_factory=dict)
    camera_roles: dict[str, str] = field(default_factory=dict)  # camera stream -> role (`front`, `wrist`), declared
    rate_unknown: bool = False  # steps laid on a nominal grid: no source declares the control rate
    # video_sources(camera): the camera's compressed packets of this episode as its source stores
    # them (robodata.codecs.demux.SourceVideo, demuxed, never decoded), for a stream copy; None: the
    # importer keeps no bitstream. An importer that sets it takes frames(skip=cameras): the copied
    # cameras are then never decoded.
    video_sources: Callable[[str], SourceVideo] | None = field(default=None, repr=False)
    input_bytes: int = 0  # bytes the importer reads for this episode (0: the item's; importers.bounds)

    def stream_roles(self) -> dict[str, str]:
        """Declared roles, else by robodata's stream names: `joint_pos` is the state, `cmd` the action."""
        out = {r: s for r, s in self.roles.items() if s in self.arrays}
        for role, stream in ROLE_STREAMS.items():
            if role not in out and stream in self.arrays:
                out[role] = stream
        return out

    def clock_for(self, name: str) -> ClockFit:
        return self.clocks.get(name, IDENTITY)

    def camera_clock(self, cam: str) -> ClockFit:
        return self.clock_for(self.cameras[cam].clock or cam)

    def check_identity(self) -> None:
        """The contract every importer's episode meets before anything uses its names: the id and
        each stream name are safe single segments (robodata.names; importers check them where they
        read them, naming file and field, and this catches one that did not) and no two streams
        share a name, even in another case. UnsafeNameError otherwise."""
        check_name(self.episode_id, field="episode_id", source=self.uri)
        seen: dict[str, tuple[str, str]] = {}
        events = ["events"] if self.events else []
        groups = (("camera", list(self.cameras)), ("array", list(self.arrays)), ("events", events))
        for kind, names in groups:
            for name in names:
                check_name(name, field=f"{kind} stream name", source=self.uri)
                if name.casefold() in seen:  # one folder on a case-insensitive file system
                    other, was = seen[name.casefold()]
                    same = "names" if other == name else f"differs only in case from {other!r}, naming"
                    raise UnsafeNameError(
                        self.uri, "stream name", name, f"{same} both the {was} stream and the {kind} stream"
                    )
                seen[name.casefold()] = (name, kind)
