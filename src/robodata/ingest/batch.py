"""Batches: a named list of landing items, written once as a manifest, read by every stage."""

from __future__ import annotations

import json
import time

import pyarrow as pa

from robodata.errors import RobodataError
from robodata.ingest.landing import LandingItem
from robodata.ingest.tables import IngestPaths
from robodata.storage import objects


def write_manifest(paths: IngestPaths, batch: str, items: list[LandingItem]) -> str:
    uri = paths.batch_manifest(batch)
    doc = {"batch": batch, "created_at": time.time(), "items": [i.to_dict() for i in items]}
    objects.write_bytes(uri, json.dumps(doc).encode(), paths.fsspec_options())
    return uri


def read_manifest(paths: IngestPaths, batch: str) -> list[LandingItem]:
    uri = paths.batch_manifest(batch)
    try:
        doc = json.loads(objects.read_bytes(uri, paths.fsspec_options()))
    except FileNotFoundError:
        raise RobodataError(f"batch {batch!r}: manifest {uri} missing (the landing-zone sensor writes it)") from None
    return [LandingItem(**d) for d in doc["items"]]


RAW_SCHEMA = pa.schema(
    [
        ("batch", pa.string()),
        ("uri", pa.string()),
        ("kind", pa.string()),
        ("name", pa.string()),
        ("size_bytes", pa.int64()),
        ("completed_at", pa.float64()),
    ]
)


def observe(paths: IngestPaths, batch: str) -> dict:
    """raw_episodes: the batch's items as observed in the landing zone."""
    items = read_manifest(paths, batch)
    rows = [
        {
            "batch": batch,
            "uri": i.uri,
            "kind": i.kind,
            "name": i.name,
            "size_bytes": i.size_bytes,
            "completed_at": i.completed_at,
        }
        for i in items
    ]
    paths.replace("raw_episodes", pa.Table.from_pylist(rows, RAW_SCHEMA), batch)
    kinds: dict[str, int] = {}
    for i in items:
        kinds[i.kind] = kinds.get(i.kind, 0) + 1
    return {"episodes": len(items), "bytes": sum(i.size_bytes for i in items), "kinds": kinds}
