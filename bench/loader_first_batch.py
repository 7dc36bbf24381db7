"""Time to first batch: curation spec -> manifest -> dataset -> first batch on the host,
over a 1,000,000-row Delta catalog (rows point at the bench episodes).

The spec is evaluated by the curation layer (`robodata.curate.run.curate`: filters, mix,
split, content-addressed manifest Parquet), the manifest is read back with its content
hash verified, and the dataset + loader take it from there.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl  # noqa: F401  imported up front, like torch: library import time is not part of the path
import pyarrow as pa

from bench.loader_data import CAMS, FPS, PROPRIO, STATE_HZ, Episode
from robodata.catalog.rows import conform
from robodata.catalog.schema import CATALOG_SCHEMA
from robodata.config import from_dict
from robodata.container import EpisodeReader

TASKS = ("fold_napkin", "pick_place", "wipe_table", "stack_cups")
SPEC = {
    "version": 1,
    "name": "bench-vla",
    "filters": [
        {"column": "task", "op": "in", "value": ["pick_place", "stack_cups"]},
        {"column": "qc_status", "op": "==", "value": "pass"},
        {"column": "quality_score", "op": ">=", "value": 0.2},
    ],
    "mix": {"by": "task", "weights": {"pick_place": 2, "stack_cups": 1}},
    "split": {"val_fraction": 0.05, "salt": "bench"},
}


def build_catalog(path: Path, eps: list[Episode], n: int) -> None:
    if (path / "_delta_log").exists():
        return
    from deltalake import write_deltalake

    tmp = path.with_name(path.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    info = []
    for e in eps:
        r = EpisodeReader.open(e.rdep)
        info.append(
            (
                str(e.rdep.resolve()),
                r.meta.duration_s,
                os.path.getsize(e.rdep),
                r.footer_offset,
                r.footer_length,
                r.layout_version,
            )
        )
        r.close()
    rng = np.random.default_rng(0)
    k = np.arange(n) % len(info)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    days = rng.integers(0, 30, n)
    rates = json.dumps({**{c: FPS for c in CAMS}, **{s: STATE_HZ for s in PROPRIO}}, sort_keys=True)
    day_str = np.array([(start + timedelta(days=int(d))).strftime("%Y-%m-%d") for d in range(30)])
    columns = {
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
    }
    # the facts this bench does not model (QC reasons, mixing facts) are null, as in an older catalog
    table = conform(pa.table(columns, schema=pa.schema([CATALOG_SCHEMA.field(c) for c in columns])))
    write_deltalake(str(tmp), table, partition_by=["day"])
    os.replace(tmp, path)


def manifest_from_spec(catalog: Path, spec: dict, out: Path) -> pa.Table:
    from robodata.curate.manifest import read_manifest
    from robodata.curate.run import curate
    from robodata.curate.spec import CurationSpec

    info, _ = curate(from_dict(CurationSpec, spec), str(catalog), out)
    return read_manifest(info.path, verify=True)


def first_batch_s(root: Path, eps: list[Episode], n_rows: int) -> dict:
    import torch  # noqa: F401  (import cost is not part of the path being measured)

    from robodata.cache import PageCache, PageCacheConfig
    from robodata.dataset import DatasetConfig, LoaderConfig, PatternDataset, PatternLoader, PatternSampler, preset

    catalog = root / f"catalog_{n_rows}"
    t = time.perf_counter()
    build_catalog(catalog, eps, n_rows)
    build_s = time.perf_counter() - t
    cache_dir = root / "first_batch_cache"
    shutil.rmtree(cache_dir, ignore_errors=True)
    shutil.rmtree(root / "manifests", ignore_errors=True)  # the manifest is written, not reused

    t0 = time.perf_counter()
    manifest = manifest_from_spec(catalog, SPEC, root / "manifests")
    t_manifest = time.perf_counter() - t0
    cache = PageCache(PageCacheConfig(root=str(cache_dir)))
    # the catalog's 1M rows share the bench's few containers: ids differ from their footers'
    ds = PatternDataset(manifest, preset("vla"), cache=cache, config=DatasetConfig(check_episode_ids=False))
    sampler = PatternSampler(ds.index, seed=0, shuffle="block", block_size=8)
    t_dataset = time.perf_counter() - t0
    loader = PatternLoader(ds, sampler, LoaderConfig(batch_size=32, num_workers=2))
    batch = next(iter(loader))
    total = time.perf_counter() - t0
    assert batch["cam_left"].shape[0] == 32
    return {
        "first_batch_s": round(total, 3),
        "first_batch_detail": {
            "catalog_rows": n_rows,
            "manifest_rows": manifest.num_rows,
            "samples": len(ds),
            "manifest_s": round(t_manifest, 3),
            "dataset_s": round(t_dataset - t_manifest, 3),
            "loader_s": round(total - t_dataset, 3),
            "catalog_build_s": round(build_s, 1),
        },
    }
