"""bench.robustness section "manifest": random catalogs x random specs round-trip through read_manifest.

Each case draws a small irregular catalog (list columns of different lengths and nulls, missing
start times, duplicate-looking ids) and a random valid spec (filters that drop rows, exclusions,
mixing, budgets, splits), evaluates it, writes the manifest and reads it back with verification.
Every `DELTA_EVERY`-th case goes through a real Delta catalog and `curate`, the path the v1
hash failed on. A round-trip failure is any case whose manifest does not read back verified with
the selected rows (including any exception).

    python -c "from bench.robustness_manifest import run; print(run('quick'))"
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa

from bench.common import BENCH_DIR
from robodata.catalog.rows import conform
from robodata.catalog.table import Catalog
from robodata.curate.manifest import read_manifest, write_manifest
from robodata.curate.run import curate
from robodata.curate.select import Selection, evaluate
from robodata.curate.spec import spec_from_dict

CASES = {"smoke": 20, "quick": 600, "full": 5000}
DELTA_EVERY = 25
CAMS = ["cam_left", "cam_right", "wrist", "top"]
TASKS = ["fold", "pick", "wipe"]
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def random_catalog(rng: random.Random, max_rows: int = 8) -> pa.Table:
    """A small irregular catalog (CATALOG_SCHEMA)."""
    rows = []
    for i in range(rng.randint(1, max_rows)):
        quarantined = rng.random() < 0.3
        start = None if quarantined and rng.random() < 0.5 else T0 + timedelta(hours=rng.randint(0, 24 * 5))
        rows.append(
            {
                "episode_id": f"ep-{rng.randint(0, 3)}{i}",
                "uri": f"s3://b/{i}",
                "site": rng.choice(["sfo-1", "aus-1"]),
                "robot": rng.choice(["r1", "r2", "r3"]),
                "task": rng.choice(TASKS),
                "start_time": start,
                "duration_s": rng.choice([0.0, rng.uniform(0, 500)]),
                "num_frames": rng.randint(0, 10_000),
                "cameras": None if rng.random() < 0.15 else rng.sample(CAMS, rng.randint(0, 4)),
                "success": rng.choice([None, True, False]),
                "quality_score": rng.random(),
                "qc_status": "quarantined" if quarantined else "pass",
                "ingest_batch": rng.choice(["b0", "b1"]),
                "size_bytes": rng.randint(0, 2**40),
            }
        )
    return conform(rows)


def random_filter(rng: random.Random, ids: list[str]) -> dict[str, Any]:
    days = ["2024-01-03", "2024-01-06"]
    choices: list[Callable[[], dict[str, Any]]] = [
        lambda: {"column": "cameras", "op": "contains", "value": rng.choice(CAMS)},
        lambda: {"column": "task", "op": "in", "value": rng.sample(TASKS, rng.randint(1, 3))},
        lambda: {"column": "quality_score", "op": ">=", "value": rng.random()},
        lambda: {"column": "duration_s", "op": "<", "value": rng.uniform(0, 600)},
        lambda: {"column": "qc_status", "op": "==", "value": "pass"},
        lambda: {"column": "success", "op": "==", "value": True},
        lambda: {"column": "cameras", "op": "not_null"},
        lambda: {"column": "day", "op": "between", "value": ["2024-01-02", rng.choice(days)]},
        lambda: {"column": "start_time", "op": "<", "value": "2024-01-04T12:00:00"},
        lambda: {"column": "episode_id", "op": "not_in", "value": rng.sample(ids, 1)},
    ]
    return rng.choice(choices)()


def random_spec(rng: random.Random, ids: list[str]) -> dict[str, Any]:
    """A random valid spec document over catalogs from `random_catalog`."""
    doc: dict[str, Any] = {
        "version": 1,
        "name": "robust",
        "filters": [random_filter(rng, ids) for _ in range(rng.randint(0, 3))],
    }
    doc["exclude"] = {"episode_ids": rng.sample(ids, rng.randint(0, min(3, len(ids))))}
    if rng.random() < 0.5:
        weights = {g: rng.choice([0.0, rng.uniform(0, 5)]) for g in rng.sample(TASKS + ["sfo-1"], rng.randint(0, 3))}
        doc["mix"] = {"by": rng.choice(["task", "site"]), "weights": weights, "default_weight": rng.choice([0.0, 1.0])}
        if rng.random() < 0.5:
            doc["budget"] = {"per_group_hours": {rng.choice(TASKS): rng.uniform(0.01, 1)}}
    if rng.random() < 0.4:
        doc.setdefault("budget", {})["total_hours"] = rng.uniform(0.01, 2)
    doc["split"] = {"val_fraction": rng.uniform(0, 0.9), "salt": rng.choice(["", "a", "robust"])}
    return doc


def round_trip(rows: pa.Table, doc: dict[str, Any], out: Path) -> bool:
    """True if the spec's manifest over `rows` (in memory) reads back verified with the selected rows."""
    spec = spec_from_dict(doc)
    df, groups = evaluate(spec, pl.DataFrame(rows).lazy())
    info = write_manifest(Selection(df, 1, spec.spec_hash(), groups), out, spec.name)
    return read_manifest(info.path).column("episode_id").to_pylist() == df["episode_id"].to_list()


def round_trip_delta(rows: pa.Table, doc: dict[str, Any], out: Path) -> bool:
    """The same through a Delta catalog and `curate`."""
    cat = Catalog(str(out / "cat"))
    cat.merge(rows)
    info, selection = curate(spec_from_dict(doc), cat, out / "m")
    return read_manifest(info.path).num_rows == selection.rows.height


def run(size: str) -> dict[str, Any]:
    rng = random.Random(16)
    cases = CASES[size]
    failures = 0
    BENCH_DIR.mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="robust-manifest-", dir=BENCH_DIR))
    try:
        for i in range(cases):
            rows = random_catalog(rng)
            doc = random_spec(rng, rows.column("episode_id").to_pylist())
            out = work / str(i)
            try:
                ok = round_trip_delta(rows, doc, out) if i % DELTA_EVERY == 0 else round_trip(rows, doc, out)
            except Exception as exc:  # any exception is a failed round trip
                print(f"manifest case {i}: {type(exc).__name__}: {exc}")
                ok = False
            failures += not ok
            shutil.rmtree(out, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return {"cases": cases, "roundtrip_failures": failures, "through_delta": len(range(0, cases, DELTA_EVERY))}
