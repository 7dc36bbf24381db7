"""Immutable, content-addressed manifest files.

A manifest is one Parquet file with MANIFEST_SCHEMA rows in canonical order (by episode_id),
named `<spec name>-<content hash[:16]>.parquet`, carrying in its key-value metadata the catalog
Delta version its rows were first selected at, the spec hash, the content hash and the hash
scheme that produced it.

Content hash schemes (`HASH_SCHEMES`; the file names its scheme in `robodata.manifest_hash_scheme`):

* **v4** (written since issue 37): v3 over every MANIFEST_SCHEMA column, the mixing facts
  (robot_type, source_dataset, control_hz, dims, language, stream roles) included. Files written
  before hold only the base columns (MANIFEST_BASE_SCHEMA) and verify with their own scheme over
  them; `read_manifest` gives them the mixing columns as nulls.
* **v3** (issue 41 to 37): sha256 over the spec hash and the canonical logical encoding
  of the rows (robodata.curate.canonical): a manifest's identity is its rows and its spec. The
  same rows selected at a later catalog version are the same manifest: the same file (kept, with
  the version it was first selected at: re-evaluating the spec there gives these rows), the same
  hash, so the same Dagster data version and nothing downstream marked stale. The version a
  curation read is `ManifestInfo.read_version` (the `manifest` asset records it).
* **v2** (issue 16 to 41): sha256 over the spec hash, the catalog version and the canonical
  logical encoding of the rows: values only, rows in canonical order, so equal tables hash equal
  whatever their Arrow buffers hold. v2 files are verified with v2, unchanged.
* **v1** (files without a scheme key, written before): sha256 over the spec hash, the catalog
  version and the Arrow IPC stream of the rows. It hashed buffers, so a writer whose buffers
  still held values that a filter had dropped (list columns such as `cameras`) recorded a hash
  that the file's own rows do not reproduce. v1 files are still verified with v1, unchanged:
  those that verified before still do (checkpoint lineage naming their hash stays valid); those
  written with a wrong hash still fail, since an altered file cannot be told apart from them.
  Re-curating the spec pinned to the file's catalog version writes a v2 manifest of the same rows
  (another hash, another file name).

The Parquet writer settings are fixed and nothing time-dependent goes into the file, so the same
spec and catalog version give byte-identical files. An existing file of the same name is never
rewritten: it is checked (its rows must reproduce its hash) and reused (the file is created only
if absent: a hard link on a local disk, a conditional PUT on S3, so racing writers cannot replace
one another's file).

`out_dir` and manifest paths are local folders or object-store URIs (s3://bucket/prefix/manifests)
with the fsspec options of their StorageLocation.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from robodata.catalog.schema import (
    MANIFEST_BASE_COLUMNS,
    MANIFEST_BASE_SCHEMA,
    MANIFEST_META_CATALOG_VERSION,
    MANIFEST_META_CONTENT_HASH,
    MANIFEST_META_HASH_SCHEME,
    MANIFEST_META_SPEC_HASH,
    MANIFEST_SCHEMA,
)
from robodata.curate import canonical
from robodata.curate.select import Selection
from robodata.errors import RobodataError
from robodata.storage import objects

ROW_GROUP_SIZE = 64 * 1024


class ManifestError(RobodataError):
    """A manifest file is missing, altered or not a manifest."""


@dataclass(frozen=True)
class ManifestInfo:
    """What `write_manifest` wrote: where, its hashes and what it holds."""

    path: str  # local path or object-store URI
    content_hash: str
    spec_hash: str
    catalog_version: int  # the version the file names (its rows' provenance; training lineage reads it)
    episodes: int
    hours: float
    train_episodes: int
    val_episodes: int
    read_version: int = -1  # the catalog version this curation read (>= catalog_version)


def content_hash_v1(table: pa.Table, spec_hash: str, catalog_version: int) -> str:
    """The v1 scheme (Arrow IPC buffers); kept only to verify manifests written before v2."""
    h = hashlib.sha256()
    h.update(f"robodata-manifest-v1\0{spec_hash}\0{catalog_version}\0".encode())
    sink = pa.BufferOutputStream()
    table = table.select(MANIFEST_BASE_COLUMNS).cast(MANIFEST_BASE_SCHEMA)
    with pa.ipc.new_stream(sink, MANIFEST_BASE_SCHEMA) as w:
        if table.num_rows:
            w.write_batch(table.combine_chunks().to_batches(max_chunksize=table.num_rows)[0])
    h.update(memoryview(sink.getvalue()))
    return h.hexdigest()


HASH_SCHEMES: dict[str, Callable[[pa.Table, str, int], str]] = {
    "v1": content_hash_v1,
    canonical.V2: canonical.content_hash_v2,
    canonical.V3: canonical.content_hash_v3,
    canonical.SCHEME: canonical.content_hash,
}
CURRENT_SCHEME = canonical.SCHEME


def content_hash(table: pa.Table, spec_hash: str, catalog_version: int | None = None) -> str:
    """Content hash of manifest rows under the current scheme (v4, robodata.curate.canonical).

    Args:
        table: manifest rows (MANIFEST_SCHEMA columns; any row order, chunking or buffer layout).
        spec_hash: the spec's `spec_hash`.
        catalog_version: not hashed under v3 (a manifest is its rows and spec); accepted so that
            callers of the v2 signature keep working.

    Returns:
        A sha256 hex digest; equal for tables with equal rows and the same spec hash.
    """
    return canonical.content_hash(table.cast(MANIFEST_SCHEMA), spec_hash)


def write_manifest(
    selection: Selection, out_dir: str | Path, name: str, storage_options: dict[str, Any] | None = None
) -> ManifestInfo:
    """Write `selection` as the immutable manifest `<out_dir>/<name>-<hash[:16]>.parquet`.

    Args:
        selection: rows and provenance from `robodata.curate.select.select`.
        out_dir: a local folder or an object-store URI.
        name: the spec name (a checked name: it is part of the file name).
        storage_options: fsspec options for an object-store `out_dir`.

    Returns:
        The written (or reused, when identical) manifest's ManifestInfo.

    Raises:
        ManifestError: a file of that name exists with rows that do not verify.
    """
    rows = with_mixing_columns(selection.rows.to_arrow()).select(MANIFEST_SCHEMA.names)
    table = canonical.canonical_order(rows.cast(MANIFEST_SCHEMA))
    digest = canonical.content_hash(table, selection.spec_hash)
    meta = {
        MANIFEST_META_CATALOG_VERSION: str(selection.catalog_version).encode(),
        MANIFEST_META_SPEC_HASH: selection.spec_hash.encode(),
        MANIFEST_META_CONTENT_HASH: digest.encode(),
        MANIFEST_META_HASH_SCHEME: CURRENT_SCHEME.encode(),
    }
    table = table.replace_schema_metadata(meta)
    path = f"{str(out_dir).rstrip('/')}/{name}-{digest[:16]}.parquet"
    buf = io.BytesIO()
    pq.write_table(
        table,
        buf,
        row_group_size=ROW_GROUP_SIZE,
        compression="zstd",
        compression_level=3,
        use_dictionary=False,  # zstd finds the repeats: 30 % less time to write 83k rows, a smaller file
        write_statistics=True,
        store_schema=True,
        data_page_version="2.0",
    )
    # Immutable: never rewrite. The same rows selected at another catalog version (or by another
    # writer version) hash to this address and keep the file there, with the version it names;
    # rows that do not reproduce its hash are an altered file.
    version = selection.catalog_version
    if not objects.create(path, buf.getvalue(), storage_options) and (
        objects.read_bytes(path, storage_options) != buf.getvalue()
    ):
        try:
            existing = read_manifest(path, verify=True, storage_options=storage_options)
        except ManifestError as exc:
            raise ManifestError(f"{path} exists with different content; manifests are immutable: {exc}") from exc
        if existing.schema.metadata.get(MANIFEST_META_CONTENT_HASH) != digest.encode():
            raise ManifestError(f"{path} exists with another content hash; manifests are immutable")
        version = int(existing.schema.metadata[MANIFEST_META_CATALOG_VERSION].decode())
    split = table.column("split")
    val = int(pc.sum(pc.equal(split, "val")).as_py() or 0)
    hours = float(pc.sum(table.column("duration_s")).as_py() or 0.0) / 3600.0
    return ManifestInfo(
        path,
        digest,
        selection.spec_hash,
        version,
        table.num_rows,
        hours,
        table.num_rows - val,
        val,
        read_version=selection.catalog_version,
    )


def _fs(path: str | Path, storage_options: dict[str, Any] | None):
    return objects.filesystem(str(path), storage_options)


def read_manifest_meta(path: str | Path, storage_options: dict[str, Any] | None = None) -> dict[bytes, bytes]:
    """The manifest's Parquet key-value metadata (catalog version, spec hash, content hash, scheme).

    Args:
        path: a local path or an object-store URI.
        storage_options: fsspec options for an object-store path.

    Returns:
        The metadata as a dict of bytes.

    Raises:
        ManifestError: the file is missing, unreadable or lacks the manifest keys.
    """
    try:
        md = pq.read_schema(str(path), filesystem=_fs(path, storage_options)).metadata or {}
    except (OSError, pa.ArrowInvalid) as exc:
        raise ManifestError(f"{path}: not a readable manifest: {exc}") from exc
    for key in (MANIFEST_META_CONTENT_HASH, MANIFEST_META_SPEC_HASH, MANIFEST_META_CATALOG_VERSION):
        if key not in md:
            raise ManifestError(f"{path}: no {key.decode()} metadata; not a manifest")
    return dict(md)


def read_manifest(path: str | Path, verify: bool = True, storage_options: dict[str, Any] | None = None) -> pa.Table:
    """Read a manifest, checking its content hash against its rows when `verify`.

    The hash is recomputed with the scheme the file names (`v1` when it names none).

    Args:
        path: a local path or an object-store URI.
        verify: recompute and compare the content hash.
        storage_options: fsspec options for an object-store path.

    Returns:
        The manifest rows (with the file's schema metadata); a file written before the mixing
        facts gets those columns as nulls (`with_mixing_columns`).

    Raises:
        ManifestError: the file is missing or not a manifest, names an unknown hash scheme, or
            its rows do not reproduce its content hash (altered, or a v1 file written with a
            wrong hash).
    """
    md = read_manifest_meta(path, storage_options)
    try:
        table = pq.read_table(str(path), filesystem=_fs(path, storage_options))
    except (OSError, pa.ArrowInvalid) as exc:
        raise ManifestError(f"{path}: not a readable manifest: {exc}") from exc
    if verify:
        verify_rows(path, table, md)
    return with_mixing_columns(table)


def with_mixing_columns(table: pa.Table) -> pa.Table:
    """`table` with every MANIFEST_SCHEMA column it lacks (a manifest written before issue 37) as nulls."""
    for f in MANIFEST_SCHEMA:
        if f.name not in table.column_names:
            table = table.append_column(f, pa.nulls(table.num_rows, f.type))
    return table


def verify_rows(path: str | Path, table: pa.Table, md: dict[bytes, bytes]) -> None:
    """Raise ManifestError unless `table`'s rows reproduce the content hash in `md`."""
    scheme = md.get(MANIFEST_META_HASH_SCHEME, b"v1").decode(errors="replace")
    if scheme not in HASH_SCHEMES:
        raise ManifestError(f"{path}: unknown manifest hash scheme {scheme!r}; known: {sorted(HASH_SCHEMES)}")
    try:
        version = int(md[MANIFEST_META_CATALOG_VERSION].decode())
        spec_hash = md[MANIFEST_META_SPEC_HASH].decode()
        full = scheme == CURRENT_SCHEME
        rows = table.cast(MANIFEST_SCHEMA) if full else table.select(MANIFEST_BASE_COLUMNS).cast(MANIFEST_BASE_SCHEMA)
    except (ValueError, UnicodeDecodeError, KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ManifestError(f"{path}: not a manifest (bad metadata or columns): {exc}") from exc
    digest = HASH_SCHEMES[scheme](rows, spec_hash, version)
    if digest.encode() != md[MANIFEST_META_CONTENT_HASH]:
        raise ManifestError(f"{path}: content hash mismatch (file altered?)")
