"""Curation benchmark: spec -> written manifest over a large catalog, and the old file walk.

    python -m bench.curate --smoke   # 100k-row catalog at 1,000 rows a day (against 10k), 200 walked episodes
    python -m bench.curate --quick   # 5M-row catalog (growth measured against 500k)
    python -m bench.curate           # 50M-row catalog (growth measured against 5M)

Every spec runs on the catalogs as the maintenance job leaves them (`robodata catalog optimize`:
compacted, each day sorted by budget_hash for the specs' salt, LZ4 pages;
bench.curate_catalog.ensure_optimized), and once more on the large catalog as ingestion leaves it
(arrival_*: one file per day and batch, budget_hash of salt "": the plain scan).

Reports (last stdout line, JSON):
  manifest_s       the seven-day version-1 spec (bench.curate_full.NARROW) -> written manifest over
                   the catalog_rows catalog, best of 3 runs (manifest_s_first_run: the first of them;
                   manifest_cpu_s: CPU seconds, user + sys, of the best run; arrival_manifest_s: the
                   same on the arrival catalog)
  growth_10x       time(catalog N) / time(catalog N/10); the spec selects the same set in both
  vs_file_walk     file-walk time / catalog time, same manifest rows, walk_episodes (10,000) on local disk
  deterministic    two runs at the same catalog version give identical manifest bytes
  selected         episodes in the manifest;  peak_rss_mb (this process: catalog generation and the
                   S3 server included)
  side_file_bytes  bytes of files in the optimized catalog's folder other than Delta data files and
                   the Delta log (the sidecars and heads of earlier layouts lived there)
  full_table       the budgeted full-table spec, version 2 (the bench spec without its day filter:
                   ~40 % of the catalog passes its filters, the budget keeps ~83k episodes), each size
                   in a process of its own (bench.curate_full): manifest_s (best of 3),
                   manifest_s_first_run, manifest_cpu_s, growth_10x, peak_rss_mb (that process: the
                   curation alone), bytes_read_fraction (bytes the process read in the best run /
                   bytes of the table's data files), evaluated_by, same_as_plain (the plain scan's
                   rows), selected, arrival_manifest_s, arrival_manifest_cpu_s (the plain scan there);
                   same_manifest_as_before: the version-1 full-table spec (bench.curate_full.FULL_V1)
                   gives the content hash main's eager evaluation (6d94797) wrote over the arrival
                   catalog, pinned in bench.curate_full (at sizes without a pin: true), and the same
                   rows over the optimized catalog (same_manifest_basis; v1_manifest_s: its time there)
  quality_only     `quality_score >= 0.9, qc_status == pass` over all tasks and days, no budget
                   (~20 % of the catalog is the manifest): the same keys, its pinned hash version 1
  s3               full_table over a copy of the optimized catalog on a loopback S3 server (moto, in
                   this process): full_table_manifest_s (best of 3), manifest_cpu_s, requests (per run,
                   counted by the server), ranged_gets, bytes_read_fraction (GET bodies / data bytes),
                   evaluated_by, same_rows (as the local catalog's)
  load_avg         the 1-minute load average before and after the timed runs (2 shared cores)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import polars as pl

from bench import curate_file_walk
from bench.common import BENCH_DIR, emit, parse, peak_rss_mb, size_of
from bench.curate_catalog import ensure_catalog, ensure_optimized
from bench.curate_full import PINNED, SPECS
from robodata.catalog.table import Catalog
from robodata.curate.run import curate
from robodata.curate.select import evaluate
from robodata.curate.spec import spec_from_dict
from robodata_testing import synthetic_catalog as synthetic

KEYS = (
    "side_file_bytes",
    "full_table.bytes_read_fraction",
    "full_table.same_as_plain",
    "full_table.v1_manifest_s",
    "s3.full_table_manifest_s",
    "s3.manifest_cpu_s",
    "s3.requests",
    "s3.ranged_gets",
    "s3.bytes_read_fraction",
    "s3.same_rows",
    "manifest_s",
    "manifest_s_first_run",
    "manifest_cpu_s",
    "arrival_manifest_s",
    "load_avg",
    "growth_10x",
    "same_selected_set",
    "vs_file_walk",
    "file_walk_same_rows",
    "deterministic",
    "selected",
    "catalog_rows",
    "walk_episodes",
    "peak_rss_mb",
    "full_table.manifest_s",
    "full_table.manifest_s_first_run",
    "full_table.growth_10x",
    "full_table.peak_rss_mb",
    "full_table.same_manifest_as_before",
    "full_table.same_manifest_basis",
    "full_table.selected",
    "full_table.manifest_cpu_s",
    "full_table.arrival_manifest_s",
    "full_table.arrival_manifest_cpu_s",
    "quality_only.manifest_s",
    "quality_only.manifest_s_first_run",
    "quality_only.growth_10x",
    "quality_only.peak_rss_mb",
    "quality_only.same_manifest_as_before",
    "quality_only.same_manifest_basis",
    "quality_only.selected",
    "quality_only.manifest_cpu_s",
    "quality_only.arrival_manifest_s",
    "quality_only.arrival_manifest_cpu_s",
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

SPEC: dict[str, Any] = SPECS["narrow"]


def time_curate(catalog: Catalog, out: Path, runs: int = 3) -> tuple[float, float, float, str]:
    """(best, first, CPU of the best) seconds of `runs` spec -> manifest runs, and the manifest's path."""
    spec = spec_from_dict(SPEC)
    times, path = [], ""
    for i in range(runs):
        d = out / f"run{i}"
        t, c = time.perf_counter(), _cpu()
        info = curate(spec, catalog, d)[0]  # the selection's rows are not held through the next run
        times.append((time.perf_counter() - t, _cpu() - c))
        path = info.path
    best = min(times)
    return best[0], times[0][0], best[1], path


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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


def child(catalog: Catalog | str, spec: str, out: Path, *extra: str) -> dict[str, Any]:
    """bench.curate_full in a process of its own: its JSON line."""
    uri = catalog if isinstance(catalog, str) else catalog.uri
    cmd = [sys.executable, "-m", "bench.curate_full", "--catalog", uri, "--spec", spec, "--out", str(out), *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def data_bytes(catalog: Catalog) -> int:
    """Bytes of the live data files of a local catalog."""
    return sum(Path(unquote(u.removeprefix("file://"))).stat().st_size for u in catalog.table().file_uris())


def side_file_bytes(catalog: Catalog) -> int:
    """Bytes of files in the table's folder other than Delta data files and the Delta log."""
    root = Path(catalog.uri)
    return sum(
        p.stat().st_size
        for p in root.rglob("*")
        if p.is_file()
        and p.name != ".complete"  # the bench's own mark of a finished catalog
        and not (p.suffix == ".parquet" and p.parent.name.startswith("day="))
        and "_delta_log" not in p.parts
    )


def full_table(spec: str, cats: dict[str, Catalog], rows: int, work: Path) -> dict[str, Any]:
    """Time `spec` over the optimized catalogs (big, small) and the arrival big one, each in a process of its own."""
    got, got_small = child(cats["big"], spec, work / f"{spec}-big"), child(cats["small"], spec, work / f"{spec}-small")
    arrival = child(cats["arrival"], spec, work / f"{spec}-arrival")
    pinned = spec if spec != "full" else "full_v1"  # version 1: the hashes main wrote
    if pinned != spec:
        v1, v1_arrival = (
            child(cats["big"], pinned, work / "v1-big"),
            child(cats["arrival"], pinned, work / "v1-arrival"),
        )
        plain = child(cats["big"], spec, work / f"{spec}-plain", "--plain", "--runs", "1")
    else:
        v1, v1_arrival, plain = got, arrival, got
    if (rows, pinned) in PINNED:
        basis, same = (
            "pinned main 6d94797",
            (v1_arrival["v2_hash"], v1_arrival["episodes"]) == PINNED[(rows, pinned)],
        )
    else:
        basis, same = "no pin at this size: the arrival catalog's rows", True
    same = same and v1["rows_hash"] == v1_arrival["rows_hash"]  # the optimized catalog: the same rows
    print(f"{spec}: {got} small {got_small['best_s']}s arrival {arrival['best_s']}s same ({basis}): {same}")
    return {
        "manifest_s": got["best_s"],
        "manifest_s_first_run": got["first_s"],
        "manifest_cpu_s": got["best_cpu_s"],
        "growth_10x": round(got["best_s"] / got_small["best_s"], 3),
        "peak_rss_mb": got["peak_rss_mb"],
        "bytes_read_fraction": round(got["bytes_read"] / data_bytes(cats["big"]), 4),
        "same_manifest_as_before": same,
        "same_manifest_basis": basis,
        "same_as_plain": got["content_hash"] == plain["content_hash"],
        "selected": got["episodes"],
        "rows_hash": got["rows_hash"],
        "evaluated_by": got["evaluated_by"],
        "small_evaluated_by": got_small["evaluated_by"],
        "v1_manifest_s": v1["best_s"],
        "arrival_manifest_s": arrival["best_s"],
        "arrival_manifest_cpu_s": arrival["best_cpu_s"],
    }


def on_s3(big: Catalog, local: dict[str, Any], work: Path) -> dict[str, Any]:
    """full_table over a copy of the optimized catalog (its live files and log) on a loopback S3 server."""
    from tests.core.s3_server import moto_s3

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    root = Path(big.uri)
    keep = {unquote(u.removeprefix("file://")) for u in big.table().file_uris()}
    with moto_s3() as s3:
        client = s3["client"]
        client.create_bucket(Bucket="bench")
        for p in sorted(root.rglob("*")):
            if p.is_file() and ("_delta_log" in p.parts or str(p) in keep):
                client.upload_file(str(p), "bench", f"catalog/{p.relative_to(root)}")
        s3["requests"].reset()
        runs = 3
        got = child("s3://bench/catalog", "full", work / "s3", "--s3-endpoint", s3["endpoint_url"], "--runs", str(runs))
        counted = s3["requests"]
        return {
            "full_table_manifest_s": got["best_s"],
            "manifest_cpu_s": got["best_cpu_s"],
            "requests": round(counted.total / runs, 1),
            "ranged_gets": round(counted.ranged / runs, 1),
            "bytes_read_fraction": round(counted.get_bytes / runs / data_bytes(big), 4),
            "evaluated_by": got["evaluated_by"],
            "same_rows": got["rows_hash"] == local["rows_hash"],
        }


def main() -> None:
    args = parse(__doc__.splitlines()[0])
    size = SIZES[size_of(args)]
    n, shape = size.catalog_rows, synthetic.FleetShape(rows_per_day=size.rows_per_day)
    t0 = time.perf_counter()
    arrival = ensure_catalog(n, shape)
    big, small = ensure_optimized(n, shape), ensure_optimized(n // 10, shape)
    print(f"catalogs ready in {time.perf_counter() - t0:.1f}s (versions {big.version()}, {small.version()})")
    work = Path(tempfile.mkdtemp(prefix="curate-", dir=BENCH_DIR))
    try:
        load = [round(os.getloadavg()[0], 2)]
        t_big, first_big, cpu_big, path_big = time_curate(big, work / "big")
        t_small, _, _, path_small = time_curate(small, work / "small")
        t_arrival, _, _, path_arrival = time_curate(arrival, work / "arrival")
        runs = sorted((work / "big").glob("run*/*.parquet"))
        digests = {hashlib.sha256(p.read_bytes()).hexdigest() for p in runs}
        rows_big = pl.read_parquet(path_big)
        same_set = rows_big.equals(pl.read_parquet(path_small)) and rows_big.equals(pl.read_parquet(path_arrival))
        name = path_big.rsplit("/", 1)[-1]
        print(f"manifest {name}: {rows_big.height:,} episodes; big {t_big:.3f}s small {t_small:.3f}s")
        walk_s, cat_s, walk_same = file_walk_speedup(work, size.walk_episodes)
        print(
            f"file walk {size.walk_episodes} episodes: {walk_s:.2f}s vs catalog {cat_s:.4f}s (same rows: {walk_same})"
        )
        cats = {"big": big, "small": small, "arrival": arrival}
        wide = {spec: full_table(spec, cats, n, work) for spec in ("full", "quality")}
        s3 = on_s3(big, wide["full"], work)
        load.append(round(os.getloadavg()[0], 2))
        emit(
            {
                "full_table": wide["full"],
                "quality_only": wide["quality"],
                "s3": s3,
                "side_file_bytes": side_file_bytes(big),
                "manifest_s": round(t_big, 3),
                "manifest_s_first_run": round(first_big, 3),
                "manifest_cpu_s": round(cpu_big, 3),
                "arrival_manifest_s": round(t_arrival, 3),
                "load_avg": load,
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
