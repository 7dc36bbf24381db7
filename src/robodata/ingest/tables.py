"""Delta tables for per-episode facts (never Dagster events): replace-by-batch and merge-by-key.

Every ingestion stage writes its rows for one batch with `replace_batch`, so re-running a
stage for a batch (re-execution, backfill) replaces its rows instead of duplicating them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from robodata.errors import RobodataError


def _lit(v: str) -> str:
    return "'" + str(v).replace("'", "''") + "'"


def exists(path: str | os.PathLike[str]) -> bool:
    return DeltaTable.is_deltatable(str(path))


def replace_batch(path: str | os.PathLike[str], table: pa.Table, batch: str, column: str = "batch",
                  where: dict[str, str] | None = None) -> None:
    """Rows of `batch` (and `where` column values) at `path` become exactly `table`.

    The table is created partitioned by the batch column.
    """
    path = str(path)
    if table.num_rows and set(table.column(column).to_pylist()) != {batch}:
        raise RobodataError(f"{path}: rows for batch {batch!r} carry other {column} values")
    pred = " AND ".join(f"{k} = {_lit(v)}" for k, v in {column: batch, **(where or {})}.items())
    if not exists(path):
        Path(path).mkdir(parents=True, exist_ok=True)
        write_deltalake(path, table, mode="append", partition_by=[column])
        return
    if table.num_rows == 0:
        DeltaTable(path).delete(pred)
        return
    write_deltalake(path, table, mode="overwrite", predicate=pred, schema_mode="merge")


def read_batch(path: str | os.PathLike[str], batch: str, columns: list[str] | None = None,
               column: str = "batch") -> pa.Table:
    if not exists(path):
        raise RobodataError(f"{path}: no such table (run the upstream ingestion stage for batch {batch!r} first)")
    return DeltaTable(str(path)).to_pyarrow_table(filters=[(column, "=", batch)], columns=columns)


def merge_rows(path: str | os.PathLike[str], table: pa.Table, key: str, partition_by: list[str] | None = None) -> dict:
    """Upsert rows by `key` (insert new, update existing)."""
    path = str(path)
    if not exists(path):
        Path(path).mkdir(parents=True, exist_ok=True)
        write_deltalake(path, table, mode="append", partition_by=partition_by)
        return {"num_target_rows_inserted": table.num_rows, "num_target_rows_updated": 0}
    return (DeltaTable(path).merge(table, predicate=f"t.{key} = s.{key}", source_alias="s", target_alias="t")
            .when_matched_update_all().when_not_matched_insert_all().execute())


@dataclass(frozen=True)
class IngestPaths:
    """Where ingestion keeps its state under one root (local path)."""

    root: str

    def _p(self, *parts: str) -> str:
        return str(Path(self.root, *parts))

    @property
    def batches(self) -> str:
        return self._p("ingest", "batches")

    def batch_manifest(self, batch: str) -> str:
        return self._p("ingest", "batches", f"{batch}.json")

    @property
    def containers(self) -> str:
        return self._p("containers")

    def container(self, batch: str, episode_id: str) -> str:
        return self._p("containers", batch, f"{episode_id}.rdep")

    def table(self, name: str) -> str:
        """raw_episodes | aligned_tracks | qc_results | conversions | segments | features"""
        return self._p("ingest", name)

    @property
    def catalog(self) -> str:
        return self._p("catalog", "episodes")
