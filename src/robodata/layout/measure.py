"""Measured loader cost: read samples exactly as a ReadPattern prescribes, CPU seconds per sample."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from robodata.container import EpisodeReader, Window
from robodata.dataset.pattern import ReadPattern
from robodata.layout.workload import Sample, window_seconds


@dataclass
class Measured:
    cpu_s: float              # per sample, median over rounds
    wall_s: float
    bytes: float
    ranges: float
    frames_decoded: float


def read_sample(reader: EpisodeReader, pattern: ReadPattern, t: float) -> dict[str, Window]:
    """One sample at anchor t: each window's streams over its extent (video frames every `every`)."""
    out: dict[str, Window] = {}
    for w in pattern.windows:
        t0, t1 = window_seconds(w, reader.meta, t)
        got = reader.read_window(t0, t1, list(w.streams), every=w.every if w.kind == "video" else 1)
        for s, win in got.items():
            if w.kind != "video" and w.every > 1:
                win = Window(win.data[:: w.every], win.t[:: w.every])
            out[s] = win
    return out


def measure(layouts: dict[str, list[EpisodeReader]], pattern: ReadPattern, samples: list[Sample],
            rounds: int = 3) -> dict[str, Measured]:
    """Loader cost of each layout on the same samples; layouts take turns each round (so drift and
    contention hit all alike) and the median round counts."""
    names = list(layouts)
    cpu: dict[str, list[float]] = {n: [] for n in names}
    wall: dict[str, list[float]] = {n: [] for n in names}
    stats: dict[str, tuple[float, float, float]] = {}
    for name in names:  # warm-up: page cache, decoder libraries, thread pools
        readers = layouts[name]
        read_sample(readers[samples[0].episode], pattern, samples[0].t)
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for name in order:
            readers = layouts[name]
            before = [(x.stats.bytes_read, x.stats.range_reads, x.stats.frames_decoded) for x in readers]
            c0, w0 = time.process_time(), time.perf_counter()
            for s in samples:
                read_sample(readers[s.episode], pattern, s.t)
            cpu[name].append((time.process_time() - c0) / len(samples))
            wall[name].append((time.perf_counter() - w0) / len(samples))
            if r == 0:
                after = [(x.stats.bytes_read, x.stats.range_reads, x.stats.frames_decoded) for x in readers]
                stats[name] = tuple(sum(a[i] - b[i] for a, b in zip(after, before)) / len(samples) for i in range(3))  # type: ignore[assignment]
    return {n: Measured(statistics.median(cpu[n]), statistics.median(wall[n]), *stats[n]) for n in names}
