"""Loader benchmark: robodata's PatternDataset vs the legacy JPEG layout and a LeRobot-style
MP4-per-camera layout, on the same episodes and the same samples, for the wam and vla
read patterns; bytes per sample vs an interleaved layout; how many episodes' vla working
sets a fixed page-cache budget holds vs whole-file caching; time to first batch from a
curation spec over a 1,000,000-row catalog.

    python -m bench.loader --quick   # 3 episodes of 12 s (--smoke: 2 of 6 s, one round, a 10,000-row catalog)

Every loader runs in a torch DataLoader with the same workers and batch size over the same
keys: a block-shuffled order (runs of neighbouring anchors, shuffled, then shuffled inside)
from PatternSampler. robodata reads through a warm node page cache. `robodata_global` is
robodata with a fully random order (no locality), for reference.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import BatchSampler, DataLoader

from bench.common import BENCH_DIR, emit, parse, size_of
from bench.container import interleaved_window_bytes
from bench.loader_baselines import JpegDataset, Mp4Dataset
from bench.loader_data import FPS, STATE_HZ, VIDEO, build, manifest, storage
from bench.loader_first_batch import first_batch_s
from robodata.cache import PageCache, PageCacheConfig
from robodata.container.source import LocalFileSource
from robodata.dataset import BatchLoader, DatasetConfig, LoaderConfig, PatternDataset, PatternSampler, preset

WORKERS = 2
SETTINGS = {"wam": {"batch": 4, "block": 4}, "vla": {"batch": 32, "block": 8}}
PAGE = 64 * 1024  # bench page size: about a third of one 1 s camera chunk at this set's bitrate
KEYS = (
    "wam.samples_per_s.robodata",
    "wam.vs_best_baseline",
    "wam.vs_lerobot_style",
    "wam.cpu_vs_best_baseline",
    "wam.bytes_per_sample.vs_interleaved",
    "vla.samples_per_s.robodata",
    "vla.vs_best_baseline",
    "vla.vs_lerobot_style",
    "vla.cpu_vs_best_baseline",
    "vla.bytes_per_sample.vs_interleaved",
    "vla.storage_vs_jpeg",
    "cache_coverage_ratio",
    "first_batch_s",
    "first_batch_detail.catalog_rows",
    "peak_rss_mb",
)


@dataclass(frozen=True)
class Size:
    episodes: int
    seconds: float  # > 4: a wam sample spans 4 s
    rounds: int  # loaders take turns this many times; the best round counts
    wam_passes: int  # the wam key list run this many times over
    vla_batches: int
    catalog_rows: int  # the catalog time-to-first-batch curates from


SIZES = {
    "smoke": Size(2, 6.0, 1, 1, 4, 10_000),
    "quick": Size(3, 12.0, 2, 3, 30, 1_000_000),
    "full": Size(6, 30.0, 2, 3, 30, 1_000_000),
}


def log(msg: str) -> None:
    print(f"[bench.loader {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def samples_per_s(ds, keys, batch: int) -> tuple[float, float]:
    """(samples per wall second after the first batch, samples per CPU second of the whole
    run incl. workers). CPU seconds are robust to other jobs on the machine; wall seconds
    are what a trainer sees.

    robodata runs its own loader (BatchLoader, what PatternLoader runs: whole batches built
    in the workers, in reused shared-memory batch slots); the baselines use torch's
    per-sample fetch + default collate. Same workers, prefetch and batch size."""
    dl: BatchLoader | DataLoader
    if isinstance(ds, PatternDataset):
        dl = BatchLoader(
            ds,
            BatchSampler(keys, batch, False),
            LoaderConfig(batch_size=batch, num_workers=WORKERS, prefetch_factor=2, timeout_s=900),
        )
    else:
        dl = DataLoader(ds, batch_size=batch, sampler=keys, num_workers=WORKERS, prefetch_factor=2, timeout=900)
    cpu0 = _cpu_s()
    n, total, t_first = 0, 0, None
    it = iter(dl)
    for b in it:
        total += len(b["episode_index"])
        if t_first is None:
            t_first = time.perf_counter()
            continue
        n += len(b["episode_index"])
    wall = n / (time.perf_counter() - t_first) if n and t_first is not None else 0.0
    del it, dl  # workers exit and are reaped: their CPU time lands in RUSAGE_CHILDREN
    return wall, total / max(_cpu_s() - cpu0, 1e-9)


def robodata_bytes(man, pattern, keys, batch: int) -> tuple[float, float]:
    """Container bytes read per sample: one sample at a time, and batch by batch."""
    per = []
    ds = PatternDataset(man, pattern)
    for k in keys:
        r = ds.reader(k.row)
        read_before = r.stats.bytes_read
        ds.__getitems__([k])
        per.append(r.stats.bytes_read - read_before)
    ds2 = PatternDataset(man, pattern)
    total = 0
    for i in range(0, len(keys), batch):
        chunk = keys[i : i + batch]
        rows = {k.row for k in chunk}
        before = {row: ds2.reader(row).stats.bytes_read for row in rows}
        ds2.__getitems__(chunk)
        total += sum(ds2.reader(row).stats.bytes_read - before[row] for row in rows)
    return float(np.mean(per)), total / len(keys)


def interleaved_bytes(eps, pattern, keys) -> float:
    srcs: dict[int, LocalFileSource] = {}
    idx: dict[int, list[tuple[Any, ...]]] = {}
    gop_ns = int(VIDEO.gop / FPS * 1e9)
    out = []
    for k in keys:
        if k.row not in srcs:
            srcs[k.row] = LocalFileSource(eps[k.row].interleaved)
            idx[k.row] = [tuple(x) for x in json.loads((eps[k.row].dir / "interleaved_index.json").read_text())]
        t_lo, t_hi, cam_lo = [], [], []
        for w in pattern.windows:
            rate = FPS if w.kind == "video" else STATE_HZ
            a, b = k.t + w.first / rate, k.t + w.last / rate
            t_lo.append(a)
            t_hi.append(b)
            if w.kind == "video":
                cam_lo.append(a)
        t0 = int(max(0.0, min(cam_lo or t_lo)) * 1e9)
        out.append(interleaved_window_bytes(srcs[k.row], idx[k.row], t0, int(max(t_hi) * 1e9), bool(cam_lo), gop_ns))
    return float(np.mean(out))


def coverage(root: Path, eps, pattern, n_uris: int = 64, whole_files: int = 8) -> dict:
    """Fill a cache sized for `whole_files` whole episodes with one vla visit (a block of
    8 neighbouring anchors) per episode, over `n_uris` distinct episode URIs, then count
    how many of the most recent episodes are still entirely served from the cache."""
    cov = root / "coverage"
    shutil.rmtree(cov, ignore_errors=True)
    (cov / "uris").mkdir(parents=True)
    uris = []
    for i in range(n_uris):
        link = cov / "uris" / f"ep{i:03d}.rdep"
        os.symlink(eps[i % len(eps)].rdep.resolve(), link)
        uris.append(str(link))
    base = manifest(eps)
    # each row keeps its container's episode_id (the loader compares them)
    rows = [dict(base.slice(i % len(eps), 1).to_pylist()[0], uri=u) for i, u in enumerate(uris)]
    import pyarrow as pa

    man = pa.Table.from_pylist(rows, schema=base.schema)
    file_bytes = float(np.mean([e.rdep.stat().st_size for e in eps]))
    budget = int(whole_files * file_bytes)
    cache = PageCache(PageCacheConfig(root=str(cov / "cache"), page_size=PAGE, budget_bytes=budget, touch_flush_s=0))
    ds = PatternDataset(man, pattern, cache=cache, config=DatasetConfig(reader_cache=1))
    rng = np.random.default_rng(7)
    visits = []
    for row in range(n_uris):
        first = int(ds.index.cum[row - 1]) if row else 0
        start = first + int(rng.integers(0, int(ds.index.counts[row]) - 8))
        visits.append([ds.index.locate(s) for s in range(start, start + 8)])
    for v in visits:
        ds.__getitems__(v)
    fit = 0
    for v in reversed(visits):
        before = cache.stats().misses
        ds.__getitems__(v)
        if cache.stats().misses != before:
            break
        fit += 1
    whole = int(budget // file_bytes)
    return {
        "cache_coverage_ratio": round(fit / whole, 2),
        "cache_coverage_detail": {
            "budget_bytes": budget,
            "page_size": PAGE,
            "episodes_fit_pages": fit,
            "episodes_fit_whole_files": whole,
            "mean_file_bytes": int(file_bytes),
            "capped_at": n_uris if fit == n_uris else None,
        },
    }


def main() -> None:
    args = parse(__doc__ or "")
    size = SIZES[size_of(args)]
    n_eps, seconds = size.episodes, size.seconds
    root = BENCH_DIR / "loader"
    t = time.perf_counter()
    eps = build(root / "set", n_eps, seconds)
    build_s = time.perf_counter() - t
    sizes = storage(eps)
    man = manifest(eps)
    cache_dir = root / "cache"
    shutil.rmtree(cache_dir, ignore_errors=True)
    cache = PageCache(PageCacheConfig(root=str(cache_dir), page_size=PAGE, budget_bytes=4 << 30))
    for e in eps:  # warm node cache: the steady state of a node that has seen these episodes
        cache.source(str(e.rdep)).read(0, e.rdep.stat().st_size)
    result: dict = {
        "episodes": n_eps,
        "episode_s": seconds,
        "cameras": 3,
        "resolution": "640x480",
        "fps": FPS,
        "state_hz": STATE_HZ,
        "workers": WORKERS,
        "layout": {"gop": VIDEO.gop, "bframes": VIDEO.bframes, "crf": VIDEO.crf, "camera_chunk_s": 1.0},
        "storage_bytes": sizes,
        "build_s": round(build_s, 1),
    }
    for name in ("wam", "vla"):
        pattern = preset(name)
        cfg = SETTINGS[name]
        ds = PatternDataset(man, pattern, cache=cache)
        keys = list(PatternSampler(ds.index, seed=0, shuffle="block", block_size=cfg["block"]))
        keys_global = list(PatternSampler(ds.index, seed=0, shuffle="global"))
        # enough batches that start-up and the first batch do not matter: the quick wam set
        # has few windows, so its key list is run three times over
        if name == "wam":
            keys, keys_global = keys * size.wam_passes, keys_global * size.wam_passes
        else:
            n_keys = size.vla_batches * cfg["batch"]
            keys, keys_global = keys[:n_keys], keys_global[:n_keys]
        rates: dict[str, float] = {}
        cpu_rates: dict[str, float] = {}
        loaders = (
            ("robodata", ds, keys),
            ("robodata_global", ds, keys_global),
            ("jpeg_parquet", JpegDataset(eps, pattern), keys),
            ("mp4_parquet", Mp4Dataset(eps, pattern), keys),
        )
        for _ in range(size.rounds):  # loaders take turns; best round counts (other jobs share this machine)
            for label, d, k in loaders:
                wall, cpu = samples_per_s(d, k, cfg["batch"])
                rates[label] = round(max(rates.get(label, 0.0), wall), 2)
                cpu_rates[label] = round(max(cpu_rates.get(label, 0.0), cpu), 2)
                log(f"{name} {label}: {wall:.2f} samples/s, {cpu:.2f} samples/cpu-s")
        best = max(rates["jpeg_parquet"], rates["mp4_parquet"])
        probe = keys[: min(len(keys), 2 * cfg["batch"])]
        per, batched = robodata_bytes(man, pattern, probe, cfg["batch"])
        inter = interleaved_bytes(eps, pattern, probe)
        result[name] = {
            "samples_per_s": rates,
            "samples_per_cpu_s": cpu_rates,
            "samples": len(keys),
            "batch_size": cfg["batch"],
            "block_size": cfg["block"],
            "vs_best_baseline": round(rates["robodata"] / best, 2) if best else None,
            "vs_lerobot_style": round(rates["robodata"] / rates["mp4_parquet"], 2) if rates["mp4_parquet"] else None,
            "cpu_vs_best_baseline": round(
                cpu_rates["robodata"] / max(cpu_rates["jpeg_parquet"], cpu_rates["mp4_parquet"]), 2
            ),
            "cpu_vs_lerobot_style": round(cpu_rates["robodata"] / cpu_rates["mp4_parquet"], 2),
            "storage_vs_jpeg": round(sizes["jpeg"] / sizes["robodata"], 2),
            "bytes_per_sample": {
                "robodata": int(per),
                "robodata_batched": int(batched),
                "interleaved": int(inter),
                "vs_interleaved": round(per / inter, 3),
                "batched_vs_interleaved": round(batched / inter, 3),
            },
        }
    result.update(coverage(root, eps, preset("vla")))
    log(f"coverage {result['cache_coverage_ratio']}")
    result.update(first_batch_s(root, eps, size.catalog_rows))
    log(f"first batch {result['first_batch_s']} s")
    emit(result)


if __name__ == "__main__":
    main()
