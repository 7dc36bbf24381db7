"""The IO manager of `manifest`: each spec partition's ManifestRef (lib/lineage.py) as a small JSON
object, <root>/manifests/refs/<spec>.json (root: `root`, else ROBODATA_STORAGE_ROOT, else .demo; a
folder or s3://...). `training_run` loads the ref of its spec partition through it; a spec that was
never curated loads as None (training on the config's own data needs no manifest). A refresh that
selected the same rows points the ref at the same manifest file (only the run that named it last
changes: lineage resolves that run's materialization, whatever the event log has cleaned up since)."""

import dagster as dg
from pydantic import Field

from robodata_dagster.lib.env import state_root
from robodata_dagster.lib.lineage import ManifestRef


class ManifestRefIOManager(dg.ConfigurableIOManager):
    root: str = Field(default="", description="state root; empty: ROBODATA_STORAGE_ROOT, else .demo")

    def uri(self, partition: str) -> str:
        return state_root(self.root).manifest_ref(partition)

    def handle_output(self, context: dg.OutputContext, obj: ManifestRef) -> None:
        from robodata.storage import StorageLocation, objects

        if not isinstance(obj, ManifestRef):
            raise dg.Failure(f"manifest must output a ManifestRef, got {type(obj).__name__}", allow_retries=False)
        ref = ManifestRef(**{**obj.__dict__, "partition": context.asset_partition_key, "run_id": context.run_id})
        uri = self.uri(ref.partition)
        objects.write_bytes(uri, ref.to_json(), StorageLocation.from_env(uri).fsspec_options())
        context.add_output_metadata({"ref": dg.MetadataValue.path(uri), "run_id": ref.run_id})

    def load_input(self, context: dg.InputContext) -> ManifestRef | None:
        from robodata.storage import StorageLocation

        if not context.has_asset_partitions:  # the manifest asset is not part of these definitions
            return None
        uri = self.uri(context.asset_partition_key)
        return self._read(uri, StorageLocation.from_env(uri).fsspec_options())

    @staticmethod
    def _read(uri: str, opts: dict) -> ManifestRef | None:
        from robodata.storage import objects

        if not objects.exists(uri, opts):
            return None
        return ManifestRef.from_json(objects.read_bytes(uri, opts), uri)
