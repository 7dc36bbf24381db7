"""An episode's video plan: its cameras' source bitstreams gathered and judged (robodata.ingest.video_copy),
and the fallback when a written copy fails verification."""

from __future__ import annotations

from typing import TYPE_CHECKING

from robodata.codecs.demux import SourceVideo
from robodata.container import EpisodeMeta, Layout
from robodata.container.calibration import Calibration
from robodata.dataset.pattern import ReadPattern, StreamWindow
from robodata.errors import RobodataError
from robodata.ingest.raw import RawEpisode
from robodata.ingest.video_copy import CopyPlan, VideoCopyConfig, plan_copy

if TYPE_CHECKING:
    from robodata.container.plan import LayoutPlan


def video_plan(
    raw: RawEpisode, meta: EpisodeMeta, layout: Layout, cfg: VideoCopyConfig, plan: LayoutPlan | None
) -> CopyPlan:
    """Which cameras are copied. No cameras, or an importer that keeps no bitstream and mode
    `auto`: nothing is decided (no record), as before stream copy existed."""
    if not raw.cameras or (raw.video_sources is None and cfg.mode == "auto"):
        return CopyPlan(layout, {}, {})
    sources: dict[str, SourceVideo | Exception] = {}
    if raw.video_sources is not None and cfg.mode != "transcode":
        for cam in raw.cameras:
            try:
                sources[cam] = raw.video_sources(cam)
            except RobodataError as exc:
                sources[cam] = exc
    patterns = read_windows(plan)
    cal = Calibration.from_dict(plan.calibration) if plan is not None and plan.calibration else None
    frames = {c: len(cam.t_ns) for c, cam in raw.cameras.items()}
    return plan_copy(meta, layout, sources, frames, cfg, patterns, cal)


def read_windows(plan: LayoutPlan | None) -> dict[str, list[StreamWindow]]:
    """The video windows of each read pattern `plan` serves: its `patterns` (a plan for several,
    robodata.layout.mix), else its one `pattern`; none without a plan."""
    if plan is None:
        return {}
    if plan.patterns:
        return {p["name"]: list(ReadPattern.from_dict(p["pattern"]).video) for p in plan.patterns}
    return {"": list(ReadPattern.from_dict(plan.pattern).video)}


def transcode_failed(chosen: CopyPlan, layout: Layout, failed: dict[str, str]) -> CopyPlan:
    """`chosen` with every group holding a failed camera transcoded as `layout` says; the finding
    is each of its cameras' reason."""
    groups, copies, decisions = [], dict(chosen.copies), dict(chosen.decisions)
    for g, orig in zip(chosen.layout.groups, layout.groups, strict=True):
        bad = {c: failed[c] for c in g.streams if c in failed}
        if not bad:
            groups.append(g)
            continue
        groups.append(orig)
        for cam in g.streams:
            copies.pop(cam, None)
            why = bad.get(cam) or "its group transcodes: " + "; ".join(f"{c}: {r}" for c, r in bad.items())
            decisions[cam] = {"mode": "transcode", "reason": f"copy failed verification: {why}"}
    return CopyPlan(Layout(groups=tuple(groups)), decisions, copies)
