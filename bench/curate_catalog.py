"""Synthetic catalogs for bench.curate, generated in batches and cached under .bench/.

A catalog of N rows is keyed by (N, fleet shape, generator version); generation writes
batches of BATCH rows (bounded memory whatever N) and marks completion with a file, so
an interrupted generation is redone rather than half-used.

Two states of each: `ensure_catalog` as ingestion leaves it (one file per day and batch, arrival
order), and `ensure_optimized`, a copy as the maintenance job (`robodata catalog optimize`,
robodata.catalog.maintenance) leaves it: compacted, sorted by budget_hash for the specs' salt, LZ4
pages.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import polars as pl

from bench.common import BENCH_DIR
from robodata.catalog.maintenance import OptimizeConfig, optimize
from robodata.catalog.table import Catalog
from robodata_testing import synthetic_catalog as synthetic

GENERATOR_VERSION = 2  # 2: rows carry budget_hash (robodata.catalog.order)
OPTIMIZE_VERSION = 9  # bump when robodata.catalog.maintenance's layout changes (9: the budget order)
# The bench specs' split.salt. The optimized catalogs are in its budget order (OptimizeConfig.split_salt),
# as a deployment's compaction job is configured with the salt of the specs it serves.
SPLIT_SALT = "bench"
BATCH = 500_000


def catalog_path(n_rows: int, shape: synthetic.FleetShape) -> Path:
    key = (
        f"n{n_rows}-d{shape.rows_per_day}-r{shape.robots_per_site}-{shape.start_day}-s{shape.seed}-g{GENERATOR_VERSION}"
    )
    return BENCH_DIR / "curate" / f"catalog-{key}"


def ensure_catalog(n_rows: int, shape: synthetic.FleetShape, log=print) -> Catalog:
    path = catalog_path(n_rows, shape)
    done = path / ".complete"
    if done.exists():
        return Catalog(str(path.resolve()))
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    catalog = Catalog(str(path.resolve()))
    t0 = time.perf_counter()
    for start in range(0, n_rows, BATCH):
        batch = synthetic.rows(shape, start, min(BATCH, n_rows - start))
        # Each day's file by (site, task, robot): the arrival layout the pinned hashes were taken on.
        batch = pl.DataFrame(batch).sort(["day", "site", "task", "robot"]).to_arrow()
        catalog.backfill(batch)
        if (start // BATCH) % 10 == 9:
            log(f"  catalog {path.name}: {start + BATCH:,}/{n_rows:,} rows, {time.perf_counter() - t0:.0f}s")
    catalog.checkpoint()
    done.write_text("ok\n")
    return catalog


def ensure_optimized(n_rows: int, shape: synthetic.FleetShape, log=print) -> Catalog:
    """The catalog of `ensure_catalog` after `optimize` (robodata.catalog.maintenance) for the specs'
    salt (cached beside it, `-opt` suffix)."""
    source = ensure_catalog(n_rows, shape, log)
    path = catalog_path(n_rows, shape).with_name(catalog_path(n_rows, shape).name + f"-opt{OPTIMIZE_VERSION}")
    done = path / ".complete"
    if done.exists():
        return Catalog(str(path.resolve()))
    shutil.rmtree(path, ignore_errors=True)
    shutil.copytree(Path(source.uri), path)
    (path / ".complete").unlink()
    catalog = Catalog(str(path.resolve()))
    t0 = time.perf_counter()
    metrics = optimize(catalog, None, OptimizeConfig(split_salt=SPLIT_SALT))
    log(f"  optimized {path.name} in {time.perf_counter() - t0:.0f}s: {metrics}")
    done.write_text("ok\n")
    return catalog
