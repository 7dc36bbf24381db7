"""A camera being written: its packets gathered into whole GOPs until its group's chunk is due.

An encoded camera gets its packets from robodata's encoder; a copied camera (a stream copy)
gets a source's packets as they are, with the source's extradata. Both hand the writer the same
thing: GOPs of `Packet`s, each opening on a keyframe, and the time of each pts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from robodata.codecs.image import Image
from robodata.codecs.video import Packet, VideoEncoder, encoder_pix_fmt
from robodata.container.meta import TopicGroup


class Camera:
    def __init__(self) -> None:
        self.t_by_pts: dict[int, int] = {}
        self.last_t: int | None = None
        self.current: list[Packet] = []  # GOP being filled
        self.ready: deque[list[Packet]] = deque()  # completed GOPs not yet written
        self.frames = 0

    @property
    def extradata(self) -> bytes:
        raise NotImplementedError

    def take(self, packets: list[Packet]) -> None:
        for p in packets:
            if p.key and self.current:
                self.ready.append(self.current)
                self.current = []
            self.current.append(p)

    def pending(self) -> list[Packet]:
        """Packets the camera still holds back (an encoder's delayed frames)."""
        return []

    def finish(self) -> None:
        self.take(self.pending())
        if self.current:
            self.ready.append(self.current)
            self.current = []


class EncodedCamera(Camera):
    def __init__(self, group: TopicGroup, spec_shape: tuple[int, ...], rate_hz: float, first: Image):
        super().__init__()
        v = group.video
        assert v is not None
        h, w, _ = spec_shape
        self.encoder = VideoEncoder(
            v.codec,
            w,
            h,
            rate_hz,
            v.gop,
            v.crf,
            v.preset,
            v.bframes,
            v.threads,
            pix_fmt=encoder_pix_fmt(v.codec, first),
            entropy=v.entropy,
            deblock=v.deblock,
        )

    @property
    def extradata(self) -> bytes:
        return self.encoder.extradata

    def pending(self) -> list[Packet]:
        return self.encoder.flush()


class CopiedCamera(Camera):
    """A source's packets, stored as they are (stream copy): pts are display frame indices."""

    def __init__(self, extradata: bytes):
        super().__init__()
        self._extradata = extradata
        self.seen: set[int] = set()
        self.last_dts: int | None = None
        self.stored: list[Packet] = []  # the packets written to chunks so far, in write order

    @property
    def extradata(self) -> bytes:
        return self._extradata

    def accept(self, packets: Sequence[Packet], t_ns: list[int]) -> str:
        """Takes packets (decode order) and their frames' times; why they cannot follow the
        camera's packets so far ("" when taken; nothing is taken otherwise)."""
        dts, new = self.last_dts, set()
        for p in packets:
            if not isinstance(p.pts, int) or p.pts < 0 or p.pts in self.seen or p.pts in new:
                return f"packet pts {p.pts!r} is not a new frame index"
            if dts is not None and p.dts <= dts:
                return f"packet dts {p.dts} does not increase (after {dts})"
            new.add(p.pts)
            dts = p.dts
        self.seen |= new
        self.last_dts = dts
        self.t_by_pts.update(zip((p.pts for p in packets), t_ns, strict=True))
        self.frames += len(packets)
        self.take(list(packets))
        return ""

    def store(self, pkts: list[Packet], ts: list[int]) -> str:
        """Records a chunk's packets as stored; why not ("" when stored): their times must increase
        with pts, after the previous chunk's (the reader picks a window's frames by time and shows
        them by pts)."""
        by_pts = [t for _, t in sorted(zip((p.pts for p in pkts), ts, strict=True))]
        if any(b <= a for a, b in zip(by_pts, by_pts[1:], strict=False)) or (
            self.last_t is not None and by_pts[0] <= self.last_t
        ):
            return "copied frames' times do not increase with their pts"
        self.last_t = by_pts[-1]
        self.stored += pkts
        return ""
