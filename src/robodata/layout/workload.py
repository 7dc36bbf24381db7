"""What a ReadPattern reads from a sample of episodes: anchors and per-window extents.

Anchors come from the delivery SampleIndex (the loader's own anchor rule, incl. snapping
to the first video window's grid), drawn at random from all samples of the episodes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from robodata.container import EpisodeMeta
from robodata.dataset.index import SampleIndex
from robodata.dataset.pattern import ReadPattern, StreamWindow
from robodata.errors import ConfigError


@dataclass(frozen=True)
class Sample:
    episode: int  # index into the episode list
    t: float  # anchor, seconds since episode start


def rates_json(meta: EpisodeMeta) -> str:
    return json.dumps({s: sp.rate_hz for s, sp in meta.streams.items() if sp.rate_hz > 0}, sort_keys=True)


def sample_anchors(metas: list[EpisodeMeta], pattern: ReadPattern, n: int, seed: int = 0) -> list[Sample]:
    """n samples drawn uniformly from every sample the pattern defines over these episodes."""
    if not metas:
        raise ConfigError("need at least one sample episode")
    table = pa.table(
        {
            "duration_s": pa.array([m.duration_s for m in metas], pa.float64()),
            "stream_rates_json": pa.array([rates_json(m) for m in metas], pa.string()),
        }
    )
    index = SampleIndex(table, pattern)
    total = len(index)
    if total == 0:
        raise ConfigError(
            f"pattern {pattern.name!r} has no sample in these episodes (too short for its windows: "
            f"durations {[round(m.duration_s, 2) for m in metas]})"
        )
    rng = np.random.default_rng(seed)
    ids = rng.choice(total, size=n, replace=total < n)
    out = []
    for i in sorted(int(x) for x in ids):
        a = index.locate(i, seed=seed)
        out.append(Sample(a.row, a.t))
    return out


def window_rate(w: StreamWindow, meta: EpisodeMeta) -> float:
    missing = [s for s in w.streams if s not in meta.streams]
    if missing:
        raise ConfigError(
            f"window {w.name!r} reads {missing}, which episode {meta.episode_id!r} does not have "
            f"(streams: {sorted(meta.streams)})"
        )
    return min(meta.streams[s].rate_hz for s in w.streams)


def window_seconds(w: StreamWindow, meta: EpisodeMeta, t: float) -> tuple[float, float]:
    """(t0, t1) the loader passes to read_window: the window's first and last sample, +- a quarter period."""
    rate = window_rate(w, meta)
    a, b = w.span_s(rate)
    eps = 0.25 / rate
    return t + a - eps, t + b + eps


def window_frames(w: StreamWindow, meta: EpisodeMeta, t: float) -> tuple[int, int]:
    """Native frame indices (first, last) a video window selects at anchor t."""
    rate = window_rate(w, meta)
    f = int(round(t * rate))
    return f + w.first, f + w.last
