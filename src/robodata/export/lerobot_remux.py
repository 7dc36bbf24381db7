"""LeRobot export of stream-copied cameras: their stored packets remuxed into the export's MP4.

A camera stored as a stream copy (robodata.ingest.video_copy: the source's own AV1 / H.264 / HEVC
packets) is written into the export by remuxing those packets, never decoded and encoded again,
when the export's layout allows it:
- every episode stores it as a copy, of one codec, one coded size and one extradata;
- its parameter sets travel in band on its first keyframe (the MP4's own record is taken from there
  by PyAV's muxer: a mux stream is given no extradata record of ours);
- its frames are the export's rows one for one: it is the episode's reference camera, or its k-th
  frame is the nearest to the k-th row (robodata.export.episodes.frames).
Otherwise it is encoded as before, and the export's result says why. The export still decodes a
remuxed camera's frames for LeRobot's image statistics (stats.json); it does not encode them.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np

from robodata.codecs.bitstream import BitstreamError, Scanner
from robodata.container import EpisodeReader
from robodata.container.stored import stored_packets
from robodata.export.episodes import EpisodeStreams, ExportError, open_episode, reference_camera
from robodata.ingest.video_copy import COPY_PRESET


def _frame_times(reader: EpisodeReader, cam: str) -> np.ndarray:
    t = stored_packets(reader, cam)
    return t.column("t_ns").to_numpy()[np.argsort(t.column("pts").to_numpy(), kind="stable")]


def _one_for_one(t: np.ndarray, rows: np.ndarray) -> bool:
    """Whether frame k of `t` is strictly the nearest to row time k, for every row."""
    if len(t) != len(rows):
        return False
    d = np.abs(t - rows)
    return bool(np.all(d[1:] < np.abs(t[:-1] - rows[1:])) and np.all(d[:-1] < np.abs(t[1:] - rows[:-1])))


def _why_not(ep: EpisodeStreams, cam: str, want: tuple[str, bytes, tuple]) -> str:
    r = ep.reader
    v = r.layout.group_of(cam).video
    eid = r.meta.episode_id
    if v is None or v.preset != COPY_PRESET:
        return f"episode {eid!r} stores it encoded by robodata (not a stream copy)"
    if (v.codec, r.codec_extradata(cam), r.meta.streams[cam].shape) != want:
        return f"episode {eid!r} stores another codec, extradata or size than the first episode"
    ref = reference_camera(ep)
    if cam != ref and not _one_for_one(_frame_times(r, cam), _frame_times(r, ref)):
        return f"episode {eid!r}: its frames are not the rows (camera {ref!r}'s) one for one"
    return ""


def remux_plan(rows: list[dict[str, Any]], first: EpisodeStreams, cams: list[str]) -> dict[str, str]:
    """{camera: "" (remuxed) or why it is encoded}, every episode looked at (footers and packet
    tables, no decode) before anything is written."""
    plan: dict[str, str] = {}
    want = {}
    for c in cams:
        v = first.reader.layout.group_of(c).video
        want[c] = (v.codec if v else "", first.reader.codec_extradata(c), first.reader.meta.streams[c].shape)
        plan[c] = "" if v is not None and v.preset == COPY_PRESET else "not a stream copy"
        if not plan[c]:
            plan[c] = _in_band(first.reader, c, v.codec)  # type: ignore[union-attr]
    for i, row in enumerate(rows):
        todo = [c for c in cams if not plan[c]]
        if not todo:
            break
        ep = first if i == 0 else open_episode(row)
        try:
            for c in todo:
                plan[c] = _why_not(ep, c, want[c])
        finally:
            if ep is not first:
                ep.reader.close()
    return plan


def _in_band(reader: EpisodeReader, cam: str, codec: str) -> str:
    t = stored_packets(reader, cam)
    try:
        params = len(t) > 0 and Scanner(codec).scan(bytes(t.column("data")[0].as_py())).params
    except BitstreamError:
        params = False
    return "" if params else "its parameter sets are only in the extradata record (none in band for the MP4's)"


class PacketOut:
    """One MP4 per remuxed camera: each episode's stored packets appended, pts from the episode's
    first row on (the rows are at k / fps, as VideoOut's frames are)."""

    def __init__(self, path: Path, codec: str, shape: tuple[int, ...], fps: float):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.container = av.open(str(path), "w")
        rate = Fraction(fps).limit_denominator(1001)
        self.stream = self.container.add_mux_stream(codec, rate=rate, width=int(shape[1]), height=int(shape[0]))
        self.time_base = Fraction(1) / rate
        self.stream.time_base = self.time_base
        self.frames = 0

    def add(self, reader: EpisodeReader, cam: str, rows: int) -> None:
        t = stored_packets(reader, cam)
        if t.num_rows != rows:
            raise ExportError(
                f"episode {reader.meta.episode_id!r}: camera {cam!r} holds {t.num_rows} packets, {rows} rows"
            )
        for pts, dts, key, data in zip(*(t.column(k).to_pylist() for k in ("pts", "dts", "key", "data")), strict=True):
            p = av.Packet(data)
            p.pts, p.dts, p.is_keyframe = self.frames + pts, self.frames + dts, key
            p.time_base = self.time_base
            p.stream = self.stream
            self.container.mux(p)
        self.frames += rows

    def close(self) -> None:
        self.container.close()
