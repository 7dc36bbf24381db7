"""Where the episode catalog, manifests and the acceptance table live (one resource)."""
import os

import dagster as dg

from resources.ingest import default_root
from robodata.catalog.table import Catalog, CatalogConfig
from robodata.storage import StorageLocation

_ROOT = default_root().rstrip("/")   # the ingestion root: ingestion merges into <root>/catalog/episodes


class CatalogResource(dg.ConfigurableResource):
    uri: str = os.environ.get("ROBODATA_CATALOG", f"{_ROOT}/catalog/episodes")
    manifests_dir: str = os.environ.get("ROBODATA_MANIFESTS", f"{_ROOT}/manifests")
    acceptance_uri: str = os.environ.get("ROBODATA_ACCEPTANCE", f"{_ROOT}/catalog/site_acceptance")

    def catalog(self) -> Catalog:
        """On S3 with the delta-rs options of this process's AWS_* variables (as ingestion writes it)."""
        opts = StorageLocation.from_env(self.uri).delta_options()
        return Catalog(CatalogConfig(uri=self.uri, storage_options=opts))


RESOURCES = {"catalog": CatalogResource()}
