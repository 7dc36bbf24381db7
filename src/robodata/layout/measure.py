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
    cpu_s: float  # per sample (mean over samples of the cheapest round)
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


LOADERS = ("reader", "dataset")


def _dataset(readers: list[EpisodeReader], pattern: ReadPattern):
    """The delivery PatternDataset over these episodes (a one-row-per-episode manifest)."""
    import pyarrow as pa

    from robodata.dataset.dataset import DatasetConfig, PatternDataset
    from robodata.layout.workload import rates_json

    manifest = pa.table(
        {
            "episode_id": [r.meta.episode_id for r in readers],
            "uri": [r.source.name for r in readers],
            "duration_s": pa.array([r.meta.duration_s for r in readers], pa.float64()),
            "stream_rates_json": [rates_json(r.meta) for r in readers],
            "size_bytes": pa.array([r.source.size() for r in readers], pa.int64()),
            "footer_offset": pa.array([r.footer_offset for r in readers], pa.int64()),
            "footer_length": pa.array([r.footer_length for r in readers], pa.int64()),
        }
    )
    return PatternDataset(manifest, pattern, config=DatasetConfig(split=None))


def measure(
    layouts: dict[str, list[EpisodeReader]],
    pattern: ReadPattern,
    samples: list[Sample],
    rounds: int = 3,
    loader: str = "reader",
) -> dict[str, Measured]:
    """Loader cost of each layout on the same samples.

    loader="reader": each sample's windows through EpisodeReader.read_window (read_sample);
    loader="dataset": each sample alone through the delivery PatternDataset (batch-level GOP
    decoder; one sample per call, as under a global shuffle over many episodes).

    Layouts take turns sample by sample (rotating who goes first), so drift and contention
    from other processes hit all of them alike; each (layout, sample) keeps its cheapest of
    `rounds` reads (contention only ever adds time), and the cost is the mean over samples.
    """
    if loader not in LOADERS:
        raise ValueError(f"loader must be one of {LOADERS}, got {loader!r}")
    from robodata.dataset.index import Anchor

    datasets = {n: _dataset(rs, pattern) for n, rs in layouts.items()} if loader == "dataset" else {}

    def read(name: str, s: Sample) -> EpisodeReader:
        if loader == "dataset":
            ds = datasets[name]
            ds.__getitems__([Anchor(s.episode, s.t)])
            return ds.reader(s.episode)
        reader = layouts[name][s.episode]
        read_sample(reader, pattern, s.t)
        return reader

    names = list(layouts)
    cpu = {n: [float("inf")] * len(samples) for n in names}
    wall = {n: [float("inf")] * len(samples) for n in names}
    stats: dict[str, list[float]] = {n: [0.0, 0.0, 0.0] for n in names}
    for name in names:  # warm-up: page cache, decoder libraries, thread pools, dataset readers
        for e in sorted({s.episode for s in samples}):
            read(name, Sample(e, next(s.t for s in samples if s.episode == e)))
    for r in range(rounds):
        for i, s in enumerate(samples):
            k = (i + r) % len(names)
            for name in names[k:] + names[:k]:
                reader = layouts[name][s.episode] if loader == "reader" else datasets[name].reader(s.episode)
                before = (reader.stats.bytes_read, reader.stats.range_reads, reader.stats.frames_decoded)
                c0, w0 = time.process_time(), time.perf_counter()
                read(name, s)
                cpu[name][i] = min(cpu[name][i], time.process_time() - c0)
                wall[name][i] = min(wall[name][i], time.perf_counter() - w0)
                if r == 0:
                    after = (reader.stats.bytes_read, reader.stats.range_reads, reader.stats.frames_decoded)
                    for j in range(3):
                        stats[name][j] += (after[j] - before[j]) / len(samples)
    for ds in datasets.values():
        ds.close()
    return {n: Measured(statistics.fmean(cpu[n]), statistics.fmean(wall[n]), *stats[n]) for n in names}
