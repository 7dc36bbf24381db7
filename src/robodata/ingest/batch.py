"""Batches: a named list of landing items, written once as a manifest, read by every stage."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa

from robodata.errors import RobodataError
from robodata.ingest.landing import LandingItem
from robodata.ingest.tables import IngestPaths, replace_batch


def write_manifest(paths: IngestPaths, batch: str, items: list[LandingItem]) -> str:
    p = Path(paths.batch_manifest(batch))
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".json.partial")
    tmp.write_text(json.dumps({"batch": batch, "created_at": time.time(), "items": [i.to_dict() for i in items]}))
    os.replace(tmp, p)
    return str(p)


def read_manifest(paths: IngestPaths, batch: str) -> list[LandingItem]:
    p = Path(paths.batch_manifest(batch))
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise RobodataError(f"batch {batch!r}: manifest {p} missing (the landing-zone sensor writes it)") from None
    return [LandingItem(**d) for d in doc["items"]]


RAW_SCHEMA = pa.schema([("batch", pa.string()), ("uri", pa.string()), ("kind", pa.string()), ("name", pa.string()),
                        ("size_bytes", pa.int64()), ("completed_at", pa.float64())])


def observe(paths: IngestPaths, batch: str) -> dict:
    """raw_episodes: the batch's items as observed in the landing zone."""
    items = read_manifest(paths, batch)
    rows = [{"batch": batch, "uri": i.uri, "kind": i.kind, "name": i.name, "size_bytes": i.size_bytes,
             "completed_at": i.completed_at} for i in items]
    replace_batch(paths.table("raw_episodes"), pa.Table.from_pylist(rows, RAW_SCHEMA), batch)
    kinds: dict[str, int] = {}
    for i in items:
        kinds[i.kind] = kinds.get(i.kind, 0) + 1
    return {"episodes": len(items), "bytes": sum(i.size_bytes for i in items), "kinds": kinds}
