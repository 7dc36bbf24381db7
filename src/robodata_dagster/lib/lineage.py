"""Typed lineage between `manifest` and `training_run`, and the checkpoint's lineage from the event log.

`manifest` outputs a ManifestRef (path, content hash, spec hash, catalog version, and the run that
wrote it); the `manifest_io_manager` (resources/manifests.py) stores it per spec partition and
`training_run` declares it as an input through the partition mapping (its `spec` dimension), so a
run trains on exactly the ref it loaded and records that ref: no query for the newest
materialization, no dotted override strings. `newest_checkpoint_lineage` walks back from the newest
`training_run` materialization to the manifest materialization of the run named by that ref.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import dagster as dg

from robodata.errors import RobodataError

MANIFEST = dg.AssetKey("manifest")
TRAINING_RUN = dg.AssetKey("training_run")


@dataclass(frozen=True)
class ManifestRef:
    """One materialization of one manifest partition: what training_run trains on."""

    partition: str
    path: str
    content_hash: str
    spec_hash: str
    catalog_version: int
    run_id: str = ""  # the run that wrote it (set by the IO manager)

    def to_json(self) -> bytes:
        return json.dumps(dataclasses.asdict(self), sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> ManifestRef:
        try:
            raw = json.loads(data)
            return cls(**{f.name: raw[f.name] for f in dataclasses.fields(cls)})
        except (ValueError, KeyError, TypeError) as exc:
            raise RobodataError(f"{where}: not a manifest ref ({exc})") from exc


@dataclass(frozen=True)
class ManifestRecord:
    """A manifest materialization in the event log."""

    ref: ManifestRef
    storage_id: int


def _value(md: dict[str, Any], key: str, where: str) -> Any:
    if key not in md:
        raise RobodataError(f"{where}: materialization metadata has no {key!r}")
    return md[key].value


def _record(rec: Any, partition: str) -> ManifestRecord:
    mat = rec.asset_materialization
    assert mat is not None
    md, where = dict(mat.metadata), f"manifest[{partition}]"
    ref = ManifestRef(
        partition=partition,
        path=str(_value(md, "path", where)),
        content_hash=str(_value(md, "content_hash", where)),
        spec_hash=str(_value(md, "spec_hash", where)),
        catalog_version=int(_value(md, "catalog_version", where)),
        run_id=rec.run_id,
    )
    return ManifestRecord(ref=ref, storage_id=rec.storage_id)


def manifest_record(instance: dg.DagsterInstance, partition: str, run_id: str | None = None) -> ManifestRecord:
    """The manifest materialization of `partition` written by run `run_id` (None: the newest)."""
    filt = dg.AssetRecordsFilter(asset_key=MANIFEST, asset_partitions=[partition])
    cursor = None
    while True:  # a partition's materializations, newest first, until the run's
        page = instance.fetch_materializations(filt, limit=100, cursor=cursor)
        for rec in page.records:
            if run_id is None or rec.run_id == run_id:
                return _record(rec, partition)
        if not page.has_more:
            break
        cursor = page.cursor
    raise RobodataError(
        f"manifest partition {partition!r}: no materialization" + (f" by run {run_id}" if run_id else "")
    )


def newest_checkpoint_lineage(instance: dg.DagsterInstance) -> dict[str, Any]:
    """From the newest `training_run` materialization back to its manifest materialization and the
    catalog version, from the event log alone. `consistent`: the checkpoint's recorded manifest
    hash and catalog version are those of that manifest materialization."""
    records = instance.fetch_materializations(TRAINING_RUN, limit=1).records
    if not records:
        raise RobodataError("training_run was never materialized on this instance")
    rec = records[0]
    mat = rec.asset_materialization
    assert mat is not None
    md, where = dict(mat.metadata), f"training_run[{rec.partition_key}]"
    partition = str(_value(md, "manifest_partition", where))
    found = manifest_record(instance, partition, str(_value(md, "manifest_run_id", where)))
    ref = found.ref
    trained_hash, trained_version = _value(md, "manifest_hash", where), _value(md, "catalog_version", where)
    return {
        "checkpoint": str(_value(md, "checkpoint", where)),
        "training_partition": rec.partition_key,
        "training_run_id": rec.run_id,
        "manifest_partition": partition,
        "manifest_storage_id": found.storage_id,
        "manifest_run_id": ref.run_id,
        "manifest_path": ref.path,
        "manifest_hash": ref.content_hash,
        "spec_hash": ref.spec_hash,
        "catalog_version": ref.catalog_version,
        "consistent": trained_hash == ref.content_hash and trained_version == ref.catalog_version,
    }
