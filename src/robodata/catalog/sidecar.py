"""Row-addressable sidecars of catalog data files: what curation fetches for the rows it keeps.

A budgeted spec keeps a few percent of the rows that pass its filters, spread at random over every
day (the budget samples by a salted hash of episode_id). From Parquet, fetching their manifest
columns means decompressing and decoding those columns for every row of every file (about 1 s of
CPU at 5M rows, whatever the number kept). A sidecar holds the same columns of one data file
*row-major*, so a kept row costs a few random reads, not one per column:

* **Records**: one fixed-width record per row (the numbers, the codes of the dictionary columns
  site/task/cameras/stream_rates_json/layout_version, a validity mask), gathered by position from
  a memory map in one NumPy indexing per file.
* **Strings**: episode_id and uri in Arrow's layout (offsets, bytes), taken by Arrow for the
  picked positions only (their offsets checked first).
* **Dictionaries** (JSON): each dictionary column's distinct values (a few per file; `cameras`
  as lists). Codes are per file; `take_many` maps them to one dictionary.
* **Header** (JSON): row count, section sizes, checksums, the order's salt.

Layout (robodata.catalog.rowpack): `MAGIC`, the header's length (u64 LE), the header, then the
sections, each padded to 8 bytes: records, episode_id offsets, its bytes, uri offsets, its bytes
(all in the sampling order of the salt the catalog was optimized for), slots (row -> record),
each record's hash (ascending) and row, the dictionaries. Picking by row number goes through the
slots: a budget's kept rows, a prefix of that order, are close together in every sidecar.
Column-major Arrow sidecars (format 1) cost one cache miss per row *and column* and a dozen
Arrow calls per file: at 50M rows (1,000 files, 83 rows kept in each) that was most of the fetch.

* **One sidecar per Delta data file**, named after it: `<table>/_robodata_sidecars/<quoted data
  file path>~<file size>~<rows>~<facts>.rows5`. Delta data files are immutable, so a sidecar never
  goes stale; it is used only while its name's size and row count equal the add action's. The ids
  it returns are checked against the ids the scan read, and where the scan left them to it (the
  candidates' ids, robodata.curate.keyscan), the header's CRC-32C of the data file's Parquet
  footer is checked first (and the id sections' CRC-32C before ids are hashed). Delta (and its
  vacuum) ignore folders whose name starts with `_`.
* **Facts** about the whole file, in the name: `L` every row has a container (non-empty uri), `Q`
  no row has a failed QC check. Curation drops the matching terms of its predicate for that file
  (they cost a string and a list column decoded per row).
* **Its head** (robodata.catalog.headpack), beside it under the same name with `HEAD_SUFFIX`:
  the file's filter columns in the same order, column by column, written with it (a sidecar
  written before heads gets one on the next maintenance run). Curation decides budgeted specs
  on the heads' prefixes (robodata.curate.prefix) and fetches the rows they keep from here.
* Written by catalog maintenance (robodata.catalog.maintenance) for the files it writes and for
  any live file that has none; a sidecar whose data file is gone (vacuum), and one of an older
  format, is removed there. Only local tables (a path or file:// URI) have sidecars; elsewhere
  curation reads Parquet alone.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from robodata.catalog import headpack, rowpack
from robodata.catalog.schema import CATALOG_SCHEMA, MANIFEST_SCHEMA

SIDECAR_DIR = "_robodata_sidecars"
COLUMNS = [c for c in MANIFEST_SCHEMA.names if c not in ("split", "weight")]
SUFFIX = ".rows5"  # format 5 (robodata.catalog.rowpack); 3, 4: ".rows3", ".rows4"; 2: ".rows"; 1: ".arrow"
HEAD_SUFFIX = ".head2"  # its head (robodata.catalog.headpack), same name otherwise; 1: ".head1"
_PLAIN = re.compile(r"[A-Za-z0-9._=/-]*")
PLAIN_SCHEMA = pa.schema([MANIFEST_SCHEMA.field(c) for c in COLUMNS])


@dataclass(frozen=True)
class Sidecar:
    """A data file's sidecar: where it is and what holds for every row of the file."""

    path: Path
    rows: int
    loadable: bool  # L: every row has a non-empty uri
    no_failed_checks: bool  # Q: every row's qc_failed is null or empty
    head: Path | None = None  # its head (robodata.catalog.headpack), where written


def local_root(table_uri: str) -> Path | None:
    """The table's local folder, or None for an object-store table (no sidecars there)."""
    if table_uri.startswith("file://"):
        return Path(unquote(table_uri[len("file://") :]))
    return None if "://" in table_uri else Path(table_uri)


def _name(rel_path: str, size: int, rows: int, loadable: bool, no_failed: bool) -> str:
    facts = ("L" if loadable else "") + ("Q" if no_failed else "") or "-"
    return f"{_quote(rel_path)}~{int(size)}~{int(rows)}~{facts}{SUFFIX}"


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
        names = [entry.name for entry in entries]
    heads = {name.removesuffix(HEAD_SUFFIX) for name in names if name.endswith(HEAD_SUFFIX)}
    for name in names:
        parts = name.removesuffix(SUFFIX).rsplit("~", 3)
        if len(parts) != 4 or not name.endswith(SUFFIX) or parts[0] not in wanted:
            continue
        path, size, rows = wanted[parts[0]]
        if parts[1] == str(size) and parts[2] == str(rows):
            head = folder / (name.removesuffix(SUFFIX) + HEAD_SUFFIX) if name.removesuffix(SUFFIX) in heads else None
            out[path] = Sidecar(folder / name, rows, "L" in parts[3], "Q" in parts[3], head)
    return out


def write(table_uri: str, rel_path: str, size: int, order_salt: str = "") -> Sidecar | None:
    """Write the sidecar of the data file `rel_path` (add-action path) of a local table, its
    records in `stable_hash64(episode_id, order_salt)` order (robodata.catalog.rowpack).

    Returns:
        The sidecar, or None for an object-store table.
    """
    root = local_root(table_uri)
    if root is None:
        return None
    data_file = root / unquote(rel_path)
    table = _read(data_file)
    uri = table.column("uri")
    loadable = pc.all(pc.fill_null(pc.not_equal(uri, ""), False)).as_py() in (True, None)
    lengths = pc.list_value_length(table.column("qc_failed"))
    no_failed = int(pc.max(pc.fill_null(lengths, 0)).as_py() or 0) == 0
    footer = rowpack.footer_crc32c(data_file)
    image = rowpack.encode(table.select(COLUMNS).cast(PLAIN_SCHEMA), footer, order_salt)
    folder = root / SIDECAR_DIR
    folder.mkdir(exist_ok=True)
    target = folder / _name(rel_path, size, table.num_rows, loadable, no_failed)
    head = _write_head(table, footer, order_salt, target)  # first: a sidecar found has its head
    _put(folder, target, image)
    return Sidecar(target, table.num_rows, loadable, no_failed, head)


def write_head(car: Sidecar, table_uri: str, rel_path: str) -> Sidecar:
    """Write the head of a data file whose sidecar has none (one written before heads), in the
    sidecar's order; returns the sidecar with it."""
    root = local_root(table_uri)
    assert root is not None  # a sidecar was found there
    data_file = root / unquote(rel_path)
    rf = rowpack.RowFile(car.path, car.rows)
    try:
        salt = rf.order_salt
    finally:
        rf.close()
    head = _write_head(_read(data_file), rowpack.footer_crc32c(data_file), salt, car.path)
    return Sidecar(car.path, car.rows, car.loadable, car.no_failed_checks, head)


def _write_head(table: pa.Table, footer: int, order_salt: str, sidecar_path: Path) -> Path:
    target = sidecar_path.with_name(sidecar_path.name.removesuffix(SUFFIX) + HEAD_SUFFIX)
    _put(target.parent, target, headpack.encode(table, footer, order_salt))
    return target


def _put(folder: Path, target: Path, image: bytes) -> None:
    tmp = folder / f".tmp-{uuid.uuid4().hex}"
    tmp.write_bytes(image)
    os.replace(tmp, target)  # readers see a whole file or none


def _read(path: Path) -> pa.Table:
    """The data file's manifest and head columns plus uri and qc_failed (columns an older file
    lacks: nulls)."""
    pf = pq.ParquetFile(path)
    present = set(pf.schema_arrow.names)
    wanted = list(dict.fromkeys([*COLUMNS, "qc_failed", *headpack.COLUMNS]))
    table = pf.read(columns=[c for c in wanted if c in present])
    for c in wanted:
        if c not in present:
            table = table.append_column(CATALOG_SCHEMA.field(c), pa.nulls(table.num_rows, CATALOG_SCHEMA.field(c).type))
    return table.select(wanted).cast(pa.schema([CATALOG_SCHEMA.field(c) for c in wanted]))


def take(sidecar: Sidecar, positions: np.ndarray) -> pa.Table:
    """Rows at `positions` (row numbers within the data file) of one sidecar, in PLAIN_SCHEMA."""
    return take_many([(sidecar, positions)])


def take_many(
    picks: list[tuple[Sidecar, np.ndarray]], order: np.ndarray | None = None, footers: dict[Path, int] | None = None
) -> pa.Table:
    """The rows at each sidecar's positions, sidecars in turn, in PLAIN_SCHEMA (manifest types);
    `order`: output row j is the j-th of them in that order. The table holds copies: nothing
    refers to the memory maps once it returns (they are closed). `footers`: sidecars whose ids
    are taken as they are (no scan read them), with their data file's footer CRC-32C: they are
    verified first (`RowFile.verify`: written for that file; `pick` checks each slot it uses,
    and each picked row's ids are covered by its row checksum).

    Raises:
        ValueError: a file is not a sidecar of this format, holds another number of rows, or
            a position is out of range.
        OSError: a file cannot be read.
    """
    picked = []
    for car, positions in picks:  # one file mapped at a time: its pages leave with it
        if len(positions) and (int(positions.min()) < 0 or int(positions.max()) >= car.rows):
            raise ValueError(f"{car.path}: a position outside its {car.rows} rows")
        f = rowpack.RowFile(car.path, car.rows)
        try:
            if footers is not None and car.path in footers:
                f.verify(footers[car.path])
            picked.append(f.pick(positions))
        finally:
            f.close()
    return _gather(picked, PLAIN_SCHEMA, order)


def prune(table_uri: str, live: set[str], tmp_age_s: float = 3600.0) -> int:
    """Remove sidecars whose data file is neither in `live` (add-action paths) nor on disk (a vacuum
    removed it), those of an older format, and temporary files older than `tmp_age_s`; returns
    how many."""
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
            elif not entry.name.endswith((SUFFIX, HEAD_SUFFIX)):
                gone = True  # an older format's sidecar or head: this one is written in its place
            else:
                path = unquote(entry.name.rsplit("~", 3)[0])
                gone = path not in live and not (root / unquote(path)).exists()
            if gone:
                Path(entry.path).unlink(missing_ok=True)
                removed += 1
    return removed


def _gather(picked: list[rowpack.Picked], schema: pa.Schema, order: np.ndarray | None = None) -> pa.Table:
    """The picked rows, files in turn, as `schema` (the manifest columns); `order`: output row j
    is picked row order[j]."""
    recs = [f.records for f in picked]
    strings = {c: [f.strings[c] for f in picked] for c in rowpack.STRINGS}
    values: dict[str, list[Any]] = {}  # one dictionary per column for all files
    luts: dict[str, list[np.ndarray]] = {}  # per file: its codes -> codes into that one
    for c in rowpack.CODED:
        values[c], luts[c] = rowpack.unify(f.dicts[c] for f in picked)
    rec = np.concatenate(recs) if recs else np.zeros(0, rowpack.RECORD)
    of_file = np.repeat(np.arange(len(recs)), [len(r) for r in recs])
    for c in rowpack.CODED:  # each row's code -> one dictionary for all files; -1 stays null
        sizes = np.array([len(lut) for lut in luts[c]], np.int64)
        flat = np.concatenate([*luts[c], np.array([-1], np.int32)])
        local = rec[c].astype(np.int64)
        bad = (local < -1) | (local >= sizes[of_file])
        if bad.any():
            raise ValueError(f"{picked[of_file[bad.argmax()]].path}: a record's {c} code is not in its dictionary")
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        rec[c] = flat[np.where(local < 0, len(flat) - 1, starts[of_file] + local)]
    at = pa.array(order, pa.int64()) if order is not None else None
    rec = rec[order] if order is not None else rec
    valid = rec["valid"]
    cols: dict[str, pa.Array] = {}
    for c in rowpack.STRINGS:
        arr = pa.chunked_array(strings[c], pa.large_string()).combine_chunks()
        arr = arr.take(at) if at is not None else arr
        arr.validate(full=True)  # UTF-8 of bytes read from a file
        present = (valid & rowpack.VALID[c]) != 0
        arr = arr if present.all() else pc.if_else(pa.array(present), arr, None)
        cols[c] = arr.cast(schema.field(c).type)
    for c in rowpack.NUMBERS:
        cols[c] = pa.array(rec[c], mask=(valid & rowpack.VALID[c]) == 0).cast(schema.field(c).type)
    for c in rowpack.CODED:
        codes = rec[c]
        cols[c] = pc.take(pa.array(values[c], schema.field(c).type), pa.array(codes, mask=codes < 0))
    return pa.table([cols[c] for c in schema.names], schema=schema)
