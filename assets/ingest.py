"""Ingestion as software-defined assets, partitioned by batch (never by episode).

raw_episodes -> aligned_tracks -> episodes -> qc_results -> episode_metadata   (critical path)
                                   episodes -> segments, features              (non-critical leaves)
QC runs as asset checks (checks.py). Per-episode facts go to Delta tables under
<root>/ingest/; each step emits one materialization with batch-level counts.
"""

import dagster as dg
from robodata_dagster.assets.partitions import INGEST_BATCH, batch_key
from robodata_dagster.resources.ingest import IngestResource

from robodata.ingest.steps.aligned_tracks import align_batch
from robodata.ingest.steps.derived import features_batch, segments_batch
from robodata.ingest.steps.episode_metadata import metadata_batch
from robodata.ingest.steps.episodes import convert_batch
from robodata.ingest.steps.qc_results import qc_rollup
from robodata.ingest.steps.raw_episodes import observe
from robodata_dagster.lib import steps

GROUP = "ingest"


def _result(out: dict, **extra) -> dg.MaterializeResult:
    md = {k: (dg.MetadataValue.json(v) if isinstance(v, (dict, list)) else v) for k, v in {**out, **extra}.items()}
    return dg.MaterializeResult(metadata=md)


@steps.asset(
    "light",
    partitions_def=INGEST_BATCH,
    group_name=GROUP,
    description="Landing-zone items of the batch (Delta raw_episodes).",
)
def raw_episodes(context: dg.AssetExecutionContext, ingest: IngestResource) -> dg.MaterializeResult:
    paths = ingest.paths()
    return _result(observe(paths, batch_key(context)), table=paths.table("raw_episodes"))


@steps.asset(
    "encode",
    partitions_def=INGEST_BATCH,
    group_name=GROUP,
    deps=[raw_episodes],
    description="Every stream on one timeline: clock fits, timing stats, alignment error (Delta aligned_tracks).",
)
def aligned_tracks(context: dg.AssetExecutionContext, ingest: IngestResource) -> dg.MaterializeResult:
    paths = ingest.paths()
    return _result(align_batch(paths, batch_key(context), ingest.settings()), table=paths.table("aligned_tracks"))


@steps.asset(
    "encode",
    partitions_def=INGEST_BATCH,
    group_name=GROUP,
    deps=[aligned_tracks],
    description="One container per accepted episode; workers pull episodes largest-first (Delta conversions).",
)
def episodes(context: dg.AssetExecutionContext, ingest: IngestResource) -> dg.MaterializeResult:
    paths = ingest.paths()
    return _result(convert_batch(paths, batch_key(context), ingest.settings()), table=paths.table("conversions"))


@steps.asset(
    "light",
    partitions_def=INGEST_BATCH,
    group_name=GROUP,
    deps=[episodes],
    description="Per-episode QC outcomes with reasons; one summary row per episode (Delta qc_results).",
)
def qc_results(context: dg.AssetExecutionContext, ingest: IngestResource) -> dg.MaterializeResult:
    paths = ingest.paths()
    return _result(qc_rollup(paths, batch_key(context)), table=paths.table("qc_results"))


@steps.asset(
    "light",
    partitions_def=INGEST_BATCH,
    group_name=GROUP,
    deps=[episodes, qc_results],
    description="Catalog rows (CATALOG_SCHEMA) from container footers, merged by episode_id.",
)
def episode_metadata(context: dg.AssetExecutionContext, ingest: IngestResource) -> dg.MaterializeResult:
    return _result(metadata_batch(ingest.paths(), batch_key(context)))


@steps.asset(
    "light",
    partitions_def=INGEST_BATCH,
    group_name=GROUP,
    deps=[episodes, qc_results],
    description="Task-phase segments from events / gripper state (non-critical; Delta segments).",
)
def segments(context: dg.AssetExecutionContext, ingest: IngestResource) -> dg.MaterializeResult:
    paths = ingest.paths()
    return _result(segments_batch(paths, batch_key(context)), table=paths.table("segments"))


@steps.asset(
    "encode",
    partitions_def=INGEST_BATCH,
    group_name=GROUP,
    deps=[episodes, qc_results],
    description="Per-episode motion and visual statistics (non-critical; Delta features).",
)
def features(context: dg.AssetExecutionContext, ingest: IngestResource) -> dg.MaterializeResult:
    paths = ingest.paths()
    return _result(features_batch(paths, batch_key(context), ingest.visual_frames), table=paths.table("features"))
