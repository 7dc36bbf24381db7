"""Curation assets: the manifest of each named curation spec (content-addressed) and site acceptance yield.

Both are thin: the work is robodata.curate.run.curate and robodata.curate.acceptance.evaluate.
`manifest` is partitioned by spec name (assets/partitions.py): partition "demo" curates
specs/curation/demo.yaml. Its materialization names the manifest (path, content hash, spec hash,
catalog Delta version), which training_run reads through its partition mapping.
"""

from datetime import date, timedelta

import dagster as dg
from robodata_dagster.assets.partitions import CURATION_SPECS
from robodata_dagster.resources.catalog import CatalogResource, SpecsResource

from robodata.curate.acceptance import evaluate, load_acceptance, read_yield, summary_markdown
from robodata.curate.acceptance_plot import png_markdown, yield_png
from robodata.curate.run import curate
from robodata_dagster.lib import steps
from robodata_dagster.lib.registry import curation_spec

GROUP = "curation"


class ManifestConfig(dg.Config):
    catalog_version: int = -1  # -1: the spec's pin, else the latest catalog version


class AcceptanceConfigPath(dg.Config):
    config: str = "specs/site_acceptance.yaml"


@steps.asset(
    "light",
    group_name=GROUP,
    partitions_def=CURATION_SPECS,
    deps=[dg.AssetDep("episode_metadata", partition_mapping=dg.AllPartitionMapping())],  # the whole catalog
    description="Immutable, content-addressed training manifest of a named curation spec over the catalog.",
)
def manifest(
    context: dg.AssetExecutionContext, config: ManifestConfig, catalog: CatalogResource, specs: SpecsResource
) -> dg.MaterializeResult:
    version = None if config.catalog_version < 0 else config.catalog_version
    spec = curation_spec(specs.dirs(), context.partition_key)
    info, selection = curate(
        str(spec),
        catalog.catalog(),
        catalog.manifests_uri(),
        catalog_version=version,
        storage_options=catalog.manifest_options(),
    )
    context.log.info(f"manifest {info.path}: {info.episodes} episodes, catalog v{info.catalog_version}")
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(info.path)),
            "spec": dg.MetadataValue.path(str(spec)),
            "content_hash": info.content_hash,
            "spec_hash": info.spec_hash,
            "catalog_version": info.catalog_version,
            "episodes": info.episodes,
            "hours": round(info.hours, 3),
            "train_episodes": info.train_episodes,
            "val_episodes": info.val_episodes,
            "groups": dg.MetadataValue.json(selection.groups),
        },
        data_version=dg.DataVersion(info.content_hash),
    )


@steps.asset(
    "light",
    group_name=GROUP,
    deps=[dg.AssetKey("episode_metadata")],
    description="New episodes against per-site acceptance criteria; per robot/shift yield vs target (Delta).",
)
def site_acceptance(
    context: dg.AssetExecutionContext, config: AcceptanceConfigPath, catalog: CatalogResource
) -> dg.MaterializeResult:
    opts = catalog.acceptance_options()
    result = evaluate(load_acceptance(config.config), catalog.catalog(), catalog.acceptance_table(), opts)
    # plot / summarise the two weeks up to the newest evaluated day (not the whole history)
    since = None
    if result.days:
        since = (date.fromisoformat(max(result.days)) - timedelta(days=14)).isoformat()
    table = read_yield(catalog.acceptance_table(), opts, since_day=since)
    below = int((~table["meets_target"]).sum()) if table.height else 0
    return dg.MaterializeResult(
        metadata={
            "table": dg.MetadataValue.path(catalog.acceptance_table()),
            "catalog_version": result.catalog_version,
            "days_evaluated": dg.MetadataValue.json(result.days),
            "episodes_evaluated": result.episodes,
            "shifts_updated": result.shifts.height,
            "shifts_below_target": below,
            "yield_plot": dg.MetadataValue.md(png_markdown(yield_png(table))),
            "latest_shifts": dg.MetadataValue.md(summary_markdown(table)),
        }
    )
