"""Run profiles: one asset set, selected and configured per purpose (no forked pipeline).

full               every ingestion asset and QC check of a batch
metadata_backfill  episode_metadata only: catalog rows recomputed from container footers (no video)
relabel            segments + features only, from existing containers
live               full graph, per arrival: in-process executor, one worker, fastest preset
bulk               full graph for throughput: a conversion process per core, each on one thread

All profiles run their steps in one process (in_process_executor): the parallel work happens in
the conversion / alignment worker processes of a step (work bins), so a process (or pod) per step
would only add start-up time and ~45 event-log rows per run (123 instead of 79 measured). In prod
the run pod itself is sized for encoding: the `dagster-k8s/config` run tag from
step_resources("encode"), which the k8s run launcher applies to the run's pod; batch runs carry
BATCH_RUN_TAGS so the run queue limits how many run at once.
"""

from typing import Any

import dagster as dg

from robodata_dagster.lib.deployment import BATCH_RUN_TAGS
from robodata_dagster.lib.step_kinds import step_resources

INGEST = dg.AssetSelection.groups("ingest")

# `ingest` resource fields per profile. bulk: a conversion process per core of the machine that runs
# the step, each on one thread (IngestSettings.for_bulk, applied when the step runs).
PROFILE_FIELDS: dict[str, dict[str, Any]] = {
    "live": {"workers": 1, "decode_threads": 1, "video": {"preset": "ultrafast"}, "visual_frames": 2},
    "bulk": {"bulk": True},
}


def profile_config(profile: str, **fields: Any) -> dict[str, Any]:
    """Run config for a profile: its fields plus the caller's (e.g. root). Pass it whole when
    launching: a launch's run config replaces the job's defaults, it is not merged into them."""
    return {"resources": {"ingest": {"config": {**PROFILE_FIELDS.get(profile, {}), **fields}}}}


def _cfg(**fields: Any) -> dict[str, Any]:
    return {"resources": {"ingest": {"config": fields}}} if fields else {}


RUN_TAGS = {**BATCH_RUN_TAGS, **step_resources("encode")}

full_job = dg.define_asset_job(
    "full",
    selection=INGEST,
    executor_def=dg.in_process_executor,
    tags=RUN_TAGS,
    description="All ingestion assets and checks for one batch.",
)
metadata_backfill_job = dg.define_asset_job(
    "metadata_backfill",
    selection=dg.AssetSelection.assets("episode_metadata").without_checks(),
    tags=BATCH_RUN_TAGS,
    description="Recompute catalog rows from existing containers (footers only).",
)
relabel_job = dg.define_asset_job(
    "relabel",
    selection=dg.AssetSelection.assets("segments", "features").without_checks(),
    tags=BATCH_RUN_TAGS,
    description="Recompute segments and features only.",
)
live_job = dg.define_asset_job(
    "live",
    selection=INGEST,
    executor_def=dg.in_process_executor,
    config=_cfg(**PROFILE_FIELDS["live"]),
    tags={**RUN_TAGS, "robodata/profile": "live"},
    description="Low latency, small batches.",
)
bulk_job = dg.define_asset_job(
    "bulk",
    selection=INGEST,
    executor_def=dg.in_process_executor,
    config=_cfg(**PROFILE_FIELDS["bulk"]),
    tags={**RUN_TAGS, "robodata/profile": "bulk"},
    description="Throughput: bins on every core.",
)
