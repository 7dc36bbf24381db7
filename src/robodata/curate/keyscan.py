"""Curation's reads of a Delta catalog: the key scan with row addresses, and the fetch of kept rows.

`CatalogSource` plans both from the table's add actions (robodata.curate.select decides what):

* **Keys**: one Parquet scan per group of files that share what is proven about them, each with
  the spec's predicate less the terms proven for the whole file (every row has a container: the
  `uri` statistics of the Delta log, or the file's sidecar; no row has a failed QC check: the
  sidecar), so the scan does not decode `uri` and `qc_failed` for every row of such files.
  Each row carries its address `__row`: its file's first row number plus its row in the file
  (the files are numbered in one sequence over all groups).
  With `ids_aside`, files with a sidecar leave episode_id out of the scan (null): decoding the
  ids of 20M candidates from Parquet took about half of a 50M-row key scan. The budget then takes
  their hashes from the sidecars (robodata.curate.candidates: `hashes`, `under`).
* **Fetch**: the kept rows' manifest columns, taken by position from each file's sidecar
  (robodata.catalog.sidecar, row-major: a few random reads a row) when it has one and it returns
  the ids the scan read (ids set aside: its checks as above); the other files are scanned for
  their kept rows' addresses (Parquet, cost of their size).

Where the table cannot be addressed that way (deletion vectors, column mapping, add actions
without row counts, paths that do not pair with the reader's), `usable` is False and curation
reads `pl.scan_delta` as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import polars as pl
import pyarrow as pa
from deltalake import DeltaTable

from robodata.catalog import rowpack, sidecar
from robodata.catalog.schema import CATALOG_SCHEMA
from robodata.catalog.sidecar import Sidecar
from robodata.curate.candidates import SidecarHashes
from robodata.curate.filters import Filter

ROW = "__row"
# (every row has a container, no row has a failed check, the `Excluded` terms proven true for
# every row) -> the predicate for such files
PredicateFor = Callable[[bool, bool, frozenset[int]], "pl.Expr | None"]
Excluded = list[tuple[str, list[str]]]  # "column not in values" terms of the predicate, by index
_STATS_CHARS = 32  # delta-rs cuts longer string statistics: they bound nothing then
CATALOG_TYPES = pl.Schema(pl.from_arrow(CATALOG_SCHEMA.empty_table()).schema)  # type: ignore[union-attr]


@dataclass(frozen=True)
class DataFile:
    path: str  # add-action path (relative, URL-encoded as in the log)
    uri: str  # what the Parquet reader opens
    rows: int
    loadable: bool  # proven: every row has a non-empty uri
    no_failed: bool  # proven: no row has a failed check
    sidecar: Sidecar | None
    offset: int = 0  # row number of its first row in the key scan's sequence
    at: int = 0  # its add action's row in the log's table (its statistics)


class CatalogSource(SidecarHashes):
    """The data files of one catalog version, with what is known about each (see the module docstring)."""

    def __init__(
        self, dt: DeltaTable, storage_options: dict[str, Any] | None = None, filters: list[Filter] | None = None
    ):
        """`filters`: the spec's; those on partition columns leave out, up front, the files of
        partitions they reject (evaluated by Polars on the partition values, as in a scan)."""
        self.dt = dt
        self.storage_options = storage_options or None
        self.prepare: Callable[[pl.LazyFrame], pl.LazyFrame] = lambda lf: lf
        self.checked: set[Path] = set()  # sidecars `hashes` verified (RowFile.verify)
        self._actions = pa.table({})  # the log's add actions, flattened (their statistics)
        self.partitions: list[str] = list(dt.metadata().partition_columns)
        self._footers: dict[str, int] = {}  # data file uri -> its footer's CRC-32C (`_footer`)
        self.pruned = False
        files = self._files(filters or []) if _addressable(dt) else None
        self.usable = files is not None
        self.files: list[DataFile] = files or []

    def plain(self) -> pl.LazyFrame:
        """The whole table as `pl.scan_delta` reads it (no addresses)."""
        return pl.scan_delta(self.dt)

    def keys(
        self,
        predicate_for: PredicateFor,
        prepare: Callable[[pl.LazyFrame], pl.LazyFrame],
        ids_aside: bool = False,
        excluded: Excluded | None = None,
    ) -> pl.LazyFrame:
        """Rows passing the predicate (with `__row`), over every file; `prepare` adds missing columns.
        `ids_aside`: episode_id is null for the rows of files with a sidecar (see `hashes`).
        `excluded`: the predicate's "column not in values" terms; a file whose statistics put no
        value of one between its column's min and max (and no null) is scanned without it."""
        self.prepare = prepare
        groups: dict[tuple[bool, bool, frozenset[int], bool], list[DataFile]] = {}
        proofs = self._proofs(excluded or [])
        for f in self.files:
            proven = proofs[f.at] if proofs else frozenset()
            key = (f.loadable, f.no_failed, proven, ids_aside and f.sidecar is not None)
            groups.setdefault(key, []).append(f)
        ordered = sorted(groups.items(), key=lambda g: _order(g[0]))
        self.number([f for _, files in ordered for f in files])
        scans, at = [], 0
        for (loadable, no_failed, proven, aside), files in ordered:
            numbered, at = self.files[at : at + len(files)], at + len(files)
            lf = prepare(self._scan(numbered, numbered[0].offset))
            pred = predicate_for(loadable, no_failed, proven)
            lf = lf.filter(pred) if pred is not None else lf
            scans.append(lf.with_columns(pl.lit(None, pl.String).alias("episode_id")) if aside else lf)
        if not scans:
            return prepare(self.plain()).with_row_index(ROW).head(0)
        return pl.concat(scans, how="vertical") if len(scans) > 1 else scans[0]

    def number(self, files: list[DataFile]) -> None:
        """`files` become `self.files`, numbered in that order: each one's `offset` is the row
        address of its first row (addresses continue from file to file)."""
        offset, numbered = 0, []
        for f in files:
            numbered.append(replace(f, offset=offset))
            offset += f.rows
        self.files = numbered

    def fetch(self, rows: np.ndarray, ids: pl.Series, fields: list[str], schema: pl.Schema) -> pl.DataFrame:
        """`fields` of the rows at addresses `rows` (unique), in that order; `ids`: their episode ids
        as the scan read them (null: set aside, see `hashes`).

        Rows come from their file's sidecar where every sidecar returns the ids the scan read and,
        where it set them aside, passes `RowFile.verify` (written for that data file; each picked
        row's id is covered by its row checksum); otherwise (no sidecar, or any mismatch) from a
        scan of those files for those addresses."""
        if not len(rows):
            return pl.DataFrame(schema={c: schema[c] for c in fields})
        order = np.argsort(rows, kind="stable")  # by address: file by file
        rows = rows[order]
        at = self._file_of(rows)
        picks, covered, scan_files = [], [], []
        footers: dict[Path, int] = {}
        aside = ids.is_null().to_numpy()[order]
        for lo, hi in _runs(at):
            f = self.files[int(at[lo])]
            if f.sidecar is None:
                scan_files.append(f)
                continue
            picks.append((f.sidecar, rows[lo:hi] - f.offset))
            covered.append(np.arange(lo, hi))
            if aside[lo:hi].any() and f.sidecar.path not in self.checked:
                footers[f.sidecar.path] = self.footer_crc(f)
        parts: list[tuple[np.ndarray, pl.DataFrame]] = []  # (positions in `rows` order, their rows)
        if picks:
            got = np.concatenate(covered)
            try:
                table = sidecar.take_many(picks, None, footers)
            except (OSError, ValueError, pa.ArrowException):
                table = None
            if table is not None and _same_ids(pl.Series(table.column("episode_id")), ids.gather(order[got])):
                parts.append((got, _from_arrow(table).select([pl.col(c).cast(schema[c]) for c in fields])))
            else:
                scan_files = [f for f in self.files if f.rows]
        if scan_files:
            done = np.concatenate([p for p, _ in parts]) if parts else np.zeros(0, np.int64)
            wanted = np.setdiff1d(np.arange(len(rows)), done)
            parts.append((wanted, self._scan_rows(scan_files, rows[wanted], fields)))
        positions = np.concatenate([p for p, _ in parts])
        frame = pl.concat([df for _, df in parts], how="vertical") if len(parts) > 1 else parts[0][1]
        back = np.empty(len(rows), dtype=np.int64)  # output j: the row at rows_given[j]
        back[order[positions]] = np.arange(len(positions))
        return frame.gather(back)

    def _scan_rows(self, files: list[DataFile], rows: np.ndarray, fields: list[str]) -> pl.DataFrame:
        """`fields` of the rows at addresses `rows` (sorted) of `files`, in that order, from Parquet:
        one scan per run of consecutively numbered files (row numbers continue within a run)."""
        index = {id(f): i for i, f in enumerate(self.files)}
        runs: list[list[DataFile]] = []
        for f in sorted(files, key=lambda f: f.offset):
            if runs and index[id(runs[-1][-1])] + 1 == index[id(f)]:
                runs[-1].append(f)
            else:
                runs.append([f])
        member = pl.col(ROW).is_in(pl.Series(rows, dtype=pl.Int64).implode())
        scans = [self.prepare(self._scan(run, run[0].offset)).filter(member).select(ROW, *fields) for run in runs]
        found = pl.concat(scans, how="vertical").collect(engine="streaming").sort(ROW)
        if len(found) != len(rows) or not np.array_equal(found[ROW].cast(pl.Int64).to_numpy(), rows):
            raise pl.exceptions.ComputeError("the catalog's data files changed between the key scan and the fetch")
        return found.select(fields)

    def _file_of(self, rows: np.ndarray) -> np.ndarray:
        """Index into `files` of the file holding each address."""
        starts = np.array([f.offset for f in self.files], dtype=np.int64)
        return np.searchsorted(starts, rows, side="right") - 1

    def footer_crc(self, f: DataFile) -> int:
        """CRC-32C of the data file's Parquet footer (what its sidecar must have been written for),
        read once per evaluation (Delta data files are immutable)."""
        crc = self._footers.get(f.uri)
        if crc is None:
            path = Path(unquote(f.uri[len("file://") :])) if f.uri.startswith("file://") else Path(f.uri)
            crc = self._footers[f.uri] = rowpack.footer_crc32c(path)
        return crc

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

    def _proofs(self, excluded: Excluded) -> list[frozenset[int]]:
        """For each add action: the `excluded` terms its statistics prove true for all its rows."""
        if not excluded:
            return []
        n = self._actions.num_rows
        proven: list[set[int]] = [set() for _ in range(n)]
        names = set(self._actions.column_names)
        for k, (column, values) in enumerate(excluded):
            if not {f"min.{column}", f"max.{column}", f"null_count.{column}"} <= names:
                continue
            lows = self._actions.column(f"min.{column}").to_pylist()
            highs = self._actions.column(f"max.{column}").to_pylist()
            nulls = self._actions.column(f"null_count.{column}").to_pylist()
            for i, (lo, hi, nc) in enumerate(zip(lows, highs, nulls, strict=True)):
                bounded = isinstance(lo, str) and isinstance(hi, str) and len(hi) < _STATS_CHARS and nc == 0
                if bounded and not any(lo <= v <= hi for v in values):
                    proven[i].add(k)
        return [frozenset(p) for p in proven]

    def _files(self, filters: list[Filter]) -> list[DataFile] | None:
        actions = self._actions = pa.table(self.dt.get_add_actions(flatten=True))
        names = set(actions.column_names)
        if "num_records" not in names or actions.column("num_records").null_count:
            return None
        uris = self.dt.file_uris()  # the add actions' order
        paths = [str(p) for p in actions.column("path").to_pylist()]
        if len(uris) != len(paths) or not all(u.endswith("/" + unquote(p)) for u, p in zip(uris, paths, strict=True)):
            return None
        wanted = _in_partitions(self.dt, actions, filters)
        self.pruned = wanted is not None  # the filters on partition columns left out the files they reject
        index = list(range(len(paths))) if wanted is None else wanted
        if wanted is not None:
            at = pa.array(wanted, type=pa.int64())
            actions, uris, paths = actions.take(at), [uris[i] for i in wanted], [paths[i] for i in wanted]
        sizes = [int(n) for n in actions.column("size_bytes").to_pylist()]
        counts = [int(n) for n in actions.column("num_records").to_pylist()]
        nulls = actions.column("null_count.uri").to_pylist() if "null_count.uri" in names else [None] * len(paths)
        mins = actions.column("min.uri").to_pylist() if "min.uri" in names else [None] * len(paths)
        cars = sidecar.find(self.dt.table_uri, list(zip(paths, sizes, counts, strict=True)))
        out = []
        for p, u, n, nc, lo, i in zip(paths, uris, counts, nulls, mins, index, strict=True):
            car = cars.get(p)
            by_stats = nc == 0 and lo is not None and lo != ""
            loadable = by_stats or (car is not None and car.loadable)
            out.append(DataFile(p, u, n, loadable, car is not None and car.no_failed_checks, car, at=i))
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


def _order(key: tuple[bool, bool, frozenset[int], bool]) -> tuple:
    """A fixed order of file groups (their files' row numbers follow it)."""
    loadable, no_failed, proven, aside = key
    return (loadable, no_failed, sorted(proven), aside)


def _runs(at: np.ndarray) -> list[tuple[int, int]]:
    """[lo, hi) runs of equal values in a sorted array."""
    if not len(at):
        return []
    cuts = np.flatnonzero(np.diff(at)) + 1
    edges = [0, *cuts.tolist(), len(at)]
    return list(zip(edges[:-1], edges[1:], strict=True))


def _same_ids(got: pl.Series, scanned: pl.Series) -> bool:
    """The sidecar's ids equal the scan's wherever the scan read one (null: set aside)."""
    if len(got) != len(scanned):
        return False
    read = scanned.is_not_null()
    return bool(got.filter(read).equals(scanned.filter(read), check_names=False, check_dtypes=False))


def _from_arrow(table: pa.Table) -> pl.DataFrame:
    df = pl.from_arrow(table)
    assert isinstance(df, pl.DataFrame)
    return df
