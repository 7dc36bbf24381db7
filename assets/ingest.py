"""Ingestion as software-defined assets, partitioned by batch (never by episode).

raw_episodes -> aligned_tracks -> episodes -> qc_results -> episode_metadata   (critical path)
                                   episodes -> segments, features              (non-critical leaves)
QC runs as asset checks (ingest_checks.py). Per-episode facts go to Delta tables under
<root>/ingest/; each step emits one materialization with batch-level counts, the table's column
schema and this batch's row count (lib/metadata.py). The core (robodata.ingest.steps) is imported
inside the step bodies, so loading the definitions never imports PyAV, pyarrow or deltalake.

Where to extend: a new setting of ingestion goes on IngestResource (resources/ingest.py, mirrored
field for field from robodata.ingest.settings.IngestSettings); batch-level facts a step returns
(e.g. previews, QC summaries) become metadata here through `_result`.
"""

from datetime import timedelta
from typing import Any

import dagster as dg

from robodata_dagster.assets.partitions import INGEST_BATCH, batch_key
from robodata_dagster.lib import steps
from robodata_dagster.lib.metadata import delta_metadata
from robodata_dagster.lib.previews import batch_previews
from robodata_dagster.resources.ingest import IngestResource

GROUP = "ingest"
# The catalog should take new batches at least daily (warn after 6 h without one).
CATALOG_FRESHNESS = dg.FreshnessPolicy.time_window(fail_window=timedelta(hours=24), warn_window=timedelta(hours=6))


def _result(out: dict, table: dict[str, Any] | None = None, **extra: Any) -> dg.MaterializeResult:
    md = {k: (dg.MetadataValue.json(v) if isinstance(v, (dict, list)) else v) for k, v in {**out, **extra}.items()}
    return dg.MaterializeResult(metadata={**md, **(table or {})})


def _batch_table(ingest: IngestResource, name: str, batch: str, schema: Any) -> dict[str, Any]:
    """Delta metadata of ingest table `name`: its schema and the rows this batch holds in it."""
    paths = ingest.paths()
    rows = paths.read(name, batch, columns=[schema.names[0]]).num_rows if paths.has(name) else 0
    return delta_metadata(paths.table(name), schema, rows)


@steps.asset(
    "light",
    partitions_def=INGEST_BATCH,
    group_name=GROUP,
    kinds={"delta", "python"},
    description="Landing-zone items of the batch (Delta raw_episodes).",
)
def raw_episodes(context: dg.AssetExecutionContext, ingest: IngestResource) -> dg.MaterializeResult:
    from robodata.ingest.steps.raw_episodes import RAW_SCHEMA, observe

    batch = batch_key(context)
    out = observe(ingest.paths(), batch)
    return _result(out, _batch_table(ingest, "raw_episodes", batch, RAW_SCHEMA))


@steps.asset(
    "encode",
    partitions_def=INGEST_BATCH,
    group_name=GROUP,
    deps=[raw_episodes],
    kinds={"delta", "python"},
    description=(
        "Every stream on one timeline: clock fits, timing stats, alignment error (Delta aligned_tracks); "
        "MCAP, bags, RLDS and LeRobot episodes are also converted in this one read, into staged containers."
    ),
)
def aligned_tracks(context: dg.AssetExecutionContext, ingest: IngestResource) -> dg.MaterializeResult:
    from robodata.ingest.steps.aligned_tracks import ALIGNED_SCHEMA, align_batch

    batch = batch_key(context)
    out = align_batch(ingest.paths(), batch, ingest.settings())
    return _result(out, _batch_table(ingest, "aligned_tracks", batch, ALIGNED_SCHEMA))


@steps.asset(
    "encode",
    partitions_def=INGEST_BATCH,
    group_name=GROUP,
    deps=[aligned_tracks],
    kinds={"video", "delta"},
    description=(
        "One container per accepted episode: staged ones committed, the rest converted by workers pulling "
        "episodes largest-first (Delta conversions)."
    ),
)
def episodes(context: dg.AssetExecutionContext, ingest: IngestResource) -> dg.MaterializeResult:
    from robodata.ingest.steps.episodes import CONVERSION_SCHEMA, convert_batch

    batch = batch_key(context)
    out = convert_batch(ingest.paths(), batch, ingest.settings())
    return _result(out, _batch_table(ingest, "conversions", batch, CONVERSION_SCHEMA))


@steps.asset(
    "light",
    partitions_def=INGEST_BATCH,
    group_name=GROUP,
    deps=[episodes],
    kinds={"delta", "python"},
    description=(
        "Per-episode QC outcomes with reasons; one summary row per episode (Delta qc_results); "
        "previews: thumbnails and a joint plot of a few episodes, frames around quarantine failures."
    ),
)
def qc_results(context: dg.AssetExecutionContext, ingest: IngestResource) -> dg.MaterializeResult:
    from robodata.ingest.steps.qc_results import QC_SCHEMA, qc_rollup

    batch = batch_key(context)
    paths = ingest.paths()
    out = qc_rollup(paths, batch)
    return _result(out, _batch_table(ingest, "qc_results", batch, QC_SCHEMA), **batch_previews(paths, batch))


@steps.asset(
    "light",
    partitions_def=INGEST_BATCH,
    group_name=GROUP,
    deps=[episodes, qc_results],
    kinds={"delta", "python"},
    freshness_policy=CATALOG_FRESHNESS,
    description="Catalog rows (CATALOG_SCHEMA) from container footers, merged by episode_id.",
)
def episode_metadata(context: dg.AssetExecutionContext, ingest: IngestResource) -> dg.MaterializeResult:
    from robodata.catalog.schema import CATALOG_SCHEMA
    from robodata.ingest.steps.episode_metadata import metadata_batch

    paths = ingest.paths()
    out = metadata_batch(paths, batch_key(context))
    return _result(out, delta_metadata(paths.catalog, CATALOG_SCHEMA, out["rows"]))


@steps.asset(
    "light",
    partitions_def=INGEST_BATCH,
    group_name=GROUP,
    deps=[episodes, qc_results],
    kinds={"delta", "python"},
    description="Task-phase segments from events / gripper state (non-critical; Delta segments).",
)
def segments(context: dg.AssetExecutionContext, ingest: IngestResource) -> dg.MaterializeResult:
    from robodata.ingest.steps.derived import SEGMENT_SCHEMA, segments_batch

    batch = batch_key(context)
    out = segments_batch(ingest.paths(), batch)
    return _result(out, _batch_table(ingest, "segments", batch, SEGMENT_SCHEMA))


@steps.asset(
    "encode",
    partitions_def=INGEST_BATCH,
    group_name=GROUP,
    deps=[episodes, qc_results],
    kinds={"delta", "python"},
    description="Per-episode motion and visual statistics (non-critical; Delta features).",
)
def features(context: dg.AssetExecutionContext, ingest: IngestResource) -> dg.MaterializeResult:
    from robodata.ingest.steps.derived import FEATURE_SCHEMA, features_batch

    batch = batch_key(context)
    out = features_batch(ingest.paths(), batch, ingest.visual_frames)
    return _result(out, _batch_table(ingest, "features", batch, FEATURE_SCHEMA))
