"""Stream copy or transcode: which cameras of an episode keep their source's bitstream.

A camera is copied (its packets stored as they are, robodata.container.EpisodeWriter.write_packets)
when, read from packet headers alone (robodata.codecs.bitstream, no decode):
- its codec is one the loader decodes (the registry in robodata.codecs);
- its packets are sound: each parses as its codec, the demuxer's keyframe flags agree with the
  bitstream, the decoder gets parameter sets (extradata, else in band on every keyframe), the
  episode opens on a keyframe, GOPs are closed (each decodes alone), pts are unique and the
  episode's packets are consecutive in the file;
- its coded size is the declared one and it has one packet per frame the episode keeps;
- `auto` only: its GOP / reorder structure costs a read no more than `max_cost_ratio` x the
  layout it would be transcoded to (robodata.ingest.copy_cost: the advisor's GOP model, frames
  decoded per read of the plan's pattern, priced in decode seconds with the plan's calibration),
  for each read pattern of a plan made for several (`LayoutPlan.patterns`, each with its own
  windows: their merged union is what the layout holds, not what any reader reads).
Cameras of one topic group share a codec and settings: a group is copied whole or not at all.
Every camera's decision and its reason go into the container (meta.extra["video"]) and so into
the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from robodata.codecs import video_codec
from robodata.codecs.bitstream import BitstreamError, Scanner
from robodata.codecs.demux import SourceVideo
from robodata.codecs.nal_check import NalStream
from robodata.codecs.video import Packet
from robodata.config import require
from robodata.container import EpisodeMeta, Layout, TopicGroup, VideoSettings
from robodata.container.calibration import Calibration
from robodata.dataset.pattern import StreamWindow
from robodata.errors import ConfigError
from robodata.ingest.copy_cost import decode_s_by_type, price

VIDEO_MODES = ("auto", "copy", "transcode")
ANNEXB_DECODE = ("sample", "all")
COPY_PRESET = "copy"  # VideoSettings.preset of a copied group: its bitstream is the source's


@dataclass(frozen=True)
class VideoCopyConfig:
    """How ingestion treats a source's video (`robodata ingest --video`, the Dagster resource)."""

    mode: str = "auto"  # auto | copy (whenever sound) | transcode (always, as before)
    # GOPs per copied camera decoded after the write (the first; then the last, evenly between): the
    # headers of every packet are checked anyway, a decode proves the stream and its extradata decode
    verify_gops: int = 1
    # Annex B H.264 / HEVC (MCAP CompressedVideo: no NAL sizes): "all" decodes every GOP, the one
    # check that sees a slice cut short inside its slice data (its copy then costs a decode of its
    # video); "sample" decodes verify_gops GOPs like any stream, every packet's NAL unit and slice
    # headers checked (robodata.codecs.nal_check), and stores such a packet unseen outside them
    annexb_decode: str = "all"
    # what was stored is checked against the source (count, pts, dts, keyframes, sizes, extradata):
    # False from the writer's record of what it wrote (the footer's checksums computed from the
    # bytes handed to the write); True by reading the container back, every packet's bytes compared
    # (also catches a corruption by the storage before the fsync; costs a read of the episode)
    verify_readback: bool = False
    max_cost_ratio: float = 1.1  # auto: the source's frames decoded per read over the layout's

    def __post_init__(self) -> None:
        require(self.mode in VIDEO_MODES, f"video mode must be one of {VIDEO_MODES}, got {self.mode!r}")
        require(
            self.annexb_decode in ANNEXB_DECODE,
            f"annexb_decode must be one of {ANNEXB_DECODE}, got {self.annexb_decode!r}",
        )
        require(0 <= self.verify_gops <= 1000, f"verify_gops must be in [0, 1000], got {self.verify_gops}")
        require(self.max_cost_ratio > 0, f"max_cost_ratio must be > 0, got {self.max_cost_ratio}")


class CopyRefused(Exception):
    """Why a camera cannot be copied (the message is the recorded reason)."""


@dataclass
class CameraCopy:
    """A camera's packets as the container stores them: pts = display frame index, decode order."""

    camera: str
    codec: str
    extradata: bytes
    packets: list[Packet]
    gop: int  # longest GOP, frames
    reorder: int  # frames a packet is decoded ahead of its display position (B-frames)
    keys: tuple[int, ...]  # display indices of the keyframes


@dataclass
class CopyPlan:
    layout: Layout
    decisions: dict[str, dict[str, str]]  # camera -> {"mode": copy | transcode, "reason": ...}
    copies: dict[str, CameraCopy]  # the copied cameras only


def inspect(camera: str, src: SourceVideo, frames: int, shape: tuple[int, ...]) -> CameraCopy:
    """The camera's packets, checked from their headers; CopyRefused naming what is wrong."""
    try:
        video_codec(src.codec)
    except ConfigError:
        raise CopyRefused(f"codec {src.codec!r} is not one the loader decodes") from None
    pk = src.packets
    if len(pk) != frames:
        raise CopyRefused(f"{len(pk)} packets for the episode's {frames} frames")
    if (src.height, src.width) != tuple(shape[:2]):
        raise CopyRefused(f"coded size {src.height}x{src.width}, declared {shape[0]}x{shape[1]}")
    if any(b.index != a.index + 1 for a, b in zip(pk, pk[1:], strict=False)):
        raise CopyRefused("the episode's packets are not consecutive in the file")
    pts = [p.pts for p in pk]
    if any(p is None for p in pts) or len(set(pts)) != len(pts):
        raise CopyRefused("packet pts missing or repeated")
    annexb = (b"\0\0\1", b"\0\0\0\1")
    if src.codec in ("h264", "hevc") and not src.extradata and pk and not pk[0].data.startswith(annexb):
        raise CopyRefused("the extradata is missing: length-prefixed packets need the avcC / hvcC record")
    try:
        scanner = Scanner(src.codec, src.extradata)
        nals = NalStream(src.codec, src.extradata, scanner.nal_size) if src.codec in ("h264", "hevc") else None
    except BitstreamError as exc:
        raise CopyRefused(f"the extradata does not parse as {src.codec}: {exc}") from None
    keys, refs = [], []
    for k, p in enumerate(pk):
        try:
            # H.264 / HEVC: every NAL unit's and slice's headers, what an undecoded GOP is held to
            scan = nals.check(p.data) if nals is not None else scanner.scan(p.data)
        except BitstreamError as exc:
            raise CopyRefused(f"packet {k} (pts {p.pts}): {exc}") from None
        if scan.key != p.key:
            raise CopyRefused(f"packet {k} (pts {p.pts}) is flagged key={p.key}, its bitstream says key={scan.key}")
        if scan.open_gop:
            raise CopyRefused(f"packet {k} (pts {p.pts}): open GOP (leading pictures reference the GOP before)")
        if scan.key and not (scan.params or scanner.extradata_params):
            raise CopyRefused(f"keyframe packet {k} carries no parameter sets and the extradata has none")
        keys.append(scan.key)
        refs.append(scan.ref)
    if not keys[0]:
        raise CopyRefused("the episode does not open on a keyframe")
    order = np.argsort(np.asarray(pts, np.int64), kind="stable")
    display = np.empty(len(pk), np.int64)
    display[order] = np.arange(len(pk))  # decode position -> display index
    if src.codec == "av1" and np.any(display != np.arange(len(pk))):
        raise CopyRefused("pts out of order: an AV1 stream shows its packets in decode order")
    starts = [k for k, key in enumerate(keys) if key] + [len(pk)]
    # closed GOPs: each GOP's display indices (distinct) run from its keyframe's over as many frames
    lo, hi = np.minimum.reduceat(display, starts[:-1]), np.maximum.reduceat(display, starts[:-1])
    bad = np.flatnonzero((lo != display[starts[:-1]]) | (hi - lo != np.diff(starts) - 1))
    if len(bad):
        raise CopyRefused(f"the GOP at packet {starts[bad[0]]} is not closed (its frames reach into another GOP)")
    key_display = tuple(int(display[k]) for k in starts[:-1])
    gop = max(b - a for a, b in zip(starts, starts[1:], strict=False))
    reorder = int(max(0, int((display - np.arange(len(pk))).max())))
    delay = int(max(0, int((np.arange(len(pk)) - display).max())))
    packets = [Packet(int(display[k]), k - delay, keys[k], p.data, refs[k]) for k, p in enumerate(pk)]
    return CameraCopy(camera, src.codec, src.extradata, packets, gop, reorder, key_display)


def _copied_settings(copies: list[CameraCopy], target: VideoSettings) -> VideoSettings:
    gop = max(c.gop for c in copies)
    bf = max(c.reorder for c in copies)
    if gop > 1000 or bf > 8:
        raise CopyRefused(f"GOP of {gop} frames / reorder depth {bf} is more than a layout holds")
    return VideoSettings(copies[0].codec, gop, 0, COPY_PRESET, bf, target.threads)


def _gate(
    g: TopicGroup,
    copies: list[CameraCopy],
    target: VideoSettings,
    meta: EpisodeMeta,
    patterns: dict[str, list[StreamWindow]],
    ratio: float,
    cal: Calibration | None,
) -> tuple[bool, str]:
    """(whether the copy reads within `ratio` of the layout for every read pattern, why), as
    robodata.ingest.copy_cost prices it; `patterns`: each pattern's windows (one entry, named "",
    for a plan of one pattern or none)."""
    settings = _copied_settings(copies, target)
    frames = max(len(c.packets) for c in copies)
    source_s = {c.camera: decode_s_by_type(c.codec, c.extradata, c.packets) for c in copies} if cal else None
    priced = {name: price(g, settings, target, meta, frames, ws, source_s, cal) for name, ws in patterns.items()}
    dear = [name for name, p in priced.items() if p.copy > ratio * p.layout]
    layout = f"the layout's gop {target.gop}/b{target.bframes}"
    figures = {n: f"{p.copy:.1f} {p.unit} decoded per read ({layout} {p.layout:.1f})" for n, p in priced.items()}
    what = f"gop {settings.gop}/reorder {settings.bframes}: " + "; ".join(
        f"{n}: {f}" if n else f for n, f in figures.items()
    )
    if not dear:
        return True, what
    over = f", over {ratio:g}x for {', '.join(dear)}" if any(dear) else ""
    return False, f"{what}{over}: transcoded to it"


def plan_copy(
    meta: EpisodeMeta,
    layout: Layout,
    sources: dict[str, SourceVideo | Exception],
    frames: dict[str, int],
    cfg: VideoCopyConfig,
    patterns: dict[str, list[StreamWindow]] | None = None,
    calibration: Calibration | None = None,
) -> CopyPlan:
    """Which camera groups of `layout` keep their source bitstream; `sources`: each camera's
    demuxed packets for the episode, or why there are none; `frames`: each camera's frame count;
    `patterns`: the video windows of each read pattern the layout serves (`auto` prices each).
    The returned layout holds the copied groups' settings (codec, GOP, reorder of the source;
    preset "copy")."""
    decisions: dict[str, dict[str, str]] = {}
    copies: dict[str, CameraCopy] = {}
    groups = []
    for g in layout.groups:
        if g.video is None:
            groups.append(g)
            continue
        why: dict[str, str] = {}
        found: dict[str, CameraCopy] = {}
        for cam in g.streams:
            src = sources.get(cam)
            if cfg.mode == "transcode":
                why[cam] = "--video transcode"
            elif src is None or isinstance(src, Exception):
                why[cam] = f"no source bitstream ({src})" if src is not None else "the importer keeps no bitstream"
            else:
                spec = meta.streams[cam]
                try:
                    found[cam] = inspect(cam, src, frames[cam], spec.shape)
                except CopyRefused as exc:
                    why[cam] = str(exc)
        settings: VideoSettings | None = None
        if not why:
            cs = list(found.values())
            try:
                if len({c.codec for c in cs}) > 1:
                    raise CopyRefused(f"the group's cameras differ in codec ({sorted({c.codec for c in cs})})")
                settings = _copied_settings(cs, g.video)
                cheap, gate = _gate(g, cs, g.video, meta, patterns or {"": []}, cfg.max_cost_ratio, calibration)
                if cfg.mode == "auto" and not cheap:
                    raise CopyRefused(gate)
                for cam in g.streams:
                    decisions[cam] = {"mode": "copy", "reason": f"{cs[0].codec} {gate}"}
                copies.update(found)
            except CopyRefused as exc:
                why = {cam: str(exc) for cam in g.streams}
                settings = None
        if settings is None:
            for cam in g.streams:
                own = why.get(cam)
                reason = own or "its group transcodes: " + "; ".join(f"{c}: {r}" for c, r in why.items())
                decisions[cam] = {"mode": "transcode", "reason": reason}
            groups.append(g)
        else:
            groups.append(TopicGroup(g.name, g.streams, g.chunk_span_s, settings))
    return CopyPlan(Layout(groups=tuple(groups)), decisions, copies)
