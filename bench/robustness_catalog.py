"""bench.robustness section "catalog": concurrent writers merging overlapping ids into different days.

`WRITERS` processes (spawned: delta-rs runtime threads must not be forked) each merge `ROUNDS`
batches of the same `IDS` episode ids plus ids of their own; every writer and round puts the
shared episodes on other days (shifts of 0..400 days), and some rounds re-ingest a few as failed
conversions (no start time: the `unknown` day). After all writers finish, `duplicate_ids` counts
catalog rows beyond one per episode_id and `lost_ids` the episodes merged but absent.

    python -c "from bench.robustness_catalog import run; print(run('quick'))"
"""

from __future__ import annotations

import multiprocessing as mp
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

from bench.common import BENCH_DIR
from robodata.catalog.table import Catalog
from robodata_testing import synthetic_catalog as synthetic

SIZES = {"smoke": (3, 2, 40), "quick": (4, 4, 200), "full": (8, 8, 2000)}  # writers, rounds, shared ids
SHAPE = synthetic.FleetShape(rows_per_day=100)
OWN = 20  # ids only one writer merges, per round


def batch(writer: int, round_: int, shared: int, seed: int) -> pl.DataFrame:
    rng = random.Random(seed * 1000 + writer * 100 + round_)
    rows = pl.DataFrame(synthetic.rows(SHAPE, 0, shared))
    own = pl.DataFrame(synthetic.rows(SHAPE, 1_000_000 + (writer * 100 + round_) * OWN, OWN))
    shift = rng.choice([0, 1, 2, 7, 30, 400]) + writer
    rows = rows.with_columns(start_time=pl.col("start_time") + pl.duration(days=shift), day=pl.lit(None, pl.String))
    failed = pl.Series([rng.random() < 0.1 for _ in range(shared)])
    rows = rows.with_columns(
        start_time=pl.when(failed).then(None).otherwise(pl.col("start_time")),
        qc_status=pl.when(failed).then(pl.lit("quarantined")).otherwise(pl.col("qc_status")),
        ingest_batch=pl.lit(f"w{writer}-r{round_}"),
    )
    return pl.concat([rows, own.with_columns(ingest_batch=pl.lit(f"w{writer}-r{round_}"))])


def writer(uri: str, index: int, rounds: int, shared: int, seed: int) -> None:
    cat = Catalog(uri)
    for r in range(rounds):
        cat.merge(batch(index, r, shared, seed))


def run(size: str) -> dict[str, Any]:
    writers, rounds, shared = SIZES[size]
    BENCH_DIR.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="robust-catalog-", dir=BENCH_DIR))
    try:
        uri = str((work / "cat").resolve())
        Catalog(uri).create_if_missing()
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=writer, args=(uri, w, rounds, shared, 16)) for w in range(writers)]
        t0 = time.perf_counter()
        for p in procs:
            p.start()
        for p in procs:
            p.join(600)
        elapsed = time.perf_counter() - t0
        failed_writers = sum(p.exitcode != 0 for p in procs)
        df = pl.read_delta(uri)
        expected = shared + writers * rounds * OWN
        merges = sum(1 for h in Catalog(uri).table().history() if h["operation"] == "MERGE")
        return {
            "concurrent_writers": writers,
            "duplicate_ids": df.height - df["episode_id"].n_unique(),
            "lost_ids": expected - df["episode_id"].n_unique(),
            "failed_writers": failed_writers,
            "merges": merges,
            "seconds": round(elapsed, 1),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
