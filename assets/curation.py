"""Curation assets: the manifest of each named curation spec (content-addressed) and site acceptance yield.

Both are thin: the work is robodata.curate.run.curate and robodata.curate.acceptance.evaluate.
`manifest` is partitioned by spec name (assets/partitions.py): partition "demo" curates
specs/curation/demo.yaml. Its materialization names the manifest (path, content hash, spec hash,
the catalog Delta version its rows were selected at), which training_run reads through its
partition mapping, and the catalog version this run read (`catalog_version_read`), which the
catalog automation compares with the catalog's (sensors/automation.py). A manifest is its rows
and its spec (content hash scheme v3): a refresh that selects the same rows writes no new file and
keeps the data version, so nothing downstream is marked changed.
"""

from datetime import date, timedelta

import dagster as dg

from robodata_dagster.assets.partitions import CURATION_SPECS
from robodata_dagster.lib import steps
from robodata_dagster.lib.lineage import ManifestRef
from robodata_dagster.lib.metadata import COLUMN_SCHEMA, ROW_COUNT, delta_metadata, table_schema
from robodata_dagster.lib.previews import manifest_previews
from robodata_dagster.lib.refresh import SPEC_DIGEST_TAG
from robodata_dagster.lib.registry import CURATION_SPEC, curation_spec, digest
from robodata_dagster.resources.catalog import CatalogResource, SpecsResource

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
    kinds={"parquet", "polars"},
    io_manager_key="manifest_io_manager",
    description="Immutable, content-addressed training manifest of a named curation spec over the catalog.",
)
def manifest(
    context: dg.AssetExecutionContext, config: ManifestConfig, catalog: CatalogResource, specs: SpecsResource
) -> dg.MaterializeResult[ManifestRef]:
    from robodata.catalog.schema import MANIFEST_SCHEMA
    from robodata.curate.run import curate
    from robodata.dataset.normstats import corpus_summary

    version = None if config.catalog_version < 0 else config.catalog_version
    dirs = specs.dirs()
    # which spec file this run read, on the run (a config failure waits for the file to change)
    context.instance.add_run_tags(
        context.run.run_id, {SPEC_DIGEST_TAG: digest(dirs, CURATION_SPEC, context.partition_key)}
    )
    spec_file, spec = curation_spec(dirs, context.partition_key)
    info, selection = curate(
        spec,
        catalog.catalog(),
        catalog.manifests_uri(),
        catalog_version=version,
        storage_options=catalog.manifest_options(),
        base_dir=spec_file.parent,  # the spec's episode_ids_file is relative to its folder
    )
    context.log.info(
        f"manifest {info.path}: {info.episodes} episodes, catalog v{info.catalog_version}"
        f" (read v{info.read_version}; decided by {selection.evaluated_by})"
    )
    ref = ManifestRef(
        partition=context.partition_key,
        path=str(info.path),
        content_hash=info.content_hash,
        spec_hash=info.spec_hash,
        catalog_version=info.catalog_version,
    )
    return dg.MaterializeResult(  # not dg.Output: its data_version is a beta parameter
        value=ref,
        metadata={
            "path": dg.MetadataValue.path(str(info.path)),
            "spec": dg.MetadataValue.path(str(spec_file)),
            "content_hash": info.content_hash,
            "spec_hash": info.spec_hash,
            "catalog_version": info.catalog_version,
            "catalog_version_read": info.read_version,
            "episodes": info.episodes,
            "hours": round(info.hours, 3),
            "train_episodes": info.train_episodes,
            "val_episodes": info.val_episodes,
            "groups": dg.MetadataValue.json(selection.groups),
            "mixture": dg.MetadataValue.json(corpus_summary(selection.rows.to_arrow())),  # per corpus, roles found
            "evaluated_by": selection.evaluated_by,  # "budget order", or "plain scan: <why>"
            COLUMN_SCHEMA: table_schema(MANIFEST_SCHEMA),
            ROW_COUNT: info.episodes,
            **manifest_previews(str(info.path), catalog.manifest_options()),
        },
        data_version=dg.DataVersion(info.content_hash),
    )


@steps.asset(
    "light",
    group_name=GROUP,
    deps=[dg.AssetKey("episode_metadata")],
    kinds={"delta", "polars"},
    description="New episodes against per-site acceptance criteria; per robot/shift yield vs target (Delta).",
)
def site_acceptance(
    context: dg.AssetExecutionContext, config: AcceptanceConfigPath, catalog: CatalogResource
) -> dg.MaterializeResult:
    from robodata.curate.acceptance import YIELD_SCHEMA, evaluate, load_acceptance, read_yield, summary_markdown
    from robodata.curate.acceptance_plot import png_markdown, yield_png
    from robodata.ingest.tables import open_table

    opts = catalog.acceptance_options()
    result = evaluate(load_acceptance(config.config), catalog.catalog(), catalog.acceptance_table(), opts)
    # plot / summarise the two weeks up to the newest evaluated day (not the whole history)
    since = None
    if result.days:
        since = (date.fromisoformat(max(result.days)) - timedelta(days=14)).isoformat()
    table = read_yield(catalog.acceptance_table(), opts, since_day=since)
    below = int((~table["meets_target"]).sum()) if table.height else 0
    dt = open_table(catalog.acceptance_table(), opts)
    rows = dt.to_pyarrow_dataset().count_rows() if dt is not None else 0
    return dg.MaterializeResult(
        metadata={
            **delta_metadata(catalog.acceptance_table(), YIELD_SCHEMA, rows),
            "catalog_version": result.catalog_version,
            "days_evaluated": dg.MetadataValue.json(result.days),
            "episodes_evaluated": result.episodes,
            "shifts_updated": result.shifts.height,
            "shifts_below_target": below,
            "yield_plot": dg.MetadataValue.md(png_markdown(yield_png(table))),
            "latest_shifts": dg.MetadataValue.md(summary_markdown(table)),
        }
    )
