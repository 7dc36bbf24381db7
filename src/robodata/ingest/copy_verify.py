"""Verification of a written stream copy, without decoding it whole.

Two halves, both required before a copy is kept:
- what was stored, for each copied camera against what the copy meant to store: the packet count,
  every pts and dts, the keyframe positions, every packet's size, the extradata. By default
  (`check_written`) from the writer's record of the packets it put into its chunks, whose bytes
  the footer's part and chunk checksums are computed from as they are handed to the write (a
  reader checks them): no read-back, so a corruption by the storage between the write and the
  fsync is not caught here. `VideoCopyConfig.verify_readback` (`check_stored`) reads the
  container back instead (footer and packet tables, no decode) and compares every packet's bytes
  too.
- `decode_sample`: a decode of `gops` GOPs (first, last, evenly between) of those same packets
  with that extradata proves the stream decodes, without an error the decoder would conceal
  (FFmpeg's err_detect=explode), to frames of the declared size, shown in pts order. Every
  packet's headers were read before the write (robodata.ingest.video_copy.inspect; H.264 / HEVC:
  every NAL unit and slice header, robodata.codecs.nal_check), so an undecoded GOP is held to
  those. What only a decode sees: a packet cut short inside its slice data where nothing gives its
  size (Annex B H.264 / HEVC: MCAP CompressedVideo; a length prefix or an OBU size betrays it
  elsewhere), or bytes changed inside slice data; `annexb_decode="all"` (the default) decodes every
  GOP of an Annex B camera for that (its copy then costs a decode of its video, less its loop
  filters: `DECODER_OPTIONS`, one decoder a camera emptied between GOPs). Once the first half has
  found the stored packets and extradata equal to these, the stored stream decodes to the same
  frames (a decoder is a function of its input), so the decode may run while the container is
  being written (robodata.ingest.convert runs it in a thread; libavcodec releases the GIL)
  instead of after it.
A camera that fails either is named with the reason; the conversion then transcodes its group
and records the finding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import av
import numpy as np
import pyarrow as pa
from av.video.codeccontext import VideoCodecContext

from robodata.codecs import video_codec
from robodata.codecs.bitstream import nal_length_size
from robodata.codecs.video import Packet
from robodata.container import EpisodeReader
from robodata.container.stored import stored_packets
from robodata.ingest.video_copy import CameraCopy


def sample_gops(n: int, k: int) -> list[int]:
    """k GOP indices of n: the first, the last and evenly between (all of them when k >= n)."""
    if k <= 0 or n == 0:
        return []
    return sorted({int(round(x)) for x in np.linspace(0, n - 1, num=min(k, n))})


def verify_copy(path: str, copies: dict[str, CameraCopy], gops: int, annexb_all: bool = False) -> dict[str, str]:
    """{camera: why its stored stream is not its source's} (empty: every copy verified): both
    halves in turn, the frame sizes those `path` declares."""
    reader = EpisodeReader.open(path)
    sizes = {c: frame_size(reader.meta.streams[c].shape) for c in copies}
    reader.close()
    failed = decode_sample(copies, sizes, gops, annexb_all)
    for cam, why in check_stored(path, copies).items():
        failed.setdefault(cam, why)
    return failed


def frame_size(shape: tuple[int, ...]) -> tuple[int, int]:
    return int(shape[0]), int(shape[1])


def decode_sample(
    copies: dict[str, CameraCopy], sizes: dict[str, tuple[int, int]], gops: int, annexb_all: bool = False
) -> dict[str, str]:
    """{camera: why a sampled GOP of its packets does not decode}; `sizes`: each camera's (H, W).
    `annexb_all`: every GOP of an unframed (Annex B) camera, whose packets have no sizes (a packet
    cut short inside its slice data shows only in its decode). One decoder a camera, emptied
    between GOPs (`_decoder`)."""
    failed: dict[str, str] = {}
    for cam, c in copies.items():
        starts = [i for i, p in enumerate(c.packets) if p.key] + [len(c.packets)]
        n = len(starts) - 1
        ctx: VideoCodecContext | None = None
        for g in range(n) if annexb_all and unframed(c) else sample_gops(n, gops):
            try:
                ctx = ctx or _decoder(c)
            except Exception as exc:  # libavcodec refused the codec or its extradata
                failed[cam] = f"GOP {g} does not decode at the decoder's opening: {type(exc).__name__}: {exc}"
                break
            why = _decode_gop(ctx, c, starts[g], starts[g + 1], sizes[cam])
            if why:
                failed[cam] = f"GOP {g} (packets {starts[g]}..{starts[g + 1] - 1}) {why}"
                break
    return failed


def unframed(c: CameraCopy) -> bool:
    """Whether the camera's packets carry no NAL sizes (Annex B H.264 / HEVC): a packet cut short
    inside its slice data still parses, and only a decode of its GOP catches it."""
    return c.codec in ("h264", "hevc") and nal_length_size(c.codec, c.extradata) == 0


# What the verification decoder skips: the in-loop filters (H.264 / HEVC deblocking, HEVC SAO;
# skip_loop_filter is an AVCodecContext field every decoder may honour), which smooth the
# reconstructed pixels after their macroblocks / CTUs are parsed and predicted: their parameters
# are still parsed and range-checked (slice header, SAO syntax), and nothing the filter does can
# fail. About a sixth of an H.264 decode (docs/ingestion.md). err_detect=explode: an error the
# decoder would conceal fails the copy.
DECODER_OPTIONS = {"err_detect": "explode", "skip_loop_filter": "all"}


def _decoder(c: CameraCopy) -> VideoCodecContext:
    """The camera's verification decoder: one thread, `DECODER_OPTIONS`, the copy's extradata.
    Each GOP is decoded from an emptied decoder (drained, then avcodec_flush_buffers: no reference
    picture, no pending output, as a reader's decoder opened at that keyframe), so a GOP that needs
    another's pictures fails as it would alone. What a flush keeps, parameter sets sent in band by
    an earlier GOP, no GOP may rely on: inspect (robodata.codecs.nal_check) refused a keyframe that
    does not carry its own or use the extradata's. Reusing it saves a decoder's opening per GOP."""
    ctx = cast(VideoCodecContext, av.CodecContext.create(video_codec(c.codec).decoder, "r"))
    if c.extradata:
        ctx.extradata = c.extradata
    ctx.thread_count = 1
    ctx.options = dict(DECODER_OPTIONS)
    return ctx


def _decode_gop(ctx: VideoCodecContext, c: CameraCopy, a: int, b: int, size: tuple[int, int]) -> str:
    """Why packets a..b-1 (one GOP) do not decode to frames of `size` in pts order ("": they do),
    `ctx` (`_decoder`) drained and emptied after. The frames are decoded (the decoder's own work,
    bar its loop filters) but never converted to RGB."""
    wanted = [p.pts for p in c.packets[a:b]]
    shown: list[int] = []
    at = "the decoder's opening"
    try:
        frames = []
        for k, p in enumerate(c.packets[a:b], a):
            at = f"packet {k} (pts {p.pts})"
            pkt = av.Packet(p.data)
            pkt.pts, pkt.dts = p.pts, p.dts
            frames += ctx.decode(pkt)
        at = "the decoder's flush"
        frames += ctx.decode(None)
        ctx.flush_buffers()
    except Exception as exc:  # libavcodec refused the stream: it does not decode
        return f"does not decode at {at}: {type(exc).__name__}: {exc}"
    for f in frames:
        if (f.height, f.width) != size:
            return f"decodes to {f.height}x{f.width} frames, the stream declares {size[0]}x{size[1]}"
        if f.pts is None:
            return "the decoder shows a picture without its pts"
        shown.append(f.pts)
    if sorted(shown) != sorted(wanted):
        return f"decoded {len(set(shown) & set(wanted))} of {len(wanted)} frames"
    if shown != sorted(shown):  # the decoder shows pictures in their own order, each with its pts
        return "the decoder shows its pictures in another order than their pts"
    return ""


def check_written(stored: dict[str, tuple[list[Packet], bytes]], copies: dict[str, CameraCopy]) -> dict[str, str]:
    """{camera: why the packets the writer put into its chunks or its extradata (`stored`,
    EpisodeWriter.copied) are not the copy's}: count, pts, dts, keyframe positions, sizes."""
    failed: dict[str, str] = {}
    for cam, c in copies.items():
        got, extradata = stored.get(cam, ([], b""))
        why = _mismatch(c, [p.pts for p in got], [p.dts for p in got], tuple(p.pts for p in got if p.key))
        if not why:
            sizes = [i for i, (a, b) in enumerate(zip(got, c.packets, strict=True)) if len(a.data) != len(b.data)]
            why = f"stored packet {sizes[0]} differs from the source's size" if sizes else ""
        if not why and extradata != c.extradata:
            why = "stored extradata differs from the source's"
        if why:
            failed[cam] = why
    return failed


def _mismatch(c: CameraCopy, pts: Sequence[int], dts: Sequence[int], keys: tuple[int, ...]) -> str:
    """Why stored packets' count, pts, dts and keyframe positions are not the copy's ("" when equal)."""
    if len(pts) != len(c.packets):
        return f"stored {len(pts)} packets, the source has {len(c.packets)}"
    if list(pts) != [p.pts for p in c.packets]:
        return "stored pts differ from the source's"
    if list(dts) != [p.dts for p in c.packets]:
        return "stored dts differ from the copy's decode order"
    if keys != c.keys:
        return "stored keyframe positions differ from the source's"
    return ""


def check_stored(path: str, copies: dict[str, CameraCopy]) -> dict[str, str]:
    """{camera: why the packets stored in `path` are not the copy's} (read back, not decoded)."""
    failed: dict[str, str] = {}
    reader = EpisodeReader.open(path)
    try:
        for cam, c in copies.items():
            why = _check_one(reader, cam, c)
            if why:
                failed[cam] = why
    finally:
        reader.close()
    return failed


def _check_one(reader: EpisodeReader, cam: str, c: CameraCopy) -> str:
    t = stored_packets(reader, cam)
    if not t.num_rows:
        return f"stored 0 packets, the source has {len(c.packets)}"
    pts = t.column("pts").to_numpy()
    key = t.column("key").to_numpy(zero_copy_only=False)
    why = _mismatch(c, pts.tolist(), t.column("dts").to_pylist(), tuple(int(x) for x in pts[key]))
    if why:
        return why
    data = t.column("data").combine_chunks()
    if not data.equals(pa.array([p.data for p in c.packets], pa.binary())):
        stored = data.to_pylist()
        bad = next(i for i, (a, p) in enumerate(zip(stored, c.packets, strict=True)) if a != p.data)
        return f"stored packet {bad} differs from the source's bytes"
    if reader.codec_extradata(cam) != c.extradata:
        return "stored extradata differs from the source's"
    return ""
