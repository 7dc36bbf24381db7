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
    base_dir: str | Path | None = None,
) -> tuple[ManifestInfo, Selection]:
    """Evaluate `spec` over `catalog` and write its immutable manifest under `out_dir`.

    Args:
        spec: a CurationSpec, or the path of a spec file (YAML or JSON).
        catalog: the catalog (a Catalog, its config, or its URI).
        out_dir: a local folder or an object-store URI for the manifest.
        catalog_version: evaluate at this catalog version (default: the spec's pin, else latest).
        storage_options: fsspec options for an object-store `out_dir`.
        base_dir: the folder a spec's `exclude.episode_ids_file` is relative to and confined to;
            default the spec file's folder (a CurationSpec object has none unless given here).

    Returns:
        (ManifestInfo of the written manifest, the Selection it holds).

    Raises:
        ConfigError: the spec (file) is invalid; the message names the field.
        CatalogError: the catalog (or the pinned version) cannot be read.
        ManifestError: a manifest of that name exists with other content.
    """
    root = Path(base_dir) if base_dir is not None else None
    if not isinstance(spec, CurationSpec):
        root = root if root is not None else Path(spec).parent
        spec = load_spec(spec)
    if not isinstance(catalog, Catalog):
        catalog = Catalog(catalog)
    selection = select(spec, catalog, base_dir=root, catalog_version=catalog_version)
    return write_manifest(selection, out_dir, spec.name, storage_options), selection
