"""Delta tables for per-episode facts (never Dagster events): replace-by-batch and merge-by-key.

Every ingestion stage writes its rows for one batch with `replace_batch`, so re-running a
stage for a batch (re-execution, backfill) replaces its rows instead of duplicating them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError

from robodata.errors import RobodataError
from robodata.storage.state import StateRoot, check_batch

__all__ = ["IngestPaths", "check_batch", "exists", "open_table", "read_batch", "replace_batch"]


def _lit(v: str) -> str:
    return "'" + str(v).replace("'", "''") + "'"


Options = dict[str, str] | None


def _prepare(path: str) -> None:
    if "://" not in path:
        Path(path).mkdir(parents=True, exist_ok=True)


def open_table(path: str | os.PathLike[str], storage_options: Options = None) -> DeltaTable | None:
    """The table at `path`, or None when there is none yet."""
    try:
        return DeltaTable(str(path), storage_options=storage_options)
    except TableNotFoundError:
        return None


def exists(path: str | os.PathLike[str], storage_options: Options = None) -> bool:
    # not DeltaTable.is_deltatable: it holds the GIL while it waits on S3, which deadlocks an
    # in-process S3 server (tests) until the request times out
    return open_table(path, storage_options) is not None


def replace_batch(
    path: str | os.PathLike[str],
    table: pa.Table,
    batch: str,
    column: str = "batch",
    where: dict[str, str] | None = None,
    storage_options: Options = None,
) -> None:
    """Rows of `batch` (and `where` column values) at `path` become exactly `table`.

    The table is created partitioned by the batch column.
    """
    path = str(path)
    if table.num_rows and set(table.column(column).to_pylist()) != {batch}:
        raise RobodataError(f"{path}: rows for batch {batch!r} carry other {column} values")
    pred = " AND ".join(f"{k} = {_lit(v)}" for k, v in {column: batch, **(where or {})}.items())
    dt = open_table(path, storage_options)
    if dt is None:
        _prepare(path)
        write_deltalake(path, table, mode="append", partition_by=[column], storage_options=storage_options)
        return
    if table.num_rows == 0:
        dt.delete(pred)
        return
    write_deltalake(dt, table, mode="overwrite", predicate=pred, schema_mode="merge")


def read_batch(
    path: str | os.PathLike[str],
    batch: str,
    columns: list[str] | None = None,
    column: str = "batch",
    storage_options: Options = None,
) -> pa.Table:
    dt = open_table(path, storage_options)
    if dt is None:
        raise RobodataError(f"{path}: no such table (run the upstream ingestion stage for batch {batch!r} first)")
    return dt.to_pyarrow_table(filters=[(column, "=", batch)], columns=columns)


class IngestPaths(StateRoot):
    """A StateRoot (robodata.storage.state: where everything lives under the root) with ingestion's
    Delta tables read and written under it with this root's storage options."""

    def has(self, name: str) -> bool:
        return exists(self.table(name), self.delta_options())

    def read(self, name: str, batch: str, columns: list[str] | None = None) -> pa.Table:
        return read_batch(self.table(name), batch, columns, storage_options=self.delta_options())

    def replace(self, name: str, table: pa.Table, batch: str, where: dict[str, str] | None = None) -> None:
        replace_batch(self.table(name), table, batch, where=where, storage_options=self.delta_options())
