"""A source file's compressed video packets, demuxed with PyAV and never decoded.

What a stream copy starts from: the codec (by robodata's registry name where it has one),
the decoder's extradata (avcC / hvcC / av1C as the file stores it), the coded size, and each
packet's pts, dts, the demuxer's keyframe flag and its bytes, in decode (file) order.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import av
from av.container import InputContainer
from av.video.stream import VideoStream

from robodata.codecs.head_cache import HeadCachedFile
from robodata.errors import CodecError

# PyAV names a stream's codec by the decoder FFmpeg picked for it; robodata's registry by codec.
_CODEC_OF_DECODER = {"h264": "h264", "hevc": "hevc", "libdav1d": "av1", "av1": "av1", "libaom-av1": "av1"}


@dataclass(frozen=True)
class SourcePacket:
    pts: int | None
    dts: int | None
    key: bool  # the demuxer's flag (a container's claim: verified against the bitstream)
    data: bytes
    index: int = 0  # position in the file's decode order (kept packets of one episode are consecutive)


@dataclass
class SourceVideo:
    """One video stream of a source, packets in decode order."""

    codec: str  # registry name (h264 | hevc | av1) or the decoder's own name (e.g. mpeg4)
    extradata: bytes
    width: int
    height: int
    time_base: Fraction
    packets: list[SourcePacket] = field(default_factory=list)
    origin: str = ""  # the file, for messages


def codec_name(decoder: str) -> str:
    return _CODEC_OF_DECODER.get(decoder, decoder)


# libavformat's read size (its default 32 KiB makes every open read ~65 KiB: the file's head and,
# with the index at the end, its tail; through a file object it reads in these steps instead)
AVIO_BUFFER = 4096


@contextmanager
def open_input(path: str | Path) -> Iterator[InputContainer]:
    """`av.open` of a local file, reading in AVIO_BUFFER steps (an open of a 2 MB LeRobot mp4 read
    67 KB before its first packet, 23 KB so); a second open of the same file in this process
    reads none of its header again (robodata.codecs.head_cache)."""
    with HeadCachedFile(path) as f, av.open(f, "r", buffer_size=AVIO_BUFFER) as c:
        f.opened()
        yield c


# how far before a window's start a stream with B-frames is entered when the keyframe a seek by
# decode time finds is shown after the start: a frame shown at the start may be decoded before it
REORDER_MARGIN_S = 0.5
# frames less than this apart are one instant (no source records above 1 kHz): a keyframe shown
# at a window's start, give or take its tolerance, is where the window is entered
SAME_INSTANT_S = 1e-3


def _entered(c: InputContainer, s: VideoStream, tb: float, start: float) -> Iterator[av.Packet]:
    """The stream's packets (empty ones dropped) in decode order from the keyframe a window
    starting at `start` s needs: the last keyframe shown at or before it. A seek finds keyframes
    by decode time; when the one found is shown after the start (B-frames, a window inside a
    GOP), frames shown at the start may be decoded before it, and the stream is entered
    REORDER_MARGIN_S earlier instead. A keyframe at the start itself (a LeRobot v3.0 file's
    episode, encoded on its own and concatenated) is entered there, not a GOP earlier."""
    if start <= 0:
        return (q for q in c.demux(s) if q.size)
    at = start + SAME_INSTANT_S
    c.seek(int(at / tb), stream=s, backward=True, any_frame=False)
    found = (q for q in c.demux(s) if q.size)
    first = next(found, None)
    if first is None or (first.is_keyframe and first.pts is not None and first.pts * tb <= at):
        return itertools.chain([first] if first is not None else [], found)
    c.seek(int(max(0.0, start - REORDER_MARGIN_S) / tb), stream=s, backward=True, any_frame=False)
    return (q for q in c.demux(s) if q.size)


@contextmanager
def _first_video(path: str | Path) -> Iterator[tuple[InputContainer, VideoStream]]:
    """The file opened (open_input) and its first video stream; CodecError when the file does not
    open, has no video stream or fails while read inside the block."""
    try:
        with open_input(path) as c:
            if not c.streams.video:
                raise CodecError(f"{path}: no video stream")
            yield c, c.streams.video[0]
    except CodecError:
        raise
    except (av.error.FFmpegError, OSError, ValueError) as exc:
        raise CodecError(f"{path}: unreadable video ({type(exc).__name__}: {exc})") from None


def demux_video(
    path: str | Path, keep_s: Callable[[float], bool] | None = None, window: tuple[float, float] | None = None
) -> SourceVideo:
    """The first video stream of `path`; with `keep_s`, only packets with a pts whose time in
    seconds (pts x time base) it accepts. With `window` (seconds), the demuxer enters the file at
    the keyframe at or before its start and stops at the first packet decoded after its end, so
    the packets of other episodes in the same file (LeRobot v3.0) are not read; without it, the
    whole file is read (what a byte copy reads too).

    Raises:
        CodecError: the file does not open or has no video stream.
    """
    with _first_video(path) as (c, s):
        cc = s.codec_context
        out = SourceVideo(
            codec_name(cc.name),
            bytes(cc.extradata or b""),
            int(cc.width),
            int(cc.height),
            Fraction(s.time_base) if s.time_base is not None else Fraction(1, 1),
            origin=str(path),
        )
        tb = float(out.time_base)
        kept = out.packets
        packets = _entered(c, s, tb, window[0]) if window is not None else (q for q in c.demux(s) if q.size)
        last = _last_dts(c, s, tb, window[1]) if window is not None else None
        for i, p in enumerate(packets):
            if window is not None and p.dts is not None and p.dts * tb > window[1]:
                break  # decode order: every packet shown inside the window is decoded before it
            pts = p.pts
            if keep_s is None or (pts is not None and keep_s(pts * tb)):
                kept.append(SourcePacket(pts, p.dts, p.is_keyframe, bytes(p), i))
            if last is not None and p.dts == last:
                break  # the window's last packet, known from the index: the next one is not read
        return out


def _last_dts(c: InputContainer, s: VideoStream, tb: float, end: float) -> int | None:
    """The decode time of the last packet decoded at or before `end` s, from an MP4's complete
    sample index (its timestamps are the packets' dts), so that a window's demux stops on it
    instead of reading the packet after it (a LeRobot v3.0 file: the next episode's keyframe).
    None where the index cannot say (another container, an index short of the stream's frames,
    decode times not increasing there)."""
    if "mp4" not in c.format.name or not math.isfinite(end):
        return None
    entries = s.index_entries
    n = len(entries)
    if n == 0 or n != s.frames:
        return None
    k = entries.search_timestamp(int(end / tb), backward=True, any_frame=True)
    if k < 0 or entries[k].timestamp * tb > end:
        return None
    if (k > 0 and entries[k - 1].timestamp >= entries[k].timestamp) or (
        k + 1 < n and entries[k + 1].timestamp * tb <= end
    ):
        return None
    return int(entries[k].timestamp)


def index_pts(path: str | Path) -> tuple[Fraction, list[int]] | None:
    """The presentation times of every sample of the first video stream of an MP4 / MOV, from its
    sample table alone (the demuxer's index, built from the `moov` box: no packet is read), or None
    when that index cannot stand for them: a stream with B-frames (the index holds decode times),
    another container, a fragmented file (samples indexed as fragments are read) or an index whose
    sample count differs from the header's. The caller then demuxes.

    Raises:
        CodecError: the file does not open or has no video stream.
    """
    with _first_video(path) as (c, s):
        if "mp4" not in c.format.name or s.codec_context.has_b_frames or s.time_base is None:
            return None
        entries = [e for e in s.index_entries if e.size > 0]
        if not entries or len(entries) != s.frames:
            return None
        return Fraction(s.time_base), [int(e.timestamp) for e in entries]
