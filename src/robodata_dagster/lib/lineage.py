"""Lineage through the instance's event log: which manifest materialization a checkpoint came from.

`manifest` materializations carry the manifest's path, content hash, spec hash and catalog Delta
version; each `training_run` materialization names its manifest partition and the storage id of
the exact manifest materialization it trained on (not Dagster's `dagster/input_event_pointer`
tag, which points at the newest materialization of *any* manifest partition).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import dagster as dg

from robodata.errors import ConfigError, RobodataError

MANIFEST = dg.AssetKey("manifest")
TRAINING_RUN = dg.AssetKey("training_run")


@dataclass(frozen=True)
class ManifestRef:
    """One materialization of one manifest partition."""

    partition: str
    path: str
    content_hash: str
    spec_hash: str
    catalog_version: int
    storage_id: int
    run_id: str


def _value(md: dict[str, Any], key: str, where: str) -> Any:
    if key not in md:
        raise RobodataError(f"{where}: materialization metadata has no {key!r}")
    return md[key].value


def manifest_ref(instance: dg.DagsterInstance, partition: str, storage_id: int | None = None) -> ManifestRef:
    """The newest materialization of manifest partition `partition` (or the one with `storage_id`)."""
    filt = dg.AssetRecordsFilter(
        asset_key=MANIFEST, asset_partitions=[partition], storage_ids=[storage_id] if storage_id is not None else None
    )
    records = instance.fetch_materializations(filt, limit=1).records
    if not records:
        if storage_id is not None:
            raise RobodataError(f"manifest partition {partition!r}: no materialization with storage id {storage_id}")
        raise ConfigError(
            f"manifest partition {partition!r} was never materialized; materialize it first "
            f"(dagster asset materialize -m robodata_dagster.definitions --select manifest --partition {partition})"
        )
    rec = records[0]
    mat = rec.asset_materialization
    assert mat is not None
    md, where = dict(mat.metadata), f"manifest[{partition}]"
    return ManifestRef(
        partition=partition,
        path=str(_value(md, "path", where)),
        content_hash=str(_value(md, "content_hash", where)),
        spec_hash=str(_value(md, "spec_hash", where)),
        catalog_version=int(_value(md, "catalog_version", where)),
        storage_id=rec.storage_id,
        run_id=rec.run_id,
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
    ref = manifest_ref(instance, partition, int(_value(md, "manifest_storage_id", where)))
    trained_hash, trained_version = _value(md, "manifest_hash", where), _value(md, "catalog_version", where)
    return {
        "checkpoint": str(_value(md, "checkpoint", where)),
        "training_partition": rec.partition_key,
        "training_run_id": rec.run_id,
        "manifest_partition": partition,
        "manifest_storage_id": ref.storage_id,
        "manifest_run_id": ref.run_id,
        "manifest_path": ref.path,
        "manifest_hash": ref.content_hash,
        "spec_hash": ref.spec_hash,
        "catalog_version": ref.catalog_version,
        "consistent": trained_hash == ref.content_hash and trained_version == ref.catalog_version,
    }
