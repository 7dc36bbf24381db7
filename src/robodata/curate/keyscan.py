"""Curation's reads of a Delta catalog: the key scan with row addresses, and the fetch of kept rows.

`CatalogSource` plans both from the table's add actions (robodata.curate.select decides what):

* **Keys**: one Parquet scan per group of files that share what is proven about them, each with
  the spec's predicate less the terms proven for the whole file (every row has a container: the
  `uri` statistics of the Delta log, or the file's sidecar; no row has a failed QC check: the
  sidecar), so the scan does not decode `uri` and `qc_failed` for every row of such files.
  Each row carries its address `__row`: its file's first row number plus its row in the file
  (the files are numbered in one sequence over all groups).
* **Fetch**: the kept rows' manifest columns, taken by position from each file's sidecar
  (robodata.catalog.sidecar, row-major: a few random reads a row) when it has one and all
  of them return exactly the expected ids; the other files are scanned for their kept ids
  (Parquet, cost of their size).

Where the table cannot be addressed that way (deletion vectors, column mapping, add actions
without row counts, paths that do not pair with the reader's), `usable` is False and curation
reads `pl.scan_delta` as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import numpy as np
import polars as pl
import pyarrow as pa
from deltalake import DeltaTable

from robodata.catalog import sidecar
from robodata.catalog.sidecar import Sidecar
from robodata.curate.filters import Filter

ROW = "__row"
# (every row has a container, no row has a failed check) -> the predicate for such files
PredicateFor = Callable[[bool, bool], "pl.Expr | None"]


@dataclass(frozen=True)
class DataFile:
    path: str  # add-action path (relative, URL-encoded as in the log)
    uri: str  # what the Parquet reader opens
    rows: int
    loadable: bool  # proven: every row has a non-empty uri
    no_failed: bool  # proven: no row has a failed check
    sidecar: Sidecar | None
    offset: int = 0  # row number of its first row in the key scan's sequence


class CatalogSource:
    """The data files of one catalog version, with what is known about each (see the module docstring)."""

    def __init__(
        self, dt: DeltaTable, storage_options: dict[str, Any] | None = None, filters: list[Filter] | None = None
    ):
        """`filters`: the spec's; those on partition columns leave out, up front, the files of
        partitions they reject (evaluated by Polars on the partition values, as in a scan)."""
        self.dt = dt
        self.storage_options = storage_options or None
        self.prepare: Callable[[pl.LazyFrame], pl.LazyFrame] = lambda lf: lf
        files = self._files(filters or []) if _addressable(dt) else None
        self.usable = files is not None
        self.files: list[DataFile] = files or []

    def plain(self) -> pl.LazyFrame:
        """The whole table as `pl.scan_delta` reads it (no addresses)."""
        return pl.scan_delta(self.dt)

    def keys(self, predicate_for: PredicateFor, prepare: Callable[[pl.LazyFrame], pl.LazyFrame]) -> pl.LazyFrame:
        """Rows passing the predicate (with `__row`), over every file; `prepare` adds missing columns."""
        self.prepare = prepare
        groups: dict[tuple[bool, bool], list[DataFile]] = {}
        for f in self.files:
            groups.setdefault((f.loadable, f.no_failed), []).append(f)
        scans, offset, numbered = [], 0, []
        for proven, files in sorted(groups.items()):
            lf = prepare(self._scan(files, offset))
            pred = predicate_for(*proven)
            scans.append(lf.filter(pred) if pred is not None else lf)
            for f in files:
                numbered.append(_with_offset(f, offset))
                offset += f.rows
        self.files = numbered
        if not scans:
            return prepare(self.plain()).with_row_index(ROW).head(0)
        return pl.concat(scans, how="vertical") if len(scans) > 1 else scans[0]

    def fetch(self, rows: np.ndarray, ids: pl.Series, fields: list[str], schema: pl.Schema) -> pl.DataFrame:
        """`fields` of the rows at addresses `rows` whose episode ids are `ids` (sorted, unique), in that order.

        Rows come from their file's sidecar where every sidecar returns exactly the expected ids;
        otherwise (no sidecar, or any mismatch) from a scan of those files for their ids."""
        order = np.argsort(rows, kind="stable")  # by address: file by file
        rows = rows[order]
        starts = np.array([f.offset for f in self.files], dtype=np.int64)
        at = np.searchsorted(starts, rows, side="right") - 1
        picks, covered, scan_files = [], [], []
        for lo, hi in _runs(at):
            f = self.files[int(at[lo])]
            if f.sidecar is None:
                scan_files.append(f)
            else:
                picks.append((f.sidecar, rows[lo:hi] - f.offset))
                covered.append(order[lo:hi])
        parts: list[pl.DataFrame] = []
        if picks:
            at_ids = np.concatenate(covered)
            back = None if scan_files else np.argsort(at_ids, kind="stable")  # the order of `ids`: no sort
            try:
                table = sidecar.take_many(picks, back)
            except (OSError, ValueError, pa.ArrowException):
                table = None
            want = ids.gather(at_ids if back is None else at_ids[back])
            if table is not None and pl.Series(table.column("episode_id")).equals(want, check_names=False):
                parts.append(_from_arrow(table).select([pl.col(c).cast(schema[c]) for c in fields]))
                if not scan_files:
                    return parts[0]
            else:
                scan_files = [f for f in self.files if f.rows]
        wanted = ids if not parts else ids.gather(np.setdiff1d(np.arange(len(ids)), np.concatenate(covered)))
        scan = self.prepare(self._scan(scan_files, 0)).filter(pl.col("episode_id").is_in(wanted.implode()))
        parts.append(scan.select(fields).collect(engine="streaming"))
        return pl.concat(parts, how="vertical").sort("episode_id", maintain_order=True)

    def _scan(self, files: list[DataFile], offset: int) -> pl.LazyFrame:
        parts = self.dt.metadata().partition_columns
        schema = pl.Schema(self.dt.schema())
        return pl.scan_parquet(
            [f.uri for f in files],
            schema=pl.Schema({k: v for k, v in schema.items() if k not in parts}),
            hive_partitioning=bool(parts),
            hive_schema=pl.Schema({k: v for k, v in schema.items() if k in parts}) if parts else None,
            cast_options=pl.ScanCastOptions._default_iceberg(),
            missing_columns="insert",
            extra_columns="ignore",
            storage_options=self.storage_options,
            row_index_name=ROW,
            row_index_offset=offset,
            glob=False,
        )

    def _files(self, filters: list[Filter]) -> list[DataFile] | None:
        actions = pa.table(self.dt.get_add_actions(flatten=True))
        names = set(actions.column_names)
        if "num_records" not in names or actions.column("num_records").null_count:
            return None
        uris = self.dt.file_uris()  # the add actions' order
        paths = [str(p) for p in actions.column("path").to_pylist()]
        if len(uris) != len(paths) or not all(u.endswith("/" + unquote(p)) for u, p in zip(uris, paths, strict=True)):
            return None
        wanted = _in_partitions(self.dt, actions, filters)
        if wanted is not None:
            at = pa.array(wanted, type=pa.int64())
            actions, uris, paths = actions.take(at), [uris[i] for i in wanted], [paths[i] for i in wanted]
        sizes = [int(n) for n in actions.column("size_bytes").to_pylist()]
        counts = [int(n) for n in actions.column("num_records").to_pylist()]
        nulls = actions.column("null_count.uri").to_pylist() if "null_count.uri" in names else [None] * len(paths)
        mins = actions.column("min.uri").to_pylist() if "min.uri" in names else [None] * len(paths)
        cars = sidecar.find(self.dt.table_uri, list(zip(paths, sizes, counts, strict=True)))
        out = []
        for p, u, n, nc, lo in zip(paths, uris, counts, nulls, mins, strict=True):
            car = cars.get(p)
            by_stats = nc == 0 and lo is not None and lo != ""
            loadable = by_stats or (car is not None and car.loadable)
            out.append(DataFile(p, u, n, loadable, car is not None and car.no_failed_checks, car))
        return out


def _in_partitions(dt: DeltaTable, actions: pa.Table, filters: list[Filter]) -> list[int] | None:
    """Positions of the add actions whose partition values pass the filters on partition columns
    (None: no such filter)."""
    parts = dt.metadata().partition_columns
    terms = [f.expr() for f in filters if f.column in parts]
    if not terms or any(f"partition.{c}" not in actions.column_names for c in parts):
        return None
    schema = pl.Schema(dt.schema())
    values = pl.DataFrame(
        {c: actions.column(f"partition.{c}").to_pylist() for c in parts}, schema={c: schema[c] for c in parts}
    )
    kept = values.with_row_index("__at").filter(*terms)
    return kept["__at"].to_list()


def _addressable(dt: DeltaTable) -> bool:
    features = dt.protocol().reader_features or []
    mapping = dt.metadata().configuration.get("delta.columnMapping.mode", "none")
    return "deletionVectors" not in features and mapping in ("none", None)


def _with_offset(f: DataFile, offset: int) -> DataFile:
    return DataFile(f.path, f.uri, f.rows, f.loadable, f.no_failed, f.sidecar, offset)


def _runs(at: np.ndarray) -> list[tuple[int, int]]:
    """[lo, hi) runs of equal values in a sorted array."""
    if not len(at):
        return []
    cuts = np.flatnonzero(np.diff(at)) + 1
    edges = [0, *cuts.tolist(), len(at)]
    return list(zip(edges[:-1], edges[1:], strict=True))


def _from_arrow(table: pa.Table) -> pl.DataFrame:
    df = pl.from_arrow(table)
    assert isinstance(df, pl.DataFrame)
    return df
