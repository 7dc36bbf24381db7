"""Deterministic synthetic catalog rows (benchmarks and tests; not a product module, so it lives here).

Row `i` always describes the same episode whatever the total size, and rows are laid
out day by day (`rows_per_day` episodes per day from `start_day`), so a catalog of 10x
the rows contains the smaller one as its first days: the same spec selects the same set.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, date, datetime

import numpy as np
import polars as pl
import pyarrow as pa

from robodata.catalog.schema import CATALOG_SCHEMA
from robodata.config import require

SITES = ("sfo-1", "sfo-2", "aus-1", "bos-1", "sea-1", "den-1", "chi-1", "nyc-1")
TASKS = ("fold_towel", "fold_shirt", "pick_place", "bin_sort", "box_pack", "wipe_table", "stack_cups", "hang_cloth")
VENDORS = ("acme", "kuka", "ufactory")
CAMERAS = ["cam_left", "cam_right", "wrist"]
RATES = json.dumps({"cam_left": 30.0, "cam_right": 30.0, "wrist": 30.0, "joint_pos": 100.0})


@dataclass(frozen=True)
class FleetShape:
    rows_per_day: int = 50_000
    robots_per_site: int = 40
    start_day: str = "2024-01-01"
    seed: int = 7
    batch_size: int = 10_000

    def __post_init__(self) -> None:
        require(self.rows_per_day > 0, "rows_per_day must be > 0")
        require(self.robots_per_site > 0, "robots_per_site must be > 0")
        require(self.batch_size > 0, "batch_size must be > 0")

    def day_of(self, index: int) -> str:
        d0 = date.fromisoformat(self.start_day).toordinal()
        return date.fromordinal(d0 + index // self.rows_per_day).isoformat()


def rows(shape: FleetShape, start: int, count: int) -> pa.Table:
    """Catalog rows start .. start+count-1 as a CATALOG_SCHEMA table."""
    idx = np.arange(start, start + count, dtype=np.int64)
    # Per-row attributes are a pure function of the index (hash-mixed), not of the batch.
    h = _mix(idx ^ shape.seed)
    site = (h % len(SITES)).astype(np.int32)
    task = ((h >> 8) % len(TASKS)).astype(np.int32)
    robot = ((h >> 16) % shape.robots_per_site).astype(np.int32)
    vendor = ((h >> 24) % len(VENDORS)).astype(np.int32)
    u = ((h >> 32) & 0xFFFF).astype(np.float64) / 65535.0
    v = ((h >> 48) & 0xFFFF).astype(np.float64) / 65535.0
    duration = 20.0 + 160.0 * u
    d0 = datetime.fromisoformat(shape.start_day).replace(tzinfo=UTC).timestamp()
    day_idx = idx // shape.rows_per_day
    within = (idx % shape.rows_per_day) * (86_000.0 / shape.rows_per_day)
    start_us = ((d0 + day_idx * 86_400 + within) * 1e6).astype(np.int64)
    df = pl.DataFrame(
        {
            "i": idx,
            "site_i": site,
            "task_i": task,
            "robot_i": robot,
            "vendor_i": vendor,
            "duration_s": duration,
            "quality_score": (0.5 + 0.5 * v).astype(np.float32),
            "success": v > 0.15,
            "start_us": start_us,
        }
    )

    def name(col: str, values: tuple[str, ...]) -> pl.Expr:
        return pl.col(col).replace_strict(dict(enumerate(values)), return_dtype=pl.String)

    out = df.select(
        episode_id=pl.format("ep-{}", pl.col("i").cast(pl.String).str.zfill(10)),
        uri=pl.format(
            "s3://robot-data/episodes/{}/ep-{}.rdep",
            pl.col("i") // 1_000_000,
            pl.col("i").cast(pl.String).str.zfill(10),
        ),
        site=name("site_i", SITES),
        robot=pl.format("{}-r{}", name("site_i", SITES), pl.col("robot_i").cast(pl.String).str.zfill(3)),
        task=name("task_i", TASKS),
        vendor=name("vendor_i", VENDORS),
        start_time=pl.from_epoch(pl.col("start_us"), time_unit="us").dt.replace_time_zone("UTC"),
        day=pl.from_epoch(pl.col("start_us"), time_unit="us").dt.strftime("%Y-%m-%d"),
        duration_s=pl.col("duration_s"),
        num_frames=(pl.col("duration_s") * 30).cast(pl.Int32),
        num_state_steps=(pl.col("duration_s") * 100).cast(pl.Int32),
        cameras=pl.lit(CAMERAS, dtype=pl.List(pl.String)),
        stream_rates_json=pl.lit(RATES),
        success=pl.col("success"),
        quality_score=pl.col("quality_score"),
        qc_status=pl.when(pl.col("quality_score") < 0.52).then(pl.lit("quarantined")).otherwise(pl.lit("pass")),
        layout_version=pl.lit("rdep1-3a9f"),
        ingest_batch=pl.format("batch-{}", pl.col("i") // shape.batch_size),
        size_bytes=(pl.col("duration_s") * 2_500_000).cast(pl.Int64),
        footer_offset=(pl.col("duration_s") * 2_500_000).cast(pl.Int64) - 65_536,
        footer_length=pl.lit(65_536, dtype=pl.Int64),
        robot_type=pl.when(pl.col("site_i") % 2 == 0).then(pl.lit("aloha")).otherwise(pl.lit("franka")),
        source_format=pl.lit("mcap"),
        source_dataset=pl.lit(""),
        state_dim=pl.when(pl.col("site_i") % 2 == 0).then(pl.lit(14)).otherwise(pl.lit(7)).cast(pl.Int32),
        action_dim=pl.when(pl.col("site_i") % 2 == 0).then(pl.lit(14)).otherwise(pl.lit(7)).cast(pl.Int32),
        state_names=pl.lit([], dtype=pl.List(pl.String)),
        action_names=pl.lit([], dtype=pl.List(pl.String)),
        control_hz=pl.when(pl.col("site_i") % 2 == 0).then(pl.lit(50.0)).otherwise(pl.lit(100.0)),
        language=pl.when(pl.col("task_i") % 2 == 0).then(name("task_i", TASKS)).otherwise(pl.lit("")),
        qc_failed=pl.lit([], dtype=pl.List(pl.String)),
        qc_reason=pl.lit(""),
        streams=pl.lit(sorted(json.loads(RATES)), dtype=pl.List(pl.String)),
    )
    table = out.to_arrow()
    cols = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
        for f in CATALOG_SCHEMA
    ]  # columns this generator does not model are null
    return pa.Table.from_arrays(cols, schema=CATALOG_SCHEMA)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a stable, well-spread hash of each index."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))
