"""Batches: a named list of landing items, written once as a manifest, read by every stage."""

from __future__ import annotations

import json
import time

from robodata.errors import RobodataError
from robodata.ingest.landing.scan import LandingItem
from robodata.storage import StateRoot, objects


def write_manifest(paths: StateRoot, batch: str, items: list[LandingItem]) -> str:
    uri = paths.batch_manifest(batch)
    doc = {"batch": batch, "created_at": time.time(), "items": [i.to_dict() for i in items]}
    objects.write_bytes(uri, json.dumps(doc).encode(), paths.fsspec_options())
    return uri


def read_manifest(paths: StateRoot, batch: str) -> list[LandingItem]:
    uri = paths.batch_manifest(batch)
    try:
        doc = json.loads(objects.read_bytes(uri, paths.fsspec_options()))
    except FileNotFoundError:
        raise RobodataError(f"batch {batch!r}: manifest {uri} missing (the landing-zone sensor writes it)") from None
    return [LandingItem(**d) for d in doc["items"]]
