"""Conversion: a raw episode plus its alignment -> one container, written atomically."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from robodata.container import EpisodeMeta, EpisodeWriter, Layout, StreamSpec, TopicGroup
from robodata.container.meta import VideoSettings, default_layout
from robodata.errors import RobodataError
from robodata.ingest.align import AlignedTracks
from robodata.ingest.copy_verify import check_stored, check_written, decode_sample, frame_size, unframed
from robodata.ingest.raw import RawEpisode, RawEpisodeError
from robodata.ingest.video_choice import transcode_failed, video_plan
from robodata.ingest.video_copy import CopyPlan, VideoCopyConfig
from robodata.storage.objects import fsync_path

if TYPE_CHECKING:
    from robodata.container.plan import LayoutPlan


@dataclass
class Converted:
    episode_id: str
    uri: str
    size_bytes: int
    duration_s: float
    frames: dict[str, int]
    state_steps: int
    layout_version: str
    footer_offset: int
    footer_length: int
    seconds: float
    video: dict[str, dict[str, str]] = field(default_factory=dict)  # camera -> {"mode", "reason"} (video_copy)


def stored_rate(al: AlignedTracks, stream: str, declared: float) -> float:
    """The rate a stream is stored at: alignment's (declared, or measured where it replaced the declared
    one), the measured one where that is not a rate; never 0 for a stream with a measurable rate."""
    t = al.timing.get(stream)
    if t is None:
        return declared
    return t.nominal_hz if t.nominal_hz > 0 else t.measured_hz


def episode_meta(raw: RawEpisode, al: AlignedTracks) -> EpisodeMeta:
    streams = {
        c: StreamSpec(c, "video", stored_rate(al, c, cam.fps), (cam.height, cam.width, 3))
        for c, cam in raw.cameras.items()
    }
    for s, a in raw.arrays.items():
        rate = stored_rate(al, s, a.rate_hz)
        dtype = "float64" if a.values.dtype == np.float64 else "float32"  # float64: values float32 would change
        streams[s] = StreamSpec(s, "array", rate, (a.values.shape[1],), dtype, a.units, a.names)
    if raw.events:
        streams["events"] = StreamSpec("events", "events")
    extra = {"source": raw.source, "raw_uri": raw.uri, "alignment_error_ms": round(al.alignment_error_ms, 4)}
    if raw.success is not None:
        extra["success"] = bool(raw.success)
    for k in ("robot_type", "source_dataset", "language"):
        if getattr(raw, k):
            extra[k] = getattr(raw, k)
    roles: dict = raw.stream_roles()
    if cams := {c: r for c, r in raw.camera_roles.items() if c in raw.cameras and r}:
        roles["cameras"] = cams  # {camera: role}: robodata.container.roles reads it for the catalog
    if roles:
        extra["roles"] = roles  # {"state": stream, "action": stream}: the catalog's and exporters' source
    if raw.rate_unknown:
        extra["rate_unknown"] = True  # steps on a nominal grid: no source gave the control rate
    return EpisodeMeta(
        raw.episode_id, raw.robot, raw.site, raw.task, raw.epoch_ns + al.t0_ns, streams, vendor=raw.vendor, extra=extra
    )


def layout_for(raw: RawEpisode, video: VideoSettings | None = None) -> Layout:
    return default_layout(
        tuple(raw.cameras), proprio=tuple(raw.arrays), events=("events",) if raw.events else (), video=video
    )


def planned_layout(plan: LayoutPlan, meta: EpisodeMeta, video: VideoSettings | None = None) -> Layout:
    """The plan's layout for this episode's streams; `video.threads` (how many encoder threads,
    not part of the layout's identity) carries over to the plan's camera groups."""
    layout = plan.layout_for(meta)
    if video is None:
        return layout
    return Layout(
        groups=tuple(
            TopicGroup(g.name, g.streams, g.chunk_span_s, replace(g.video, threads=video.threads) if g.video else None)
            for g in layout.groups
        )
    )


def convert(
    raw: RawEpisode,
    al: AlignedTracks,
    out_path: str | os.PathLike[str],
    video: VideoSettings | None = None,
    plan: LayoutPlan | None = None,
    copy: VideoCopyConfig | None = None,
) -> Converted:
    """Decode, align and encode into out_path (via `.partial` + rename: never a half container).

    With a `plan` (robodata.container.plan.LayoutPlan) the episode is written in the plan's layout
    (one encode from the source, no relayout later); otherwise in the ingestion default with `video`.
    Cameras whose source bitstream fits (robodata.ingest.video_copy, `copy`: auto by default) are
    stored as they are, verified after the write (robodata.ingest.copy_verify); a camera whose
    copy fails verification is transcoded with its group, the finding recorded as its reason."""
    if raw.frames is None:
        raise RawEpisodeError(f"{raw.uri}: importer gave no frame source")
    started = time.perf_counter()
    cfg = copy or VideoCopyConfig()
    meta = episode_meta(raw, al)
    layout = planned_layout(plan, meta, video) if plan is not None else layout_for(raw, video)
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".partial")
    chosen = video_plan(raw, meta, layout, cfg, plan)
    written = None
    if chosen.copies:
        chosen, written = _write_copy(raw, al, tmp, meta, chosen, layout, cfg)
    if written is None:
        written = _write(raw, al, tmp, meta, chosen)
        fsync_path(str(tmp))
    counts, facts = written[:2]
    os.replace(tmp, out)
    steps = max((len(a.t_ns) for a in raw.arrays.values()), default=0)
    return Converted(
        raw.episode_id,
        str(out),
        out.stat().st_size,
        facts.duration_s,
        counts,
        steps,
        facts.layout_version,
        facts.footer_offset,
        facts.footer_length,
        time.perf_counter() - started,
        chosen.decisions,
    )


_HELPERS: tuple[int, ThreadPoolExecutor, ThreadPoolExecutor] | None = None


def _helpers() -> tuple[ThreadPoolExecutor, ThreadPoolExecutor]:
    """(decoders, syncer), kept from episode to episode (starting a thread waits for the scheduler:
    milliseconds on a busy machine); a forked process makes its own. decoders: a copy's verification
    decodes, one task a camera decoded whole (libavcodec releases the GIL: cameras decode on as many
    cores, at most 4); syncer: the read-back's fsync, never queued behind a decode."""
    global _HELPERS
    if _HELPERS is None or _HELPERS[0] != os.getpid():
        n = max(2, min(4, os.cpu_count() or 2))
        _HELPERS = (
            os.getpid(),
            ThreadPoolExecutor(n, thread_name_prefix="stream-copy-decode"),
            ThreadPoolExecutor(1, thread_name_prefix="stream-copy-fsync"),
        )
    return _HELPERS[1], _HELPERS[2]


def _write_copy(
    raw: RawEpisode,
    al: AlignedTracks,
    tmp: Path,
    meta: EpisodeMeta,
    chosen: CopyPlan,
    layout: Layout,
    cfg: VideoCopyConfig,
) -> tuple[CopyPlan, tuple | None]:
    """The episode with its copied cameras written to `tmp` and verified (robodata.ingest.copy_verify):
    (the plan, what `_write` returned), or, when a copy failed, (the plan transcoding its group, None).
    The verification decodes, one a camera, run while the container is written and fsync'ed; with
    verify_readback the fsync runs while the container is read back."""
    sizes = {c: frame_size(meta.streams[c].shape) for c in chosen.copies}
    pool, syncer = _helpers()
    every = cfg.annexb_decode == "all"
    # a camera decoded whole (Annex B) is a task of its own, the sampled rest one task: a GOP or two
    # a camera decode in less time than a thread's wake-up costs the write beside them
    whole = [{c: cc} for c, cc in chosen.copies.items() if every and unframed(cc)]
    rest = {c: cc for c, cc in chosen.copies.items() if not (every and unframed(cc))}
    decoded = [pool.submit(decode_sample, t, sizes, cfg.verify_gops, every) for t in whole + ([rest] if rest else [])]
    written: tuple | None = None
    try:
        written = _write(raw, al, tmp, meta, chosen)
        if cfg.verify_readback:  # the read-back beside the fsync
            synced = syncer.submit(fsync_path, str(tmp))
            failed = check_stored(str(tmp), chosen.copies)
            synced.result()
        else:  # the writer's record, checked in a fraction of a millisecond: the fsync here (no thread's wake-up)
            failed = check_written(written[2], chosen.copies)
            fsync_path(str(tmp))
    except RobodataError as exc:  # the writer refused a copied stream's packets
        failed = {c: f"the write refused it: {exc}" for c in chosen.copies}
    failed = {k: v for d in decoded for k, v in d.result().items()} | failed
    if failed:
        return transcode_failed(chosen, layout, failed), None
    return chosen, written


def _write(raw: RawEpisode, al: AlignedTracks, tmp: Path, meta: EpisodeMeta, chosen: CopyPlan) -> tuple:
    """One write of the container to `tmp` (not yet fsync'ed): copied cameras' packets, the others'
    frames encoded; (frame counts, the writer's facts, {copied camera: (the packets it stored, its
    extradata)})."""
    assert raw.frames is not None
    meta.extra.pop("video", None)
    if chosen.decisions:
        meta.extra["video"] = chosen.decisions  # per camera: copy | transcode, and why
    cam_t = {c: al.times(c, cam.t_ns) for c, cam in raw.cameras.items()}
    counts = {c: 0 for c in raw.cameras}
    try:
        with open(tmp, "wb") as f, EpisodeWriter(f, meta, chosen.layout) as w:
            for cam, cc in chosen.copies.items():
                pts = np.fromiter((p.pts for p in cc.packets), np.int64, len(cc.packets))
                w.write_packets(cam, cc.packets, cam_t[cam][pts], cc.extradata)
                counts[cam] = len(cc.packets)
            frames = raw.frames(skip=set(chosen.copies)) if chosen.copies else raw.frames()
            for cam, i, rgb in frames:
                w.write_frame(cam, rgb, int(cam_t[cam][i]))
                counts[cam] += 1
            for s, a in raw.arrays.items():
                t = al.times(s, a.t_ns)
                order = np.argsort(t, kind="stable")
                w.write_array(s, t[order], a.values[order])
            if raw.events:
                t = al.times("events", raw.events_t)
                order = np.argsort(t, kind="stable")
                w.write_events("events", t[order], [raw.events[k] for k in order])
    except RawEpisodeError:
        tmp.unlink(missing_ok=True)
        raise
    except RobodataError as exc:  # writer refused the data (e.g. non-increasing frame times)
        tmp.unlink(missing_ok=True)
        raise RawEpisodeError(f"{raw.uri}: {exc}") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    short = {c: (counts[c], len(cam.t_ns)) for c, cam in raw.cameras.items() if counts[c] != len(cam.t_ns)}
    if short:
        tmp.unlink(missing_ok=True)
        raise RawEpisodeError(f"{raw.uri}: frame source ended early (written, expected): {short}")
    facts = w.written  # what the writer wrote: the container is not reopened
    assert facts is not None
    return counts, facts, {c: w.copied(c) for c in chosen.copies}
