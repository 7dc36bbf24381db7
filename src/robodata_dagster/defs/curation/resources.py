"""Where the episode catalog, manifests and the acceptance table live (one resource).

Defaults follow the ingestion root, so with ROBODATA_STORAGE_ROOT=s3://bucket/prefix all three
are on S3 (reached with the AWS_* variables of the process that runs the step)."""

import os

import dagster as dg

from robodata.catalog.table import Catalog, CatalogConfig
from robodata.storage import StorageLocation
from robodata_dagster.defs.ingest.resources import default_root

_ROOT = default_root().rstrip("/")  # the ingestion root: ingestion merges into <root>/catalog/episodes


class CatalogResource(dg.ConfigurableResource):
    uri: str = os.environ.get("ROBODATA_CATALOG", f"{_ROOT}/catalog/episodes")
    manifests_dir: str = os.environ.get("ROBODATA_MANIFESTS", f"{_ROOT}/manifests")
    acceptance_uri: str = os.environ.get("ROBODATA_ACCEPTANCE", f"{_ROOT}/catalog/site_acceptance")

    def catalog(self) -> Catalog:
        """On S3 with the delta-rs options of this process's AWS_* variables (as ingestion writes it)."""
        opts = StorageLocation.from_env(self.uri).delta_options()
        return Catalog(CatalogConfig(uri=self.uri, storage_options=opts))

    def manifest_options(self) -> dict:
        """fsspec options for manifests_dir (a folder or s3://...; AWS_* of this process)."""
        return StorageLocation.from_env(self.manifests_dir).fsspec_options()

    def acceptance_options(self) -> dict[str, str]:
        """delta-rs options for the site acceptance table."""
        return StorageLocation.from_env(self.acceptance_uri).delta_options()


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources={"catalog": CatalogResource()})
