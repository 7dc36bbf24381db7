"""Curation benchmark: spec -> written manifest over a large catalog, and the old file walk.

    python -m bench.curate --smoke   # 100k-row catalog at 1,000 rows a day (against 10k), 200 walked episodes
    python -m bench.curate --quick   # 5M-row catalog (growth measured against 500k)
    python -m bench.curate           # 50M-row catalog (growth measured against 5M)

Reports (last stdout line, JSON):
  manifest_s       spec -> written manifest over the catalog_rows catalog, best of 3 runs
                   (manifest_s_first_run: the first of them)
  growth_10x       time(catalog N) / time(catalog N/10); the spec selects the same set in both
  vs_file_walk     file-walk time / catalog time, same manifest rows, walk_episodes (10,000) on local disk
  deterministic    two runs at the same catalog version give identical manifest bytes
  selected         episodes in the manifest;  peak_rss_mb
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from bench import curate_file_walk
from bench.common import BENCH_DIR, emit, parse, peak_rss_mb, size_of
from bench.curate_catalog import ensure_catalog
from robodata.catalog import synthetic
from robodata.catalog.table import Catalog
from robodata.curate.run import curate
from robodata.curate.select import evaluate
from robodata.curate.spec import spec_from_dict

KEYS = (
    "manifest_s",
    "manifest_s_first_run",
    "growth_10x",
    "same_selected_set",
    "vs_file_walk",
    "file_walk_same_rows",
    "deterministic",
    "selected",
    "catalog_rows",
    "walk_episodes",
    "peak_rss_mb",
)


@dataclass(frozen=True)
class Size:
    catalog_rows: int  # the small catalog has a tenth; both must hold the spec's days (3-9)
    rows_per_day: int
    walk_episodes: int


SIZES = {
    "smoke": Size(100_000, 1_000, 200),
    "quick": Size(5_000_000, 50_000, 10_000),
    "full": Size(50_000_000, 50_000, 10_000),
}

SPEC: dict[str, Any] = {
    "version": 1,
    "name": "bench-fold",
    "filters": [
        {"column": "day", "op": "between", "value": ["2024-01-03", "2024-01-09"]},
        {"column": "task", "op": "in", "value": ["fold_towel", "fold_shirt", "hang_cloth", "box_pack"]},
        {"column": "quality_score", "op": ">=", "value": 0.6},
        {"column": "qc_status", "op": "==", "value": "pass"},
        {"column": "success", "op": "==", "value": True},
    ],
    "mix": {"by": "task", "weights": {"fold_towel": 3, "fold_shirt": 2, "hang_cloth": 1, "box_pack": 1}},
    "budget": {"total_hours": 2500, "per_group_hours": {"box_pack": 150}},
    "exclude": {"robots": ["sfo-1-r003", "aus-1-r017"], "batches": ["batch-20"]},
    "split": {"val_fraction": 0.05, "salt": "bench"},
}


def time_curate(catalog: Catalog, out: Path, runs: int = 3) -> tuple[float, float, str]:
    """(best, first) seconds of `runs` spec -> manifest runs, and the manifest's path (a local one here)."""
    spec = spec_from_dict(SPEC)
    times, path = [], ""
    for i in range(runs):
        d = out / f"run{i}"
        t = time.perf_counter()
        info, _ = curate(spec, catalog, d)
        times.append(time.perf_counter() - t)
        path = info.path
    return min(times), times[0], path


def file_walk_speedup(work: Path, episodes: int) -> tuple[float, float, bool]:
    """(walk seconds, catalog seconds, same rows) for `episodes` episodes on local disk."""
    root = BENCH_DIR / "curate" / f"walk-{episodes}-g2"
    if not (root / ".complete").exists():
        shutil.rmtree(root, ignore_errors=True)
        rows = synthetic.rows(synthetic.FleetShape(rows_per_day=episodes), 0, episodes)
        curate_file_walk.write_episode_files(root / "files", rows)
        # The catalog holds what ingestion extracted from these same files, once.
        Catalog(str((root / "catalog").resolve())).backfill(curate_file_walk.walk(root / "files"))
        (root / ".complete").write_text("ok\n")
    catalog = Catalog(str((root / "catalog").resolve()))
    spec = spec_from_dict({**SPEC, "filters": SPEC["filters"][1:]})
    t = time.perf_counter()
    walk_rows, _ = evaluate(spec, curate_file_walk.walk(root / "files").lazy())
    walk_s = time.perf_counter() - t
    best = float("inf")
    for i in range(5):
        t = time.perf_counter()
        _, selection = curate(spec, catalog, work / f"walkcmp{i}")
        best = min(best, time.perf_counter() - t)
    return walk_s, best, walk_rows.equals(selection.rows)


def main() -> None:
    args = parse(__doc__.splitlines()[0])
    size = SIZES[size_of(args)]
    n, shape = size.catalog_rows, synthetic.FleetShape(rows_per_day=size.rows_per_day)
    t0 = time.perf_counter()
    big = ensure_catalog(n, shape)
    small = ensure_catalog(n // 10, shape)
    print(f"catalogs ready in {time.perf_counter() - t0:.1f}s (versions {big.version()}, {small.version()})")
    work = Path(tempfile.mkdtemp(prefix="curate-", dir=BENCH_DIR))
    try:
        t_big, first_big, path_big = time_curate(big, work / "big")
        t_small, _, path_small = time_curate(small, work / "small")
        runs = sorted((work / "big").glob("run*/*.parquet"))
        digests = {hashlib.sha256(p.read_bytes()).hexdigest() for p in runs}
        rows_big = pl.read_parquet(path_big)
        same_set = rows_big.equals(pl.read_parquet(path_small))
        name = path_big.rsplit("/", 1)[-1]
        print(f"manifest {name}: {rows_big.height:,} episodes; big {t_big:.3f}s small {t_small:.3f}s")
        walk_s, cat_s, walk_same = file_walk_speedup(work, size.walk_episodes)
        print(
            f"file walk {size.walk_episodes} episodes: {walk_s:.2f}s vs catalog {cat_s:.4f}s (same rows: {walk_same})"
        )
        emit(
            {
                "manifest_s": round(t_big, 3),
                "manifest_s_first_run": round(first_big, 3),
                "growth_10x": round(t_big / t_small, 3),
                "same_selected_set": same_set,
                "vs_file_walk": round(walk_s / cat_s, 1),
                "file_walk_same_rows": walk_same,
                "deterministic": len(runs) >= 2 and len(digests) == 1,
                "selected": rows_big.height,
                "catalog_rows": n,
                "walk_episodes": size.walk_episodes,
                "peak_rss_mb": peak_rss_mb(),
            }
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
