"""Immutable, content-addressed manifest files.

A manifest is one Parquet file with MANIFEST_SCHEMA rows sorted by episode_id, named
`<spec name>-<content hash[:16]>.parquet`, carrying in its key-value metadata the
catalog Delta version, the spec hash and the content hash.

Content hash = sha256 over the spec hash, the catalog version and the Arrow IPC
stream of the rows (one record batch, MANIFEST_SCHEMA). The Parquet writer settings
are fixed and nothing time-dependent goes into the file, so the same spec and catalog
version give byte-identical files. An existing file of the same name is never
rewritten: it is checked and reused (the file is created only if absent: a hard link on a
local disk, a conditional PUT on S3, so racing writers cannot replace one another's file).

`out_dir` and manifest paths are local folders or object-store URIs (s3://bucket/prefix/manifests)
with the fsspec options of their StorageLocation.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from robodata.catalog.schema import (
    MANIFEST_META_CATALOG_VERSION,
    MANIFEST_META_CONTENT_HASH,
    MANIFEST_META_SPEC_HASH,
    MANIFEST_SCHEMA,
)
from robodata.curate.select import Selection
from robodata.errors import RobodataError
from robodata.storage import objects

ROW_GROUP_SIZE = 64 * 1024


class ManifestError(RobodataError):
    """A manifest file is missing, altered or not a manifest."""


@dataclass(frozen=True)
class ManifestInfo:
    path: str  # local path or object-store URI
    content_hash: str
    spec_hash: str
    catalog_version: int
    episodes: int
    hours: float
    train_episodes: int
    val_episodes: int


def content_hash(table: pa.Table, spec_hash: str, catalog_version: int) -> str:
    h = hashlib.sha256()
    h.update(f"robodata-manifest-v1\0{spec_hash}\0{catalog_version}\0".encode())
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, MANIFEST_SCHEMA) as w:
        if table.num_rows:
            w.write_batch(table.combine_chunks().to_batches(max_chunksize=table.num_rows)[0])
    h.update(memoryview(sink.getvalue()))
    return h.hexdigest()


def write_manifest(
    selection: Selection, out_dir: str | Path, name: str, storage_options: dict[str, Any] | None = None
) -> ManifestInfo:
    table = selection.rows.to_arrow().cast(MANIFEST_SCHEMA)
    digest = content_hash(table, selection.spec_hash, selection.catalog_version)
    meta = {
        MANIFEST_META_CATALOG_VERSION: str(selection.catalog_version).encode(),
        MANIFEST_META_SPEC_HASH: selection.spec_hash.encode(),
        MANIFEST_META_CONTENT_HASH: digest.encode(),
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
        use_dictionary=True,
        write_statistics=True,
        store_schema=True,
        data_page_version="2.0",
    )
    # Immutable: never rewrite. Identical bytes, or (another writer version) rows
    # that still hash to this address, are fine; anything else is an altered file.
    if not objects.create(path, buf.getvalue(), storage_options) and (
        objects.read_bytes(path, storage_options) != buf.getvalue()
    ):
        try:
            read_manifest(path, verify=True, storage_options=storage_options)
        except ManifestError as exc:
            raise ManifestError(f"{path} exists with different content; manifests are immutable: {exc}") from exc
    split = table.column("split")
    val = int(pa.compute.sum(pa.compute.equal(split, "val")).as_py() or 0)
    hours = float(pa.compute.sum(table.column("duration_s")).as_py() or 0.0) / 3600.0
    return ManifestInfo(
        path, digest, selection.spec_hash, selection.catalog_version, table.num_rows, hours, table.num_rows - val, val
    )


def _fs(path: str | Path, storage_options: dict[str, Any] | None):
    return objects.filesystem(str(path), storage_options)


def read_manifest_meta(path: str | Path, storage_options: dict[str, Any] | None = None) -> dict[bytes, bytes]:
    try:
        md = pq.read_schema(str(path), filesystem=_fs(path, storage_options)).metadata or {}
    except (OSError, pa.ArrowInvalid) as exc:
        raise ManifestError(f"{path}: not a readable manifest: {exc}") from exc
    if MANIFEST_META_CONTENT_HASH not in md:
        raise ManifestError(f"{path}: no {MANIFEST_META_CONTENT_HASH.decode()} metadata; not a manifest")
    return dict(md)


def read_manifest(path: str | Path, verify: bool = True, storage_options: dict[str, Any] | None = None) -> pa.Table:
    """Read a manifest (local or object-store URI), checking its content hash against its rows when `verify`."""
    md = read_manifest_meta(path, storage_options)
    try:
        table = pq.read_table(str(path), filesystem=_fs(path, storage_options))
    except (OSError, pa.ArrowInvalid) as exc:
        raise ManifestError(f"{path}: not a readable manifest: {exc}") from exc
    if verify:
        rows = table.cast(MANIFEST_SCHEMA)
        digest = content_hash(
            rows, md[MANIFEST_META_SPEC_HASH].decode(), int(md[MANIFEST_META_CATALOG_VERSION].decode())
        )
        if digest.encode() != md[MANIFEST_META_CONTENT_HASH]:
            raise ManifestError(f"{path}: content hash mismatch (file altered?)")
    return table
