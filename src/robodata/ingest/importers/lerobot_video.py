"""A LeRobot episode's frames inside its video file: which frames are the episode's, and decoding them.

The frames are chosen by presentation time from the demuxer alone (no decode): those in the
episode's [from_timestamp, to_timestamp) window, plus the frame *at* to_timestamp when it matches
the episode's last parquet row. Datasets written by LeRobot make to_timestamp exclusive (that frame
is the next episode's first), but some real ones (open_50) store the last frame's own time there:
matching it against the parquet keeps that frame instead of losing it in every episode.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import cast

import av
import numpy as np
from av.video.codeccontext import VideoCodecContext

from robodata.codecs import decoder_for
from robodata.codecs.demux import SourceVideo, demux_video, index_pts, open_input
from robodata.errors import CodecError
from robodata.ingest.raw import RawEpisodeError

EPS_S = 1e-4  # LeRobot's own timestamp tolerance


@dataclass
class EpisodeVideo:
    path: Path
    t_from: float  # the episode's start inside the file, s
    pts: tuple[int, ...]  # the kept frames' presentation timestamps, in time-base units, ascending
    time_base: float
    # the packets around the episode's window, demuxed (not decoded) once: by the read that found
    # its frames, or (when the sample table gave the times) by the stream copy's choice; a copy
    # and a transcode take them from here instead of reading the file again
    source: SourceVideo | None = field(default=None, repr=False, compare=False)

    @property
    def times_s(self) -> np.ndarray:
        """The kept frames' times from the episode's start."""
        return np.array(self.pts, np.float64) * self.time_base - self.t_from


def missing_video_reason(root: Path, path: Path, feature: str) -> str:
    """Why `path` (info.json's video_path filled in) is not there, naming a folder of the dataset
    that holds the same file under another top-level name (a `video/` folder where the template
    says `videos/`) when there is one."""
    why = f"{path}: the video of feature {feature!r} is missing (meta/info.json video_path)"
    try:
        rel = path.resolve().relative_to(root.resolve())
    except ValueError:
        return why
    if len(rel.parts) < 2:
        return why
    for top in sorted(p for p in root.iterdir() if p.is_dir() and p.name != rel.parts[0]):
        other = top.joinpath(*rel.parts[1:])
        if other.is_file():
            return (
                f"{why}; the dataset holds it as {other.relative_to(root)}: its video folder is "
                f"{top.name}/, info.json video_path says {rel.parts[0]}/ (rename the folder or fix video_path)"
            )
    return why


def episode_video(
    root: Path, path: Path, t_from: float, t_to: float, feature: str, state_t: np.ndarray
) -> EpisodeVideo:
    """The episode's frames in `path`: presentation times in [t_from, t_to), and the frame at t_to
    when it matches the last parquet row (`state_t`: the rows' times from the first row's, s; the
    frame's time is taken from the episode's first frame)."""
    if not path.is_file():
        raise RawEpisodeError(missing_video_reason(root, path, feature))
    window = (t_from - 2 * EPS_S, t_to + 2 * EPS_S)  # every pts the episode may keep (below)
    src: SourceVideo | None = None
    try:
        indexed = index_pts(path)  # the sample table's times: no packet read
        if indexed is None:  # B-frames, not an MP4, fragmented: the episode's packets demuxed
            src = demux_video(path, keep_s=lambda t: window[0] <= t <= window[1], window=window)
    except CodecError as exc:
        raise RawEpisodeError(str(exc)) from None
    if src is not None:
        tb, all_pts = float(src.time_base), [p.pts for p in src.packets if p.pts is not None]
    else:
        assert indexed is not None
        tb, all_pts = float(indexed[0]), [p for p in indexed[1] if window[0] <= p * float(indexed[0]) <= window[1]]
    pts = sorted(all_pts)
    keep = [p for p in pts if t_from - EPS_S <= p * tb < t_to - EPS_S]
    if len(state_t):
        period = float(np.median(np.diff(state_t))) if len(state_t) > 1 else 0.0
        tol = max(EPS_S, 0.25 * period)
        last = [p for p in pts if abs(p * tb - t_to) < EPS_S]
        start = keep[0] * tb if keep else t_from
        if last and abs(last[0] * tb - start - float(state_t[-1])) <= tol:
            keep.append(last[0])  # to_timestamp given as the last frame's time: it is this episode's
    return EpisodeVideo(path, t_from, tuple(keep), tb, src)


def episode_packets(video: EpisodeVideo) -> SourceVideo:
    """The kept frames' packets as the file stores them (demuxed, not decoded, by the read that
    found the episode's frames), for a stream copy."""
    wanted = set(video.pts)
    src = video.source
    if src is None and not video.pts:
        src = demux_video(video.path)
    elif src is None:  # the times came from the sample table: the episode's packets, and only them
        lo, hi = video.pts[0] * video.time_base, video.pts[-1] * video.time_base
        src = video.source = demux_video(video.path, window=(lo - EPS_S, hi + EPS_S))
    return replace(src, packets=[p for p in src.packets if p.pts in wanted])


def decode(video: EpisodeVideo) -> Iterator[av.VideoFrame]:
    """The kept frames, decoded in order (yuv420p as decoded: the encoder takes it without an RGB
    round trip)."""
    if not video.pts:
        return
    wanted = set(video.pts)
    last = video.pts[-1]
    src = video.source
    decoder = decoder_for(src.codec) if src is not None and src.packets and src.packets[0].key else None
    if src is not None and decoder is not None and _has_decoder(decoder):
        yield from _decode_packets(src, decoder, wanted, last)
        return
    with open_input(video.path) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        if video.pts[0] > 0:
            c.seek(int(video.pts[0]), stream=s, backward=True, any_frame=False)
        for frame in c.decode(s):
            if frame.pts is None:
                continue
            if frame.pts in wanted:
                yield frame
            if frame.pts >= last:
                return


def _has_decoder(name: str) -> bool:
    """Whether this FFmpeg has a decoder of that name (else decode() reads the file with the one
    libavformat picks)."""
    try:
        av.codec.Codec(name, "r")
    except (av.error.FFmpegError, ValueError):
        return False
    return True


def _decode_packets(src: SourceVideo, decoder: str, wanted: set[int], last: int) -> Iterator[av.VideoFrame]:
    """decode() from packets already demuxed (from the window's first keyframe, in decode order)."""
    ctx = cast(VideoCodecContext, av.CodecContext.create(decoder, "r"))
    if src.extradata:
        ctx.extradata = src.extradata
    ctx.thread_type = "AUTO"
    for p in src.packets:
        pkt = av.Packet(p.data)
        pkt.pts, pkt.dts = p.pts, p.dts
        for frame in ctx.decode(pkt):
            if frame.pts in wanted:
                yield frame
            if frame.pts is not None and frame.pts >= last:
                return
    for frame in ctx.decode(None):
        if frame.pts in wanted:
            yield frame
