"""The layout advisor: candidates per topic group, ranked by the cost model, top ones measured.

Group membership follows the pattern: the cameras of each video window form one group (one
range read per chunk serves all of them, and they share GOP/B-frame needs); every array
stream the pattern reads goes into one group in window order (a sample's state and action
come from adjacent parts); streams the pattern never reads go to cold groups, so hot reads
never fetch their bytes.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from robodata.container import EpisodeMeta, EpisodeReader, Layout, TopicGroup, VideoSettings
from robodata.dataset.pattern import ReadPattern, StreamWindow
from robodata.errors import ConfigError
from robodata.layout.calibration import Calibration, calibrate
from robodata.layout.config import AdvisorConfig
from robodata.layout.costmodel import Cost, VideoChoice, camera_storage_bps, page_cost, predict_arrays, predict_video
from robodata.layout.measure import measure
from robodata.layout.plan import COLD_VIDEO, LayoutPlan
from robodata.layout.rewrite import rewrite
from robodata.layout.workload import Sample, sample_anchors, window_rate

DEFAULT_VIDEO = VideoChoice(gop=30, bframes=0, crf=23, span_s=2.0)  # what ingestion writes by default


@dataclass
class Alternative:
    label: str
    layout: Layout
    predicted: Cost
    storage_x: float
    measured: dict | None = None

    def row(self) -> dict:
        p = self.predicted
        out = {
            "label": self.label,
            "layout_version": self.layout.version,
            "layout": self.layout.to_dict(),
            "predicted_ms": round(p.cpu_s * 1e3, 3),
            "predicted_frames_decoded": round(p.frames_decoded, 2),
            "predicted_bytes": round(p.bytes),
            "predicted_ranges": round(p.ranges, 2),
            "storage_bps": round(p.storage_bps),
            "storage_x": round(self.storage_x, 3),
        }
        if self.measured:
            out.update(self.measured)
        return out


def video_windows(pattern: ReadPattern, meta: EpisodeMeta) -> list[StreamWindow]:
    for w in pattern.windows:
        window_rate(w, meta)  # every stream exists
        kinds = {meta.streams[s].kind for s in w.streams}
        if kinds != {w.kind}:
            raise ConfigError(
                f"window {w.name!r} is {w.kind} but episode {meta.episode_id!r} has {sorted(kinds)} streams {w.streams}"
            )
    return list(pattern.video)


def video_candidates(w: StreamWindow, cfg: AdvisorConfig, cal: Calibration) -> list[VideoChoice]:
    calibrated = {(p.crf, p.bframes) for p in cal.points}
    bfs = {0, *cfg.bframes} | ({w.every - 1} if w.every > 1 else set())
    good = [c for c in cfg.crfs if any(p.crf == c and p.psnr_db >= cfg.min_psnr_db for p in cal.points)]
    crfs = good or [min(cfg.crfs)]  # nothing meets the floor: best quality on offer
    out = []
    for gop in cfg.gops:
        for bf in sorted(bfs):
            if bf > 0 and gop <= bf + 1:
                continue
            if gop == 1 and bf:
                continue
            for crf in crfs:
                if (crf, bf) not in calibrated:
                    continue
                pt = cal.point(crf, bf)
                if (pt.intra_psnr_db if gop == 1 else pt.psnr_db) < cfg.min_psnr_db and good:
                    continue
                for span in cfg.camera_spans_s:
                    out.append(VideoChoice(gop, bf, crf, span))
    return out


def _objective(c: Cost, cfg: AdvisorConfig, n_samples: int) -> float:
    if cfg.objective == "cpu":
        return c.cpu_s
    return c.cpu_s + min(page_cost(c.range_sizes, n_samples, p, cfg.store) for p in cfg.page_sizes)


_C = TypeVar("_C")  # what is being ranked: a VideoChoice, an array span


def rank(scored: Sequence[tuple[_C, Cost]], cfg: AdvisorConfig, n_samples: int) -> list[tuple[_C, Cost]]:
    """Cheapest first; within tie_tolerance of the best, least storage first."""
    ordered = sorted(scored, key=lambda x: _objective(x[1], cfg, n_samples))
    if not ordered:
        return ordered
    best = _objective(ordered[0][1], cfg, n_samples)
    ties = [x for x in ordered if _objective(x[1], cfg, n_samples) <= best * (1 + cfg.tie_tolerance)]
    ties.sort(key=lambda x: (x[1].storage_bps, _objective(x[1], cfg, n_samples)))
    return ties + [x for x in ordered if x not in ties]


def _distinct(ranked: list[tuple[VideoChoice, Cost]], k: int) -> list[tuple[VideoChoice, Cost]]:
    """The k best choices with distinct encodings (gop, bframes, crf), each at its best span."""
    out, seen = [], set()
    for ch, cost in ranked:
        key = (ch.gop, ch.bframes, ch.crf)
        if key not in seen:
            seen.add(key)
            out.append((ch, cost))
        if len(out) == k:
            break
    return out


def _scale(meta: EpisodeMeta, cam: str, cal: Calibration) -> float:
    h, w, _ = meta.streams[cam].shape
    return h * w / (cal.height * cal.width)


def _nearest_crf(cal: Calibration, crf: int) -> int:
    return min({p.crf for p in cal.points}, key=lambda c: (abs(c - crf), c))


def build_layout(
    meta: EpisodeMeta, pattern: ReadPattern, video: dict[str, VideoChoice], array_span: float, codec: str, preset: str
) -> Layout:
    groups: list[TopicGroup] = []
    placed: set[str] = set()
    for w in pattern.video:
        ch = video[w.name]
        groups.append(
            TopicGroup(w.name, w.streams, ch.span_s, VideoSettings(codec, ch.gop, ch.crf, preset, ch.bframes))
        )
        placed.update(w.streams)
    arrays = tuple(s for w in pattern.windows if w.kind == "array" for s in w.streams)
    if arrays:
        groups.append(TopicGroup("proprio", arrays, array_span))
        placed.update(arrays)
    cold_v = tuple(s for s, sp in meta.streams.items() if sp.kind == "video" and s not in placed)
    cold_o = tuple(s for s, sp in meta.streams.items() if sp.kind != "video" and s not in placed)
    if cold_v:
        groups.append(TopicGroup("cold_video", cold_v, 4.0, COLD_VIDEO))
    if cold_o:
        groups.append(TopicGroup("cold", cold_o, 60.0))
    return Layout(groups=tuple(groups))


def predict_layout(
    layout: Layout,
    pattern: ReadPattern,
    cal: Calibration,
    metas: list[EpisodeMeta],
    samples: list[Sample],
    loader: str = "reader",
) -> Cost:
    """Model cost of an arbitrary layout (e.g. a hand-written grid point) for the pattern."""
    total = Cost()
    for w in pattern.windows:
        g = layout.group_of(w.streams[0])
        if w.kind == "video":
            v = g.video
            assert v is not None
            ch = VideoChoice(v.gop, v.bframes, _nearest_crf(cal, v.crf), g.chunk_span_s)
            total = total + predict_video(w, w.streams, ch, cal, metas, samples, loader)
    arrays = [w for w in pattern.windows if w.kind == "array"]
    for name in dict.fromkeys(layout.group_of(s).name for w in arrays for s in w.streams):
        g = next(x for x in layout.groups if x.name == name)
        total = total + predict_arrays(arrays, g.streams, g.chunk_span_s, cal, metas, samples, loader)
    return total


def advise(
    pattern: ReadPattern,
    episodes: list[str],
    cfg: AdvisorConfig | None = None,
    calibration: Calibration | None = None,
    workdir: str | Path | None = None,
    log: Callable[[str], None] = lambda s: None,
    progress: Any = None,
    **storage_options,
) -> LayoutPlan:
    cfg = cfg or AdvisorConfig()
    if not episodes:
        raise ConfigError("advise needs at least one sample episode")
    readers = [EpisodeReader.open(e, **storage_options) for e in episodes]
    metas = [r.meta for r in readers]
    vws = video_windows(pattern, metas[0])
    samples = sample_anchors(metas, pattern, cfg.samples, cfg.seed)
    n = len(samples)
    bfs = {0, *cfg.bframes} | {w.every - 1 for w in vws if w.every > 1}
    # progress steps: calibration, each rewrite of a measured alternative, the measurement
    step = progress if progress is not None else (lambda n: None)
    cal = calibration or calibrate(readers[0], cfg, bfs, vws[0].streams[0] if vws else None)
    step(1)
    if cal.points:  # none for a camera-less episode
        log(
            f"calibrated: I/P/B decode ms at crf {cal.points[0].crf}: "
            + "/".join(f"{x * 1e3:.3f}" for x in cal.points[0].decode_s)
            + f", rgb {cal.rgb_s * 1e3:.3f} ms"
        )

    ranked_video: dict[str, list[tuple[VideoChoice, Cost]]] = {}
    for w in vws:
        rate = window_rate(w, metas[0])
        scale = [_scale(metas[0], c, cal) for c in w.streams]
        default_ch = VideoChoice(DEFAULT_VIDEO.gop, 0, _nearest_crf(cal, DEFAULT_VIDEO.crf), DEFAULT_VIDEO.span_s)
        cap = cfg.max_storage_x * sum(camera_storage_bps(cal, default_ch, rate, s) for s in scale)
        scored = []
        for ch in video_candidates(w, cfg, cal):
            cost = predict_video(w, w.streams, ch, cal, metas, samples, cfg.loader)
            if cost.storage_bps <= cap:
                scored.append((ch, cost))
        if not scored:
            raise ConfigError(f"window {w.name!r}: no candidate fits max_storage_x={cfg.max_storage_x}")
        ranked_video[w.name] = rank(scored, cfg, n)
    awin = [w for w in pattern.windows if w.kind == "array"]
    order = tuple(s for w in awin for s in w.streams)
    array_span = cfg.array_spans_s[0]
    if awin:
        scored_a = [
            (span, predict_arrays(awin, order, span, cal, metas, samples, cfg.loader)) for span in cfg.array_spans_s
        ]
        array_span = rank(scored_a, cfg, n)[0][0]

    # alternatives: the top choices of the costliest video group, the others at their best
    alts: list[Alternative] = []
    lead = max(ranked_video, key=lambda k: ranked_video[k][0][1].cpu_s) if ranked_video else None
    picks: list[VideoChoice | None] = (
        [ch for ch, _ in _distinct(ranked_video[lead], max(1, cfg.verify_top))] if lead is not None else [None]
    )
    default_bps = 0.0  # the ingestion default's camera bytes, the storage reference
    for w in vws:
        dch = VideoChoice(DEFAULT_VIDEO.gop, 0, _nearest_crf(cal, DEFAULT_VIDEO.crf), DEFAULT_VIDEO.span_s)
        default_bps += sum(
            camera_storage_bps(cal, dch, window_rate(w, metas[0]), _scale(metas[0], c, cal)) for c in w.streams
        )
    for pick in picks:
        video = {k: v[0][0] for k, v in ranked_video.items()}
        if lead is not None and pick is not None:
            video[lead] = pick
        layout = build_layout(metas[0], pattern, video, array_span, cfg.codec, cfg.preset)
        cost = predict_layout(layout, pattern, cal, metas, samples, cfg.loader)
        vid_bps = sum(predict_video(w, w.streams, video[w.name], cal, metas, samples[:1]).storage_bps for w in vws)
        label = " + ".join(f"{k}:{v.label()}" for k, v in video.items()) + f" + proprio:span{array_span:g}s"
        alts.append(Alternative(label, layout, cost, vid_bps / default_bps if default_bps else 1.0))
    for a in alts:
        log(f"predicted {a.predicted.cpu_s * 1e3:8.3f} ms/sample  {a.label}")

    chosen = alts[0]
    if cfg.verify_top > 0:
        m_eps = list(range(min(cfg.measure_episodes, len(readers))))
        if progress is not None:
            progress.set_total(2 + len(m_eps) * len(alts[: cfg.verify_top]))
        m_samples = sample_anchors([metas[i] for i in m_eps], pattern, cfg.samples, cfg.seed + 1)
        with tempfile.TemporaryDirectory(dir=workdir, prefix="advise-") as tmp:
            written: dict[str, list[EpisodeReader]] = {}
            for k, a in enumerate(alts[: cfg.verify_top]):
                paths = []
                for i in m_eps:
                    dst = str(Path(tmp) / f"alt{k}" / f"{metas[i].episode_id}.rdep")
                    rewrite(readers[i], a.layout, dst, check=False)
                    paths.append(dst)
                    step(1)
                written[a.label] = [EpisodeReader.open(p) for p in paths]
            got = measure(written, pattern, m_samples, cfg.rounds, cfg.loader)
            step(1)
            for rs in written.values():
                for r in rs:
                    r.close()
        for a in alts[: cfg.verify_top]:
            m = got[a.label]
            a.measured = {
                "measured_ms": round(m.cpu_s * 1e3, 3),
                "measured_wall_ms": round(m.wall_s * 1e3, 3),
                "measured_frames_decoded": round(m.frames_decoded, 2),
                "measured_bytes": round(m.bytes),
                "measured_ranges": round(m.ranges, 2),
            }
            log(f"measured  {m.cpu_s * 1e3:8.3f} ms/sample  {a.label}")
        if cfg.choose == "measured":
            chosen = min(alts[: cfg.verify_top], key=lambda a: got[a.label].cpu_s)
    page = min(cfg.page_sizes, key=lambda p: page_cost(chosen.predicted.range_sizes, n, p, cfg.store))
    for r in readers:
        r.close()
    return LayoutPlan(
        pattern=_pattern_dict(pattern),
        layout=chosen.layout,
        page_size=page,
        alternatives=[a.row() for a in alts],
        chosen=chosen.label,
        calibration=asdict(cal),
    )


def _pattern_dict(p: ReadPattern) -> dict:
    return asdict(p)
