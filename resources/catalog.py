"""Where the episode catalog, manifests and the acceptance table live (one resource)."""
import os
from pathlib import Path

import dagster as dg

from robodata.catalog.table import Catalog, CatalogConfig

_ROOT = os.environ.get("ROBODATA_ROOT", ".demo")


class CatalogResource(dg.ConfigurableResource):
    uri: str = os.environ.get("ROBODATA_CATALOG", str(Path(_ROOT, "catalog", "episodes")))
    manifests_dir: str = os.environ.get("ROBODATA_MANIFESTS", str(Path(_ROOT, "manifests")))
    acceptance_uri: str = os.environ.get("ROBODATA_ACCEPTANCE", str(Path(_ROOT, "catalog", "site_acceptance")))

    def catalog(self) -> Catalog:
        return Catalog(CatalogConfig(uri=self.uri))


RESOURCES = {"catalog": CatalogResource()}
