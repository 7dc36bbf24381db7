"""Time to first batch: curation spec -> manifest -> dataset -> first batch on the host,
over a 1,000,000-row Delta catalog (rows point at the bench episodes).

The manifest is built here with polars straight from the Delta catalog (filter by the
spec, assign splits by a hash of the episode id, write the manifest Parquet), the way the
curation layer does it; robodata.catalog's manifest builder was not on main when this was
written.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from bench.loader_data import CAMS, FPS, PROPRIO, STATE_HZ, Episode
from robodata.catalog.schema import CATALOG_SCHEMA, MANIFEST_SCHEMA
from robodata.container import EpisodeReader

TASKS = ("fold_napkin", "pick_place", "wipe_table", "stack_cups")
SPEC = {"tasks": ["pick_place", "stack_cups"], "qc_status": "pass", "min_quality": 0.2, "val_fraction": 0.05}


def build_catalog(path: Path, eps: list[Episode], n: int) -> None:
    if (path / "_delta_log").exists():
        return
    from deltalake import write_deltalake

    tmp = path.with_name(path.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    info = []
    for e in eps:
        r = EpisodeReader.open(e.rdep)
        info.append((str(e.rdep.resolve()), r.meta.duration_s, os.path.getsize(e.rdep), r.footer_offset, r.footer_length,
                     r.layout_version))
        r.close()
    rng = np.random.default_rng(0)
    k = np.arange(n) % len(info)
    start = datetime(2026, 11, 1, tzinfo=timezone.utc)
    days = rng.integers(0, 30, n)
    rates = json.dumps({**{c: FPS for c in CAMS}, **{s: STATE_HZ for s in PROPRIO}}, sort_keys=True)
    day_str = np.array([(start + timedelta(days=int(d))).strftime("%Y-%m-%d") for d in range(30)])
    table = pa.table({
        "episode_id": pa.array([f"ep{i:08d}" for i in range(n)]),
        "uri": pa.array([info[j][0] for j in k]),
        "site": pa.array(np.array(["site-a", "site-b", "site-c"])[np.arange(n) % 3]),
        "robot": pa.array(np.array([f"robot-{r:02d}" for r in range(20)])[rng.integers(0, 20, n)]),
        "task": pa.array(np.array(TASKS)[rng.integers(0, len(TASKS), n)]),
        "vendor": pa.array(["inhouse"] * n),
        "start_time": pa.array([start + timedelta(days=int(d)) for d in days], pa.timestamp("us", tz="UTC")),
        "day": pa.array(day_str[days]),
        "duration_s": pa.array([info[j][1] for j in k]),
        "num_frames": pa.array(np.full(n, int(eps[0].n_frames), np.int32)),
        "num_state_steps": pa.array(np.full(n, int(eps[0].duration_s * STATE_HZ), np.int32)),
        "cameras": pa.array([list(CAMS)] * n, pa.list_(pa.string())),
        "stream_rates_json": pa.array([rates] * n),
        "success": pa.array(rng.random(n) > 0.2),
        "quality_score": pa.array(rng.random(n).astype(np.float32)),
        "qc_status": pa.array(np.where(rng.random(n) < 0.05, "quarantined", "pass")),
        "layout_version": pa.array([info[j][5] for j in k]),
        "ingest_batch": pa.array([f"batch-{d:03d}" for d in days]),
        "size_bytes": pa.array([info[j][2] for j in k], pa.int64()),
        "footer_offset": pa.array([info[j][3] for j in k], pa.int64()),
        "footer_length": pa.array([info[j][4] for j in k], pa.int64()),
    }, schema=CATALOG_SCHEMA)
    write_deltalake(str(tmp), table, partition_by=["day"])
    os.replace(tmp, path)


def manifest_from_spec(catalog: Path, spec: dict, out: Path) -> pa.Table:
    import polars as pl

    lf = pl.scan_delta(str(catalog)).filter(
        pl.col("task").is_in(spec["tasks"]) & (pl.col("qc_status") == spec["qc_status"])
        & (pl.col("quality_score") >= spec["min_quality"]))
    bucket = (pl.col("episode_id").hash(seed=0) % 10_000).cast(pl.Float64) / 10_000
    df = lf.with_columns(split=pl.when(bucket < spec["val_fraction"]).then(pl.lit("val")).otherwise(pl.lit("train")),
                         weight=pl.lit(1.0)).select(MANIFEST_SCHEMA.names).collect()
    table = df.to_arrow().cast(MANIFEST_SCHEMA)
    pq.write_table(table, out)
    return pq.read_table(out)


def first_batch_s(root: Path, eps: list[Episode], n_rows: int) -> dict:
    import torch  # noqa: F401  (import cost is not part of the path being measured)
    from torch.utils.data import DataLoader

    from robodata.cache import PageCache, PageCacheConfig
    from robodata.dataset import PatternDataset, PatternSampler, preset

    catalog = root / f"catalog_{n_rows}"
    t = time.perf_counter()
    build_catalog(catalog, eps, n_rows)
    build_s = time.perf_counter() - t
    cache_dir = root / "first_batch_cache"
    shutil.rmtree(cache_dir, ignore_errors=True)

    t0 = time.perf_counter()
    manifest = manifest_from_spec(catalog, SPEC, root / "manifest.parquet")
    t_manifest = time.perf_counter() - t0
    cache = PageCache(PageCacheConfig(root=str(cache_dir)))
    ds = PatternDataset(manifest, preset("vla"), cache=cache)
    sampler = PatternSampler(ds.index, seed=0, shuffle="block", block_size=8)
    t_dataset = time.perf_counter() - t0
    dl = DataLoader(ds, batch_size=32, sampler=sampler, num_workers=2)
    batch = next(iter(dl))
    total = time.perf_counter() - t0
    assert batch["cam_left"].shape[0] == 32
    return {"first_batch_s": round(total, 3),
            "first_batch_detail": {"catalog_rows": n_rows, "manifest_rows": manifest.num_rows, "samples": len(ds),
                                   "manifest_s": round(t_manifest, 3), "dataset_s": round(t_dataset - t_manifest, 3),
                                   "loader_s": round(total - t_dataset, 3), "catalog_build_s": round(build_s, 1)}}
