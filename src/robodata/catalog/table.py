"""The episode catalog: one Delta Lake row per episode (CATALOG_SCHEMA), keyed by episode_id.

Layout (chosen so that selective curation queries read little of a 50M-row table):

* **Partitioned by `day`** (UTC date of `start_time`). The catalog grows by appending
  new days, ingestion batches land in a handful of recent days, and curation specs are
  almost always bounded in time. A query for one month of a three-year catalog opens
  ~3% of the partitions, and the partition directory is resolved from the Delta log
  alone (no file listing, no data read). Merges name the day in their predicate
  (`t.day = s.day AND t.episode_id = s.episode_id`), so delta-rs rewrites only files of
  the days present in the batch (and of the days its episodes left).
* **Clustered within each day on the filter columns** (task, qc_status, success, site, robot)
  by `optimize()` (robodata.catalog.maintenance), in row groups of up to 128Ki rows (one a day
  at ~50k episodes a day): the Delta log keeps per-file min/max statistics of every column, and
  Parquet keeps them per row group, so filters on those columns skip files and row groups.
* **Target file size 128 MiB** for compaction (`delta.targetFileSize`), ZSTD pages.
  A day of a large fleet (~50k episodes) is a few MiB, so one file per day after
  compaction; merges leave small files that `optimize()` folds back.
* Checkpoints every 50 commits (`delta.checkpointInterval`), so opening the table
  replays at most 50 JSON commits on top of one Parquet checkpoint, whatever its age.
* **The budget order** (robodata.catalog.order): every write computes `budget_hash` from the
  episode ids and the salt the table records (the column's metadata: `""` at creation; `optimize`
  changes it), and `optimize` sorts each day by it, so a budgeted spec reads only the first row
  groups of each day (robodata.curate.ordered).

Writes are idempotent merges (`when_matched_update_all` / `when_not_matched_insert_all`):
re-ingesting a batch updates rows instead of duplicating them. `episode_id` is unique in the
table under concurrent writers and any change of an episode's day (robodata.catalog.identity):
each merge looks its ids up in every day, deletes copies in other days in the same commit
(tombstone source rows), and commits under the merge lock (a Delta app transaction every merge
carries, so delta-rs fails the second of two concurrent merges with `CommitFailedError`); the
loser re-runs lookup and merge on the new table version, with jittered backoff. So concurrent
batch writers never lose a row and never duplicate one, and the row that stays is the latest
merge's, except that a row without a container (a re-ingest that failed before conversion)
never replaces a row that has one (curation reads `pass` rows). `backfill` is a blind append outside
the lock, for ids known to be absent. On S3 the object store must provide atomic put-if-absent
(pass `{"aws_conditional_put": "etag"}` or a locking provider in storage_options).
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
import time
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pyarrow as pa
from deltalake import CommitProperties, DeltaTable, Schema, WriterProperties, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError

from robodata.catalog import order
from robodata.catalog.identity import (
    DROP,
    current_days,
    locked_commit,
    stale_copies,
    superseded,
    with_tombstones,
    without_demotions,
)
from robodata.catalog.order import table_salt, with_budget_hash
from robodata.catalog.rows import CatalogError, conform
from robodata.catalog.schema import CATALOG_SCHEMA
from robodata.config import require

PARTITION_BY = ["day"]
TABLE_CONFIGURATION = {
    "delta.targetFileSize": str(128 * 1024 * 1024),
    "delta.checkpointInterval": "50",
    "delta.dataSkippingNumIndexedCols": str(len(CATALOG_SCHEMA)),
}
MERGE_PREDICATE = "t.day = s.day AND t.episode_id = s.episode_id"  # stale days come as tombstones


def writer_properties() -> WriterProperties:
    return WriterProperties(compression="ZSTD", compression_level=3, max_row_group_size=128 * 1024)


@dataclass
class CatalogConfig:
    uri: str
    storage_options: dict[str, str] = field(default_factory=dict)
    max_attempts: int = 60  # merge attempts before giving up on commit conflicts
    backoff_s: float = 0.05  # first backoff; doubles up to max_backoff_s, jittered
    max_backoff_s: float = 2.0

    def __post_init__(self) -> None:
        require(bool(self.uri), "catalog uri must not be empty")
        require(self.max_attempts >= 1, f"max_attempts must be >= 1, got {self.max_attempts}")
        require(self.backoff_s >= 0 and self.max_backoff_s >= self.backoff_s, "bad backoff settings")


@dataclass(frozen=True)
class MergeResult:
    version: int
    inserted: int
    updated: int
    attempts: int
    moved: int = 0  # stale rows of these episodes deleted from the day(s) they left
    not_demoted: int = 0  # rows without a container skipped: their episode has a row with one


class Catalog:
    """Handle on the episode catalog Delta table (created on first write)."""

    def __init__(self, config: CatalogConfig | str):
        self.config = config if isinstance(config, CatalogConfig) else CatalogConfig(uri=str(config))

    @property
    def uri(self) -> str:
        return self.config.uri

    # -- reading ---------------------------------------------------------------------

    def exists(self) -> bool:
        try:
            self._open()
        except CatalogError:
            return False
        return True

    def table(self, version: int | None = None) -> DeltaTable:
        return self._open(version)

    def version(self) -> int:
        return self._open().version()

    def scan(self, version: int | None = None) -> tuple[pl.LazyFrame, int]:
        """A lazy Polars scan of the catalog at `version` (latest if None), and that version.

        Predicates on `day` prune partitions from the Delta log; other predicates use
        the log's per-file and Parquet's per-row-group statistics.
        """
        dt = self._open(version)
        return pl.scan_delta(dt), dt.version()

    # -- writing ---------------------------------------------------------------------

    def create_if_missing(self) -> DeltaTable:
        """Open the table for writing (migrated to CATALOG_SCHEMA: see `migrate`), or create it."""
        try:
            return self.migrate(self._open())
        except CatalogError:
            if self.exists():
                raise

        # A concurrent writer may create it first; opening below tells.
        with contextlib.suppress(CommitFailedError, DeltaError):
            at = CATALOG_SCHEMA.get_field_index(order.COLUMN)
            DeltaTable.create(
                self.uri,
                CATALOG_SCHEMA.set(at, order.field("", complete=True)),  # the salt it records
                mode="ignore",
                partition_by=PARTITION_BY,
                name="robodata_catalog",
                configuration=TABLE_CONFIGURATION,
                storage_options=self.config.storage_options or None,
            )
        return self._open()

    def merge(self, rows: Any, supersede: list[str] | None = None) -> MergeResult:
        """Upsert rows by episode_id, keeping one row per episode (robodata.catalog.identity).

        Args:
            rows: catalog rows (a pyarrow Table / RecordBatch, a Polars DataFrame, or dicts).
            supersede: ids of rows without a container (quarantine rows) that these rows replace,
                deleted in the same commit (a landing item quarantined under its landing id, now
                ingested whole under the id its recording names).

        Returns:
            MergeResult: the new table version, rows inserted / updated, copies moved out of
            other days, rows without a container that did not replace a row with one, and the
            attempts it took (merges from one version conflict and re-run).

        Raises:
            CatalogError: the rows are invalid (nothing is written), the table cannot be
                written, or commits kept conflicting for `max_attempts` attempts.
        """
        source = conform(rows)
        if source.num_rows == 0:
            return MergeResult(self.create_if_missing().version(), 0, 0, 0)
        delay = self.config.backoff_s
        last: Exception | None = None
        for attempt in range(1, self.config.max_attempts + 1):
            dt = self.create_if_missing()
            try:
                ids = source.column("episode_id").to_pylist()
                found = current_days(dt, ids + list(supersede or []))
                rows_in, not_demoted = without_demotions(with_budget_hash(source, _salt(dt)), found)
                if rows_in.num_rows == 0:
                    return MergeResult(dt.version(), 0, 0, attempt, not_demoted=not_demoted)
                merge_source = with_tombstones(rows_in, stale_copies(found, rows_in))
                if supersede:
                    merge_source = pa.concat_tables([merge_source, superseded(found, supersede, rows_in)])
                metrics = (
                    dt.merge(
                        merge_source,
                        MERGE_PREDICATE,
                        source_alias="s",
                        target_alias="t",
                        writer_properties=writer_properties(),
                        streamed_exec=False,  # lets delta-rs prune target days from source stats
                        commit_properties=locked_commit(dt.version()),
                    )
                    .when_matched_delete(f"s.{DROP}")
                    .when_matched_update_all(f"NOT s.{DROP}", except_cols=[DROP])
                    .when_not_matched_insert_all(f"NOT s.{DROP}", except_cols=[DROP])
                    .execute()
                )
            except CommitFailedError as exc:  # logical conflict: re-run on the new version
                last = exc
                time.sleep(random.uniform(0, delay))
                delay = min(delay * 2, self.config.max_backoff_s)
                continue
            except DeltaError as exc:
                raise CatalogError(f"merge into catalog {self.uri} failed: {exc}") from exc
            dt.update_incremental()
            return MergeResult(
                version=dt.version(),
                inserted=int(metrics.get("num_target_rows_inserted", 0)),
                updated=int(metrics.get("num_target_rows_updated", 0)),
                attempts=attempt,
                moved=int(metrics.get("num_target_rows_deleted", 0)),
                not_demoted=not_demoted,
            )
        raise CatalogError(
            f"merge into catalog {self.uri} still conflicting after {self.config.max_attempts} attempts: {last}"
        )

    def missing_columns(self, dt: DeltaTable | None = None) -> list[str]:
        """CATALOG_SCHEMA columns the table at hand lacks (an older table)."""
        have = set((dt or self._open()).schema().to_arrow().names)
        return [f.name for f in CATALOG_SCHEMA if f.name not in have]

    def migrate(self, dt: DeltaTable) -> DeltaTable:
        """Schema migration: add every CATALOG_SCHEMA column the table lacks (Delta schema evolution;
        existing rows read them as nulls); a table from before the budget order records salt "",
        its hashes not complete (`optimize` computes them). Idempotent; a concurrent migration is
        retried by re-opening."""
        missing = self.missing_columns(dt)
        complete = not dt.file_uris()
        if missing:
            fields = [order.field("", complete) if n == order.COLUMN else CATALOG_SCHEMA.field(n) for n in missing]
            dt = self._alter(dt, lambda: dt.alter.add_columns(Schema.from_arrow(pa.schema(fields)).fields))
        if table_salt(dt) is None:  # the column without its salt (a table written outside Catalog)
            dt = self._alter(dt, lambda: dt.alter.set_column_metadata(order.COLUMN, order.metadata("", complete)))
        return dt

    def _alter(self, dt: DeltaTable, change: Any) -> DeltaTable:
        """`change` (a migration's commit), accepted when a concurrent migration made it first."""
        try:
            change()
        except (CommitFailedError, DeltaError) as exc:
            dt = self._open()
            if self.missing_columns(dt) or table_salt(dt) is None:
                raise CatalogError(f"catalog {self.uri}: cannot migrate to CATALOG_SCHEMA: {exc}") from exc
            return dt
        dt.update_incremental()
        return dt

    def backfill(self, rows: Any) -> int:
        """Blind append of rows whose episode ids are known to be absent (bulk migration).

        No key check: use `merge` for anything that might be re-delivered.
        Returns the new table version.
        """
        source = conform(rows)
        dt = self.create_if_missing()
        write_deltalake(
            dt,
            with_budget_hash(source, _salt(dt)),
            mode="append",
            writer_properties=writer_properties(),
            commit_properties=CommitProperties(max_commit_retries=100),
        )
        dt.update_incremental()
        return dt.version()

    def checkpoint(self) -> None:
        self._open().create_checkpoint()

    # -- internals -------------------------------------------------------------------

    def _open(self, version: int | None = None) -> DeltaTable:
        try:
            return DeltaTable(self.uri, version=version, storage_options=self.config.storage_options or None)
        except TableNotFoundError as exc:
            raise CatalogError(f"no catalog table at {self.uri}") from exc
        except DeltaError as exc:
            where = f" at version {version}" if version is not None else ""
            raise CatalogError(f"cannot open catalog {self.uri}{where}: {exc}") from exc


def _salt(dt: DeltaTable) -> str:
    """The split salt of the table's budget order (recorded by create_if_missing / migrate)."""
    return table_salt(dt) or ""


def merge_episodes(
    uri: str, rows: Any, storage_options: dict[str, str] | None = None, supersede: list[str] | None = None
) -> dict[str, int]:
    """Merge catalog rows into the catalog at `uri` (ingestion's entry point; `supersede`: Catalog.merge)."""
    result = Catalog(CatalogConfig(uri=uri, storage_options=dict(storage_options or {}))).merge(rows, supersede)
    return dataclasses.asdict(result)
