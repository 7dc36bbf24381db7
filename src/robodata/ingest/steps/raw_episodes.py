"""raw_episodes step: the batch's landing items as observed, one row each (Delta raw_episodes)."""

from __future__ import annotations

import pyarrow as pa

from robodata.ingest.landing.batch import read_manifest
from robodata.ingest.tables import IngestPaths

RAW_SCHEMA = pa.schema(
    [
        ("batch", pa.string()),
        ("uri", pa.string()),
        ("kind", pa.string()),
        ("name", pa.string()),
        ("size_bytes", pa.int64()),
        ("completed_at", pa.float64()),
        ("source_digest", pa.string()),  # the sensor's content digest (LandingItem.digest); null: none
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
            "source_digest": i.digest or None,
        }
        for i in items
    ]
    paths.replace("raw_episodes", pa.Table.from_pylist(rows, RAW_SCHEMA), batch)
    kinds: dict[str, int] = {}
    for i in items:
        kinds[i.kind] = kinds.get(i.kind, 0) + 1
    return {"episodes": len(items), "bytes": sum(i.size_bytes for i in items), "kinds": kinds}
