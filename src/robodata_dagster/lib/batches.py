"""Cutting landing items into an `ingest_batch` partition by hand (the demo, `robodata-dagster add-batch`),
as the landing-zone sensor does on its ticks: the batch's manifest is written first, then the
partition is added (a partition without its manifest would fail its run).

The cursor of these hand-cut batches is kept next to the ingest tables
(<root>/ingest/manual_cursor.json), so items are batched once; the sensors keep their own.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime

import dagster as dg

from robodata.config import require
from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.names import check_name
from robodata.storage import StateRoot, objects
from robodata_dagster.lib.registry import BATCH


def add_batch(
    instance: dg.DagsterInstance, root: str, landing: str, name: str | None = None, max_items: int = 100_000
) -> tuple[str, int] | None:
    """Every complete landing item not batched yet becomes batch `name` (default: a timestamp);
    returns (batch, items), or None when nothing new landed."""
    if not objects.is_remote(landing):  # a mistyped folder is an error, not "nothing new"
        require(os.path.isdir(landing), f"landing zone {landing!r} is not a folder (a typo?)")
    paths = StateRoot(root)
    cursor_uri = paths.manual_cursor
    opts = paths.fsspec_options()
    cursor = LandingCursor()
    if objects.exists(cursor_uri, opts):
        cursor.load_state_dict(json.loads(objects.read_bytes(cursor_uri, opts)))
    items = new_items(landing, cursor, settle_s=0.0, limit=max_items)
    if not items:
        return None
    batch = name or datetime.fromtimestamp(time.time(), tz=UTC).strftime("manual-%Y%m%dT%H%M%S")
    check_name(batch, field="batch", source="robodata-dagster add-batch")
    require(not instance.has_dynamic_partition(BATCH, batch), f"batch {batch!r} exists already")
    write_manifest(paths, batch, items)
    instance.add_dynamic_partitions(BATCH, [batch])
    cursor.advance(items)
    # after the manifest, so its folder exists
    objects.write_bytes(cursor_uri, json.dumps(cursor.state_dict()).encode(), opts)
    return batch, len(items)
