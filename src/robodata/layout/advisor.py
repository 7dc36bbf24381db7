"""The layout advisor: candidates per topic group, ranked by the cost model, top ones measured
(robodata.layout.alternatives).

Group membership follows the pattern: the cameras of each video window form one group (one
range read per chunk serves all of them, and they share GOP/B-frame needs); every array
stream the pattern reads goes into one group in window order (a sample's state and action
come from adjacent parts); streams the pattern never reads go to cold groups, so hot reads
never fetch their bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, TypeVar

from robodata.container import EpisodeMeta, EpisodeReader, Layout, TopicGroup, VideoSettings
from robodata.container.calibration import Calibration
from robodata.container.plan import COLD_VIDEO, LayoutPlan
from robodata.dataset.pattern import ReadPattern, StreamWindow
from robodata.errors import ConfigError
from robodata.layout.alternatives import Alternative, measure_alternatives, of_best_table
from robodata.layout.calibration import calibrate
from robodata.layout.candidates import video_candidates
from robodata.layout.config import AdvisorConfig
from robodata.layout.costmodel import Cost, VideoChoice, camera_storage_bps, page_cost, predict_arrays, predict_video
from robodata.layout.mix import Weighted, camera_groups, mix_of, nearest_floor, scores, union
from robodata.layout.workload import Sample, sample_anchors, window_rate

DEFAULT_VIDEO = VideoChoice(gop=30, bframes=0, crf=23, span_s=2.0)  # what ingestion writes by default


def video_windows(pattern: ReadPattern, meta: EpisodeMeta) -> list[StreamWindow]:
    for w in pattern.windows:
        window_rate(w, meta)  # every stream exists
        kinds = {meta.streams[s].kind for s in w.streams}
        if kinds != {w.kind}:
            raise ConfigError(
                f"window {w.name!r} is {w.kind} but episode {meta.episode_id!r} has {sorted(kinds)} streams {w.streams}"
            )
    return list(pattern.video)


def _objective(c: Cost, cfg: AdvisorConfig, n_samples: int) -> float:
    if cfg.objective == "cpu":
        return c.cpu_s
    return c.cpu_s + min(page_cost(c.range_sizes, n_samples, p, cfg.store) for p in cfg.page_sizes)


_C = TypeVar("_C")  # what is being ranked: a VideoChoice, an array span


def rank(
    scored: Sequence[tuple[_C, dict[str, Cost]]], mix: list[Weighted], cfg: AdvisorConfig, n_samples: int
) -> list[tuple[_C, dict[str, Cost]]]:
    """Cheapest first by the mix's score (robodata.layout.mix: the weighted cost relative to each
    pattern's own best; with one pattern, plain cost order), those keeping every pattern within
    `mix_floor` of its best before the others; within tie_tolerance of the best, least storage first."""
    if not scored:
        return []
    objs = [{m.pattern.name: _objective(c[m.pattern.name], cfg, n_samples) for m in mix} for _, c in scored]
    sc = scores(objs, mix, cfg.mix_floor)
    order = sorted(range(len(scored)), key=lambda i: (not sc[i][2], sc[i][0]))
    top = sc[order[0]]
    ties = [i for i in order if sc[i][2] == top[2] and sc[i][0] <= top[0] * (1 + cfg.tie_tolerance)]
    ties.sort(key=lambda i: (next(iter(scored[i][1].values())).storage_bps, sc[i][0]))
    return [scored[i] for i in ties + [i for i in order if i not in ties]]


def _distinct(ranked: list[tuple[VideoChoice, dict[str, Cost]]], k: int) -> list[VideoChoice]:
    """The k best choices with distinct encodings (gop, bframes, crf, entropy, deblock), each at its best span."""
    out, seen = [], set()
    for ch, _ in ranked:
        key = replace(ch, span_s=0.0)  # the encoding
        if key not in seen:
            seen.add(key)
            out.append(ch)
        if len(out) == k:
            break
    return out


def _scale(meta: EpisodeMeta, cam: str, cal: Calibration) -> float:
    h, w, _ = meta.streams[cam].shape
    return h * w / (cal.height * cal.width)


def _nearest_crf(cal: Calibration, crf: int) -> int:
    """The calibrated CRF nearest `crf`; `crf` itself where nothing was calibrated (a camera-less episode)."""
    return min({p.crf for p in cal.points}, key=lambda c: (abs(c - crf), c), default=crf)


def build_layout(
    meta: EpisodeMeta, pattern: ReadPattern, video: dict[str, VideoChoice], array_span: float, codec: str, preset: str
) -> Layout:
    groups: list[TopicGroup] = []
    placed: set[str] = set()
    for w in pattern.video:
        ch = video[w.name]
        video_settings = VideoSettings(
            codec, ch.gop, ch.crf, preset, ch.bframes, entropy=ch.entropy, deblock=ch.deblock
        )
        groups.append(TopicGroup(w.name, w.streams, ch.span_s, video_settings))
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
            ch = VideoChoice(v.gop, v.bframes, _nearest_crf(cal, v.crf), g.chunk_span_s, v.entropy, v.deblock)
            total = total + predict_video(w, w.streams, ch, cal, metas, samples, loader)
    arrays = [w for w in pattern.windows if w.kind == "array"]
    for name in dict.fromkeys(layout.group_of(s).name for w in arrays for s in w.streams):
        g = next(x for x in layout.groups if x.name == name)
        total = total + predict_arrays(arrays, g.streams, g.chunk_span_s, cal, metas, samples, loader)
    return total


def advise(
    pattern: ReadPattern | Sequence[ReadPattern | tuple[ReadPattern, float]],
    episodes: list[str],
    cfg: AdvisorConfig | None = None,
    calibration: Calibration | None = None,
    workdir: str | Path | None = None,
    log: Callable[[str], None] = lambda s: None,
    progress: Any = None,
    **storage_options,
) -> LayoutPlan:
    """The layout for a read pattern, or one layout for several with weights ([(pattern, weight)]:
    robodata.layout.mix), over sample episodes.

    Raises:
        ConfigError: no episode, a pattern the episodes cannot serve, patterns that group their
            cameras differently, or no candidate within max_storage_x.
    """
    cfg = cfg or AdvisorConfig()
    mix = mix_of(pattern)
    if not episodes:
        raise ConfigError("advise needs at least one sample episode")
    readers = [EpisodeReader.open(e, **storage_options) for e in episodes]
    metas = [r.meta for r in readers]
    for m in mix:
        video_windows(m.pattern, metas[0])
    groups, full = camera_groups(mix), union(mix)
    names = [m.pattern.name for m in mix]
    samples = {m.pattern.name: sample_anchors(metas, m.pattern, cfg.samples, cfg.seed) for m in mix}
    n = len(samples[names[0]])
    bfs = {0, *cfg.bframes} | {w.every - 1 for m in mix for w in m.pattern.video if w.every > 1}
    # progress steps: calibration, each rewrite of a measured alternative, the measurement
    step = progress if progress is not None else (lambda n: None)
    cal = calibration or calibrate(readers[0], cfg, bfs, full.video[0].streams[0] if full.video else None)
    step(1)
    if cal.points:  # none for a camera-less episode
        log(
            f"calibrated: I/P/B decode ms at crf {cal.points[0].crf}: "
            + "/".join(f"{x * 1e3:.3f}" for x in cal.points[0].decode_s)
            + f", rgb {cal.rgb_s * 1e3:.3f} ms"
        )

    dch = VideoChoice(DEFAULT_VIDEO.gop, 0, _nearest_crf(cal, DEFAULT_VIDEO.crf), DEFAULT_VIDEO.span_s)
    ranked_video: dict[str, list[tuple[VideoChoice, dict[str, Cost]]]] = {}
    own_best: dict[str, dict[str, VideoChoice]] = {nm: {} for nm in names}  # pattern -> group -> its best
    default_bps = 0.0  # the ingestion default's camera bytes, the storage reference
    for gname, per in groups:
        lw = next(iter(per.values()))
        rate = window_rate(lw, metas[0])
        scale = [_scale(metas[0], c, cal) for c in lw.streams]
        default_bps += sum(camera_storage_bps(cal, dch, rate, s) for s in scale)
        cap = cfg.max_storage_x * sum(camera_storage_bps(cal, dch, rate, s) for s in scale)
        scored = []
        for ch in dict.fromkeys(ch for w in per.values() for ch in video_candidates(w, cfg, cal)):
            costs = {pn: predict_video(w, w.streams, ch, cal, metas, samples[pn], cfg.loader) for pn, w in per.items()}
            if next(iter(costs.values())).storage_bps <= cap:
                scored.append((ch, costs))
        if not scored:
            raise ConfigError(f"window {gname!r}: no candidate fits max_storage_x={cfg.max_storage_x}")
        ranked_video[gname] = rank(scored, [m for m in mix if m.pattern.name in per], cfg, n)
        for pn in per:
            own_best[pn][gname] = rank(
                scored, [Weighted(next(m.pattern for m in mix if m.pattern.name == pn), 1.0)], cfg, n
            )[0][0]
    arrays = {m.pattern.name: [w for w in m.pattern.windows if w.kind == "array"] for m in mix}
    order = tuple(s for w in full.windows if w.kind == "array" for s in w.streams)
    array_span = cfg.array_spans_s[0]
    if order:
        reading = [m for m in mix if arrays[m.pattern.name]]
        scored_a = [
            (
                span,
                {
                    pn: predict_arrays(arrays[pn], order, span, cal, metas, samples[pn], cfg.loader)
                    for pn in names
                    if arrays[pn]
                },
            )
            for span in cfg.array_spans_s
        ]
        array_span = rank(scored_a, reading, cfg, n)[0][0]

    # alternatives: the top choices of the costliest video group, the others at their best; with several
    # patterns also each pattern's own best layout (what "of its best" is measured against)
    lead = (
        max(ranked_video, key=lambda k: sum(c.cpu_s for c in ranked_video[k][0][1].values())) if ranked_video else None
    )
    best = {k: v[0][0] for k, v in ranked_video.items()}
    choices: list[tuple[dict[str, VideoChoice], str]] = (
        [
            ({**best, lead: ch} if lead is not None else best, "")
            for ch in _distinct(ranked_video[lead], max(1, cfg.verify_top))
        ]
        if lead is not None
        else [(best, "")]
    )
    if len(mix) > 1:
        if lead is not None:  # and those nearest the floor (mix.nearest_floor): measured, it is judged again
            rv, lm = ranked_video[lead], [m for m in mix if m.pattern.name in ranked_video[lead][0][1]]
            objs = [{m.pattern.name: _objective(c[m.pattern.name], cfg, n) for m in lm} for _, c in rv]
            had = {replace(c[lead], span_s=0.0) for c, _ in choices}  # their encodings, at any span
            near = [rv[i] for i in nearest_floor(objs, lm) if replace(rv[i][0], span_s=0.0) not in had]
            choices += [({**best, lead: ch}, "") for ch in _distinct(near, max(1, cfg.verify_top))]
        choices += [(own_best[pn], f" (best for {pn})") for pn in names if own_best[pn] not in [c for c, _ in choices]]
    weights = {m.pattern.name: m.weight for m in mix}
    alts: list[Alternative] = []
    for video, note in choices:
        layout = build_layout(metas[0], full, video, array_span, cfg.codec, cfg.preset)
        cost = {
            m.pattern.name: predict_layout(layout, m.pattern, cal, metas, samples[m.pattern.name], cfg.loader)
            for m in mix
        }
        vid_bps = sum(
            predict_video(lw, lw.streams, video[g], cal, metas, samples[names[0]][:1]).storage_bps
            for g, per in groups
            for lw in [next(iter(per.values()))]
        )
        label = " + ".join(f"{k}:{v.label()}" for k, v in video.items()) + f" + proprio:span{array_span:g}s" + note
        alts.append(Alternative(label, layout, cost, vid_bps / default_bps if default_bps else 1.0, weights))
    for a in alts:
        log(f"predicted {a.cost().cpu_s * 1e3:8.3f} ms/sample  {a.label}")

    chosen = alts[0]
    if cfg.verify_top > 0:
        chosen = measure_alternatives(alts, readers, metas, mix, cfg, workdir, progress, step, log) or chosen
    page = min(cfg.page_sizes, key=lambda p: page_cost(chosen.predicted[names[0]].range_sizes, n, p, cfg.store))
    for r in readers:
        r.close()
    of_best = of_best_table(alts, mix)
    return LayoutPlan(
        pattern=_pattern_dict(full if len(mix) > 1 else mix[0].pattern),
        layout=chosen.layout,
        page_size=page,
        alternatives=[a.row() for a in alts],
        chosen=chosen.label,
        calibration=asdict(cal),
        patterns=[
            {
                "name": m.pattern.name,
                "weight": m.weight,
                "pattern": asdict(m.pattern),
                **of_best[chosen.label][m.pattern.name],
            }
            for m in mix
        ]
        if len(mix) > 1
        else [],
    )


def _pattern_dict(p: ReadPattern) -> dict:
    return asdict(p)
