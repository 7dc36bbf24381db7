"""The one entry point shared by `robodata curate` and the `manifest` asset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from robodata.catalog.table import Catalog, CatalogConfig
from robodata.curate.manifest import ManifestInfo, write_manifest
from robodata.curate.select import Selection, select
from robodata.curate.spec import CurationSpec, load_spec


def curate(
    spec: CurationSpec | str | Path,
    catalog: Catalog | CatalogConfig | str,
    out_dir: str | Path,
    *,
    catalog_version: int | None = None,
    storage_options: dict[str, Any] | None = None,
) -> tuple[ManifestInfo, Selection]:
    """Evaluate `spec` over `catalog` and write its manifest under `out_dir` (a folder or an
    object-store URI reached with the fsspec `storage_options`)."""
    base_dir = None
    if not isinstance(spec, CurationSpec):
        base_dir = Path(spec).parent
        spec = load_spec(spec)
    if not isinstance(catalog, Catalog):
        catalog = Catalog(catalog)
    selection = select(spec, catalog, base_dir=base_dir, catalog_version=catalog_version)
    return write_manifest(selection, out_dir, spec.name, storage_options), selection
