"""Where the episode catalog, manifests and the acceptance table live (one resource).

Empty fields follow the state root (`root`, else ROBODATA_STORAGE_ROOT, else .demo; resolved when a
step uses them), so with ROBODATA_STORAGE_ROOT=s3://bucket/prefix all three are on S3 (reached with
the AWS_* variables of the process that runs the step)."""

from typing import TYPE_CHECKING

import dagster as dg
from pydantic import Field

from robodata_dagster.lib.env import state_root
from robodata_dagster.lib.registry import SpecDirs
from robodata_dagster.lib.settings import to_settings

if TYPE_CHECKING:
    from robodata.catalog.table import Catalog
    from robodata.storage import StateRoot


class CatalogResource(dg.ConfigurableResource):
    root: str = Field(default="", description="state root; empty: ROBODATA_STORAGE_ROOT, else .demo")
    uri: str = Field(default="", description="catalog Delta table; empty: <root>/catalog/episodes (ingestion's)")
    manifests_dir: str = Field(default="", description="empty: <root>/manifests")
    acceptance_uri: str = Field(
        default="", description="site acceptance Delta table; empty: <root>/catalog/site_acceptance"
    )

    def state(self) -> "StateRoot":
        return state_root(self.root)

    def catalog_uri(self) -> str:
        return self.uri or self.state().catalog

    def manifests_uri(self) -> str:
        return self.manifests_dir or self.state().manifests

    def acceptance_table(self) -> str:
        return self.acceptance_uri or self.state().acceptance

    def catalog(self) -> "Catalog":
        """On S3 with the delta-rs options of this process's AWS_* variables (as ingestion writes it)."""
        from robodata.catalog.table import Catalog, CatalogConfig
        from robodata.storage import StorageLocation

        uri = self.catalog_uri()
        return Catalog(CatalogConfig(uri=uri, storage_options=StorageLocation.from_env(uri).delta_options()))

    def manifest_options(self) -> dict:
        """fsspec options for the manifests folder (a folder or s3://...; AWS_* of this process)."""
        from robodata.storage import StorageLocation

        return StorageLocation.from_env(self.manifests_uri()).fsspec_options()

    def acceptance_options(self) -> dict[str, str]:
        """delta-rs options for the site acceptance table."""
        from robodata.storage import StorageLocation

        return StorageLocation.from_env(self.acceptance_table()).delta_options()


class SpecsResource(dg.ConfigurableResource):
    """lib.registry.SpecDirs: where the named curation specs and training configs are (relative
    paths: from the code location's working directory)."""

    curation_dir: str = "specs/curation"
    training_dir: str = "specs/training"

    def dirs(self) -> SpecDirs:
        return to_settings(SpecDirs, self)
