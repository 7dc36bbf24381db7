"""Curation benchmark: spec -> written manifest over a large catalog, and the old file walk.

    python -m bench.curate --quick   # 5M-row catalog (growth measured against 500k)
    python -m bench.curate           # 50M-row catalog (growth measured against 5M)

Reports (last stdout line, JSON):
  manifest_s_5m / manifest_s_50m  spec -> written manifest, best of 3 runs (first run reported too)
  growth_10x       time(catalog N) / time(catalog N/10); the spec selects the same set in both
  vs_file_walk     file-walk time / catalog time, same manifest rows, 10,000 episodes on local disk
  deterministic    two runs at the same catalog version give identical manifest bytes
  selected         episodes in the manifest;  peak_rss_mb
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from pathlib import Path

import polars as pl

from bench import curate_file_walk
from bench.common import BENCH_DIR, emit, parse, peak_rss_mb
from bench.curate_catalog import ensure_catalog
from robodata.catalog import synthetic
from robodata.catalog.table import Catalog
from robodata.curate.run import curate
from robodata.curate.select import evaluate
from robodata.curate.spec import spec_from_dict

SHAPE = synthetic.FleetShape(rows_per_day=50_000)
WALK_EPISODES = 10_000

SPEC = {
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


def time_curate(catalog: Catalog, out: Path, runs: int = 3) -> tuple[float, float, Path]:
    """(best, first) seconds of `runs` spec -> manifest runs, and the manifest path."""
    spec = spec_from_dict(SPEC)
    times, path = [], None
    for i in range(runs):
        d = out / f"run{i}"
        t = time.perf_counter()
        info, _ = curate(spec, catalog, d)
        times.append(time.perf_counter() - t)
        path = info.path
    return min(times), times[0], path


def file_walk_speedup(work: Path) -> tuple[float, float, bool]:
    """(walk seconds, catalog seconds, same rows) for WALK_EPISODES episodes on local disk."""
    root = BENCH_DIR / "curate" / f"walk-{WALK_EPISODES}-g2"
    if not (root / ".complete").exists():
        shutil.rmtree(root, ignore_errors=True)
        rows = synthetic.rows(synthetic.FleetShape(rows_per_day=WALK_EPISODES), 0, WALK_EPISODES)
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
    n = 5_000_000 if args.quick else 50_000_000
    label = "5m" if args.quick else "50m"
    t0 = time.perf_counter()
    big = ensure_catalog(n, SHAPE)
    small = ensure_catalog(n // 10, SHAPE)
    print(f"catalogs ready in {time.perf_counter() - t0:.1f}s (versions {big.version()}, {small.version()})")
    work = Path(tempfile.mkdtemp(prefix="curate-", dir=BENCH_DIR))
    try:
        t_big, first_big, path_big = time_curate(big, work / "big")
        t_small, _, path_small = time_curate(small, work / "small")
        runs = sorted((work / "big").glob("run*/*.parquet"))
        digests = {hashlib.sha256(p.read_bytes()).hexdigest() for p in runs}
        rows_big = pl.read_parquet(path_big)
        same_set = rows_big.equals(pl.read_parquet(path_small))
        print(f"manifest {path_big.name}: {rows_big.height:,} episodes; big {t_big:.3f}s small {t_small:.3f}s")
        walk_s, cat_s, walk_same = file_walk_speedup(work)
        print(f"file walk {WALK_EPISODES} episodes: {walk_s:.2f}s vs catalog {cat_s:.4f}s (same rows: {walk_same})")
        emit(
            {
                f"manifest_s_{label}": round(t_big, 3),
                f"manifest_s_{label}_first_run": round(first_big, 3),
                "growth_10x": round(t_big / t_small, 3),
                "same_selected_set": same_set,
                "vs_file_walk": round(walk_s / cat_s, 1),
                "file_walk_same_rows": walk_same,
                "deterministic": len(runs) >= 2 and len(digests) == 1,
                "selected": rows_big.height,
                "catalog_rows": n,
                "peak_rss_mb": peak_rss_mb(),
            }
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
