"""Where robodata keeps its state under one root (a local folder or s3://bucket/prefix): the one
place that knows the layout below it. Ingestion, curation, the Dagster resources and the CLI ask it.

    <root>/landing/                          landing zone (unless configured elsewhere)
    <root>/ingest/<table>                    ingestion's Delta tables (raw_episodes, qc_results, ...)
    <root>/ingest/batches/<batch>.json       a batch's landing items (digests included)
    <root>/ingest/manual_cursor.json         items already batched by `robodata-dagster add-batch`
    <root>/containers/<batch>/<episode>.rdep episode containers
    <root>/containers/<batch>/.staged/       containers converted in the alignment's read, before commit
    <root>/catalog/episodes                  the episode catalog (Delta)
    <root>/catalog/site_acceptance           the site acceptance table (Delta)
    <root>/manifests/                        curated manifests
    <root>/manifests/refs/<spec>.json        each spec partition's manifest ref (the Dagster IO manager)

Built from a StorageLocation, or from a root string resolved with `StorageLocation.from_env`
(endpoint, region and credentials from this process's AWS_* variables); Delta tables are reached
with `delta_options()`, files with `fsspec_options()`.
"""

from __future__ import annotations

import hashlib
import os

from robodata.config import require
from robodata.names import check_name
from robodata.storage.location import StorageLocation


def check_batch(batch: str) -> str:
    """A batch key is a name (robodata.names): it names a manifest file and a container folder."""
    return check_name(batch, field="batch key", source="ingest batch")


class StateRoot:
    def __init__(self, root: str | os.PathLike[str] | StorageLocation | StateRoot):
        self.location: StorageLocation
        if isinstance(root, StateRoot):
            self.location = root.location
        elif isinstance(root, StorageLocation):
            self.location = root
        else:
            text = os.fspath(root)
            require(bool(text), "a state root must not be empty (a folder or s3://bucket/prefix)")
            self.location = StorageLocation.from_env(text)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.location.root!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StateRoot) and other.location == self.location

    def __hash__(self) -> int:
        return hash(self.location)

    @property
    def root(self) -> str:
        return self.location.root

    def fsspec_options(self) -> dict:
        return self.location.fsspec_options()

    def delta_options(self) -> dict[str, str]:
        return self.location.delta_options()

    # landing and ingestion
    @property
    def landing(self) -> str:
        return self.location.join("landing")

    def table(self, name: str) -> str:
        """An ingestion table: raw_episodes | aligned_tracks | qc_results | conversions | segments | features"""
        return self.location.join("ingest", check_name(name, field="table", source="state root"))

    @property
    def batches(self) -> str:
        return self.location.join("ingest", "batches")

    def batch_manifest(self, batch: str) -> str:
        return self.location.join("ingest", "batches", f"{check_batch(batch)}.json")

    @property
    def manual_cursor(self) -> str:
        return self.location.join("ingest", "manual_cursor.json")

    @property
    def containers(self) -> str:
        return self.location.join("containers")

    def container(self, batch: str, episode_id: str) -> str:
        """containers/<batch>/<episode_id>.rdep; both are checked names (UnsafeNameError)."""
        eid = check_name(episode_id, field="episode_id", source=f"batch {batch!r}")
        return self.location.join("containers", check_batch(batch), f"{eid}.rdep")

    def staged_container(self, batch: str, uri: str) -> str:
        """containers/<batch>/.staged/<digest of the landing uri>.rdep: an episode converted in its
        alignment's read (robodata.ingest.steps.one_pass) until the episodes stage commits it under
        its episode_id. Keyed by the uri: recordings claiming one episode_id never share a file."""
        key = hashlib.sha256(uri.encode()).hexdigest()[:32]
        return self.location.join("containers", check_batch(batch), ".staged", f"{key}.rdep")

    def staged_folder(self, batch: str) -> str:
        return self.location.join("containers", check_batch(batch), ".staged")

    # curation
    @property
    def catalog(self) -> str:
        return self.location.join("catalog", "episodes")

    @property
    def acceptance(self) -> str:
        return self.location.join("catalog", "site_acceptance")

    @property
    def manifests(self) -> str:
        return self.location.join("manifests")

    def manifest_ref(self, spec: str) -> str:
        name = check_name(spec, field="manifest partition", source="state root")
        return self.location.join("manifests", "refs", f"{name}.json")
