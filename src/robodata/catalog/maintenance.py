"""Catalog maintenance: compaction, and each day laid out in the budget order.

`optimize` rewrites the chosen days (all if none):

* **Compaction**: each day's files (one per merge) become one file per day (up to
  `target_size_bytes`; ~50k episodes a day are a few MiB).
* **The budget order**: the day's rows sorted by `cluster_by` (default `budget_hash`, then
  episode_id) in row groups of up to `row_group_rows` (2Ki: ~25 a day at ~50k episodes a day).
  A budgeted spec keeps, in each capped group, a prefix of that order, so its reads stop at a
  threshold of `budget_hash` and each row group's min/max statistics (Parquet's) tell Polars which
  row groups lie under it (robodata.curate.ordered): the bench's full-table spec reads the first
  three row groups of each day at 5M rows, the first at 50M. Smaller row groups waste less past
  the threshold but cost more per file (footer and per-row-group decoding), larger ones the other
  way round; sorting by the spec's group column first (task, then budget_hash) was measured too
  (docs/curation.md, decision record).
  Every merge and every rewrite computes `budget_hash` from the ids with the table's salt
  (robodata.catalog.order); `split_salt` changes it: the new salt is recorded as not complete,
  every day is rewritten, then it is marked complete (a run cut short leaves it not complete, and
  the next run rewrites every day again).
* **Light compression**: LZ4 pages (`compression`), which decode faster than ZSTD's for about
  50 % more bytes (ingestion's merges write ZSTD).
* **Side files of earlier layouts**: the row sidecars and heads that curation kept beside the
  table before issue 38 (`_robodata_sidecars/`) are removed (once: they are not written any more).

The rewrite of a group of days is one Delta commit (`overwrite` with a `day IN (...)` predicate)
carrying the merge lock (robodata.catalog.identity.locked_commit): a merge that commits in
between makes it fail, and it is redone on the new version, so no merged row is lost. Nothing is
deleted: the old files leave the table in that commit only (older versions, which pinned specs and
manifests name, still read them); `vacuum` is not run here. A checkpoint follows.

Entry points: `robodata catalog optimize` (robodata.catalog.commands) and `optimize` here (which
the scheduled compaction job calls); the table (robodata.catalog.table) never imports this module.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import polars as pl
import pyarrow as pa
from deltalake import DeltaTable, WriterProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError

from robodata.catalog import order
from robodata.catalog.identity import locked_commit
from robodata.catalog.rows import CatalogError
from robodata.catalog.schema import CATALOG_SCHEMA
from robodata.config import require

if TYPE_CHECKING:
    from robodata.catalog.table import Catalog

CLUSTER_BY = (order.COLUMN,)
SIDE_FILES = "_robodata_sidecars"  # the folder of the sidecars and heads of earlier layouts
_CODECS = ("LZ4_RAW", "ZSTD", "SNAPPY", "UNCOMPRESSED")
_DAY = re.compile(r"^(\d{4}-\d{2}-\d{2}|unknown)$")


@dataclass
class OptimizeConfig:
    """How `optimize` lays out a day: sort columns, row group and file sizes, rows per commit, salt."""

    cluster_by: list[str] = field(default_factory=lambda: list(CLUSTER_BY))
    row_group_rows: int = 2048  # ~25 row groups a day at ~50k episodes a day (module docstring)
    compression: str = "LZ4_RAW"  # Parquet codec of the rewritten files (ZSTD: smaller, slower to decode)
    # the `split.salt` of the specs this catalog mostly serves (their budget order is `budget_hash`);
    # None keeps the table's
    split_salt: str | None = None
    target_size_bytes: int = 128 * 1024 * 1024
    rows_per_commit: int = 1_000_000  # days are rewritten in groups of about this many rows
    max_attempts: int = 20  # per group, when merges keep committing in between

    def __post_init__(self) -> None:
        require(len(self.cluster_by) > 0, "cluster_by must name at least one column")
        for name in self.cluster_by:
            require(name in CATALOG_SCHEMA.names, f"cluster_by: {name!r} is not a catalog column")
            require(name != "day", "cluster_by: `day` is the partition column")
            kind = CATALOG_SCHEMA.field(name).type
            require(not pa.types.is_list(kind), f"cluster_by: {name!r} is a list column")
        require(256 <= self.row_group_rows <= 1 << 20, "row_group_rows must be in [256, 1048576]")
        require(self.target_size_bytes >= 1 << 20, "target_size_bytes must be at least 1 MiB")
        require(self.compression in _CODECS, f"compression must be one of {list(_CODECS)}, got {self.compression!r}")
        require(self.rows_per_commit >= 1, "rows_per_commit must be >= 1")
        require(self.max_attempts >= 1, "max_attempts must be >= 1")
        require(self.split_salt is None or isinstance(self.split_salt, str), "split_salt must be a string")


def writer_properties(config: OptimizeConfig) -> WriterProperties:
    level = 3 if config.compression == "ZSTD" else None
    return WriterProperties(
        compression=config.compression,  # type: ignore[arg-type]
        compression_level=level,
        max_row_group_size=config.row_group_rows,
    )


def optimize(catalog: Catalog, days: list[str] | None = None, config: OptimizeConfig | None = None) -> dict[str, Any]:
    """Compact the given days of the catalog (all days if None) in the budget order, then checkpoint.

    Args:
        catalog: the catalog to rewrite (created already).
        days: partition values (YYYY-MM-DD or "unknown") to rewrite; None rewrites every day, and so
            does a salt change or a table whose hashes are not complete.
        config: the layout (default OptimizeConfig()).

    Returns:
        {numFilesRemoved, numFilesAdded, rows, days, commits, version, splitSalt, sideFilesRemoved}.

    Raises:
        ConfigError: a day is not YYYY-MM-DD or "unknown".
        CatalogError: the catalog cannot be read, the rewrite failed, or merges kept committing in
            between for `max_attempts` attempts.
    """
    config = config or OptimizeConfig()
    for d in days or []:
        require(isinstance(d, str) and bool(_DAY.match(d)), f"day {d!r} is not YYYY-MM-DD or 'unknown'")
    totals = {"numFilesRemoved": 0, "numFilesAdded": 0, "rows": 0, "days": 0, "commits": 0}
    try:
        catalog.migrate(catalog.table())  # a table from before a column or the budget order
        salt = _record_salt(catalog, config)
        complete = order.ordered_salt(catalog.table()) == salt
        for group in _groups(catalog.table(), days if complete else None, config.rows_per_commit):
            removed, added, rows = _rewrite(catalog, group, config)
            totals["numFilesRemoved"] += removed
            totals["numFilesAdded"] += added
            totals["rows"] += rows
            totals["days"] += len(group)
            totals["commits"] += 1
        if not complete:
            _set_budget(catalog, {order.COMPLETE_KEY: "true"}, salt, config.max_attempts)
        dt = catalog.table()
        dt.create_checkpoint()
    except DeltaError as exc:
        raise CatalogError(f"optimizing catalog {catalog.uri} failed: {exc}") from exc
    removed = _drop_side_files(dt.table_uri)
    return {**totals, "version": dt.version(), "splitSalt": salt, "sideFilesRemoved": removed}


def _record_salt(catalog: Catalog, config: OptimizeConfig) -> str:
    """The table's salt; a new one (config.split_salt) is recorded first, as not complete."""
    current = order.table_salt(catalog.table()) or ""
    if config.split_salt is None or config.split_salt == current:
        return current
    _set_budget(catalog, order.metadata(config.split_salt, complete=False), None, config.max_attempts)
    return config.split_salt


def _set_budget(catalog: Catalog, meta: dict[str, str], salt: str | None, attempts: int) -> None:
    """Record the budget order's metadata (robodata.catalog.order) under the merge lock (a merge
    planned before it is redone after); `salt`: only while the table's salt is still this one."""
    last: Exception | None = None
    for _ in range(attempts):
        dt = catalog.table()
        if salt is not None and order.table_salt(dt) != salt:
            return  # another salt was recorded meanwhile: its own run completes it
        try:
            dt.alter.set_column_metadata(order.COLUMN, meta, commit_properties=locked_commit(dt.version()))
            return
        except CommitFailedError as exc:
            last = exc
    raise CatalogError(f"catalog {catalog.uri}: merges kept committing while recording {meta}: {last}")


def _drop_side_files(table_uri: str) -> int:
    """Remove the side files of earlier layouts beside a local table; how many there were."""
    parsed = urlparse(table_uri)
    if parsed.scheme not in ("", "file"):
        return 0  # never written on object storage
    folder = Path(unquote(parsed.path) if parsed.scheme else table_uri) / SIDE_FILES
    if not folder.is_dir():
        return 0
    count = sum(1 for p in folder.rglob("*") if p.is_file())
    shutil.rmtree(folder, ignore_errors=True)
    return count


def _files(dt: DeltaTable) -> tuple[list[str], list[int]]:
    actions = dt.get_add_actions(flatten=True)
    days = [str(d) for d in actions.column("partition.day").to_pylist()]
    return days, [int(n or 0) for n in actions.column("num_records").to_pylist()]


def _groups(dt: DeltaTable, days: list[str] | None, rows_per_commit: int) -> list[list[str]]:
    """The days to rewrite (those present in the table), in groups of about `rows_per_commit` rows."""
    per_day: dict[str, int] = {}
    for day, rows in zip(*_files(dt), strict=True):
        per_day[day] = per_day.get(day, 0) + rows
    wanted = sorted(per_day) if days is None else sorted(set(days) & set(per_day))
    groups: list[list[str]] = []
    size = 0
    for day in wanted:
        if not groups or size + per_day[day] > rows_per_commit:
            groups.append([])
            size = 0
        groups[-1].append(day)
        size += per_day[day]
    return groups


def _rewrite(catalog: Catalog, days: list[str], config: OptimizeConfig) -> tuple[int, int, int]:
    """Rewrite `days` in one commit, budget_hash computed anew and sorted by the cluster columns:
    (files removed, added, rows)."""
    last: Exception | None = None
    for _ in range(config.max_attempts):
        dt = catalog.table()
        version = dt.version()
        removed = sum(1 for day in _files(dt)[0] if day in days)
        rows = pl.scan_delta(dt).filter(pl.col("day").is_in(days)).collect()
        # the table's own column order (a migrated table has its added columns in the order they came)
        schema = pa.schema([CATALOG_SCHEMA.field(n) for n in rows.columns])
        table = order.with_budget_hash(rows.to_arrow().cast(schema), order.table_salt(dt) or "")
        rows = pl.DataFrame(table).sort([*config.cluster_by, "episode_id"], nulls_last=True)
        try:
            write_deltalake(
                dt,
                rows.to_arrow().cast(schema),
                mode="overwrite",
                predicate="day IN (" + ", ".join(f"'{d}'" for d in days) + ")",
                target_file_size=config.target_size_bytes,
                writer_properties=writer_properties(config),
                commit_properties=locked_commit(version),
            )
        except CommitFailedError as exc:  # a merge committed in between: redo on its version
            last = exc
            continue
        after = catalog.table()
        added = sum(1 for day in _files(after)[0] if day in days)
        return removed, added, rows.height
    raise CatalogError(f"optimizing days {days[0]}..{days[-1]}: merges kept committing in between: {last}")
