"""Row-addressable sidecars of catalog data files: what curation fetches for the rows it keeps.

A budgeted spec keeps a few percent of the rows that pass its filters, spread at random over every
day (the budget samples by a salted hash of episode_id). From Parquet, fetching their manifest
columns means decompressing and decoding those columns for every row of every file (about 1 s of
CPU at 5M rows, whatever the number kept). A sidecar holds the same columns of one data file
uncompressed in an Arrow IPC file (repeated strings dictionary-encoded), so the kept rows are taken
by position from a memory map, at a cost that follows the rows kept (about 0.1 s at 5M rows).

* **One sidecar per Delta data file**, named after it: `<table>/_robodata_sidecars/<quoted data
  file path>~<file size>~<rows>~<facts>.arrow`. Delta data files are immutable, so a sidecar never
  goes stale; it is used only while its name's size and row count equal the add action's, and the
  ids it returns are checked against the ids the scan read (robodata.curate.keyscan). Delta (and its
  vacuum) ignore folders whose name starts with `_`.
* **Facts** about the whole file, in the name: `L` every row has a container (non-empty uri), `Q`
  no row has a failed QC check. Curation drops the matching terms of its predicate for that file
  (they cost a string and a list column decoded per row).
* Written by catalog maintenance (robodata.catalog.maintenance) for the files it writes and for
  any live file that has none; a sidecar whose data file is gone (vacuum) is removed there. Only
  local tables (a path or file:// URI) have sidecars; elsewhere curation reads Parquet alone.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from robodata.catalog.schema import CATALOG_SCHEMA, MANIFEST_SCHEMA

SIDECAR_DIR = "_robodata_sidecars"
COLUMNS = [c for c in MANIFEST_SCHEMA.names if c not in ("split", "weight")]
FORMAT = b"robodata.sidecar.v1"
_META_KEY = b"robodata.sidecar"
_PLAIN = re.compile(r"[A-Za-z0-9._=/-]*")
_UNIQUE = ("episode_id", "uri")  # kept as plain strings; every other string is a dictionary
_DICT = pa.dictionary(pa.int32(), pa.string())
PLAIN_SCHEMA = pa.schema([MANIFEST_SCHEMA.field(c) for c in COLUMNS])
SCHEMA = pa.schema(
    [
        f.with_type(_DICT if f.name not in _UNIQUE else f.type)
        if pa.types.is_string(f.type)
        else f.with_type(pa.list_(_DICT))
        if pa.types.is_list(f.type)
        else f
        for f in PLAIN_SCHEMA
    ],
    metadata={_META_KEY: FORMAT},
)


@dataclass(frozen=True)
class Sidecar:
    """A data file's sidecar: where it is and what holds for every row of the file."""

    path: Path
    rows: int
    loadable: bool  # L: every row has a non-empty uri
    no_failed_checks: bool  # Q: every row's qc_failed is null or empty


def local_root(table_uri: str) -> Path | None:
    """The table's local folder, or None for an object-store table (no sidecars there)."""
    if table_uri.startswith("file://"):
        return Path(unquote(table_uri[len("file://") :]))
    return None if "://" in table_uri else Path(table_uri)


def _name(rel_path: str, size: int, rows: int, loadable: bool, no_failed: bool) -> str:
    facts = ("L" if loadable else "") + ("Q" if no_failed else "") or "-"
    return f"{_quote(rel_path)}~{int(size)}~{int(rows)}~{facts}.arrow"


def _quote(path: str) -> str:
    """`quote(path, safe="")`; the usual Delta paths (day=YYYY-MM-DD/part-....parquet) without its cost."""
    if _PLAIN.fullmatch(path):
        return path.replace("=", "%3D").replace("/", "%2F")
    return quote(path, safe="")


def find(table_uri: str, files: list[tuple[str, int, int]]) -> dict[str, Sidecar]:
    """The usable sidecars of `files` ((add-action path, size, rows)), by add-action path.

    One folder listing; a sidecar counts only if its name's size and row count equal the file's.
    """
    root = local_root(table_uri)
    folder = root / SIDECAR_DIR if root is not None else None
    if folder is None or not folder.is_dir():
        return {}
    wanted = {_quote(p): (p, size, rows) for p, size, rows in files}
    out: dict[str, Sidecar] = {}
    with os.scandir(folder) as entries:
        for entry in entries:
            parts = entry.name.removesuffix(".arrow").rsplit("~", 3)
            if len(parts) != 4 or not entry.name.endswith(".arrow") or parts[0] not in wanted:
                continue
            path, size, rows = wanted[parts[0]]
            if parts[1] == str(size) and parts[2] == str(rows):
                out[path] = Sidecar(Path(entry.path), rows, "L" in parts[3], "Q" in parts[3])
    return out


def write(table_uri: str, rel_path: str, size: int) -> Sidecar | None:
    """Write the sidecar of the data file `rel_path` (add-action path) of a local table.

    Returns:
        The sidecar, or None for an object-store table.
    """
    root = local_root(table_uri)
    if root is None:
        return None
    table = _read(root / unquote(rel_path))
    uri = table.column("uri")
    loadable = pc.all(pc.fill_null(pc.not_equal(uri, ""), False)).as_py() in (True, None)
    lengths = pc.list_value_length(table.column("qc_failed"))
    no_failed = int(pc.max(pc.fill_null(lengths, 0)).as_py() or 0) == 0
    body = table.select(COLUMNS).cast(SCHEMA).combine_chunks()
    folder = root / SIDECAR_DIR
    folder.mkdir(exist_ok=True)
    target = folder / _name(rel_path, size, table.num_rows, loadable, no_failed)
    tmp = folder / f".tmp-{uuid.uuid4().hex}"
    with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, body.schema) as writer:
        writer.write_table(body, max_chunksize=max(1, body.num_rows))
    os.replace(tmp, target)  # readers see a whole file or none
    return Sidecar(target, table.num_rows, loadable, no_failed)


def _read(path: Path) -> pa.Table:
    """The data file's manifest columns plus uri and qc_failed (columns an older file lacks: nulls)."""
    pf = pq.ParquetFile(path)
    present = set(pf.schema_arrow.names)
    wanted = list(dict.fromkeys([*COLUMNS, "qc_failed"]))
    table = pf.read(columns=[c for c in wanted if c in present])
    for c in wanted:
        if c not in present:
            table = table.append_column(CATALOG_SCHEMA.field(c), pa.nulls(table.num_rows, CATALOG_SCHEMA.field(c).type))
    return table.select(wanted).cast(pa.schema([CATALOG_SCHEMA.field(c) for c in wanted]))


def take(sidecar: Sidecar, positions: np.ndarray) -> pa.RecordBatch:
    """Rows at `positions` (row numbers within the data file), in PLAIN_SCHEMA (manifest types). The
    batch holds copies: nothing refers to the memory map once it returns (it is unmapped).

    Raises:
        ValueError: the file is not a sidecar of this format, or holds another number of rows.
        OSError, pyarrow.ArrowException: it cannot be read.
    """
    with pa.memory_map(str(sidecar.path)) as source:
        reader = pa.ipc.open_file(source)
        if not reader.schema.equals(SCHEMA, check_metadata=True) or reader.num_record_batches != 1:
            raise ValueError(f"{sidecar.path}: not a {FORMAT.decode()} file")
        batch = reader.get_batch(0)
        if batch.num_rows != sidecar.rows:
            raise ValueError(f"{sidecar.path}: holds other rows than its name says")
        return batch.take(pa.array(positions, type=pa.int64())).cast(PLAIN_SCHEMA)


def prune(table_uri: str, live: set[str], tmp_age_s: float = 3600.0) -> int:
    """Remove sidecars whose data file is neither in `live` (add-action paths) nor on disk (a vacuum
    removed it), and temporary files older than `tmp_age_s`; returns how many."""
    root = local_root(table_uri)
    if root is None or not (root / SIDECAR_DIR).is_dir():
        return 0
    folder = root / SIDECAR_DIR
    removed = 0
    now = time.time()
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith(".tmp-"):
                gone = now - entry.stat().st_mtime > tmp_age_s
            else:
                path = unquote(entry.name.rsplit("~", 3)[0])
                gone = path not in live and not (root / unquote(path)).exists()
            if gone:
                Path(entry.path).unlink(missing_ok=True)
                removed += 1
    return removed
