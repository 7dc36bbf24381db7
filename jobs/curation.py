"""Curation jobs: `curation` materializes `manifest` partitions (one per named spec); `acceptance`
materializes `site_acceptance` (the catalog's new days against the acceptance criteria). Both assets
also refresh themselves when the catalog changes (declarative automation, sensors/automation.py),
tagged the same way."""

import dagster as dg

CURATION_RUN_TAGS = {"robodata/run-kind": "curation", "robodata/profile": "curation"}

curation_job = dg.define_asset_job(
    "curation",
    selection=dg.AssetSelection.assets("manifest"),
    tags=CURATION_RUN_TAGS,
    description="Curate the catalog into the manifest of a named spec (partition: the spec's name).",
)
site_acceptance_job = dg.define_asset_job(
    "acceptance",
    selection=dg.AssetSelection.assets("site_acceptance"),
    tags=CURATION_RUN_TAGS,
    description="Evaluate new episodes against the per-site acceptance criteria.",
)
