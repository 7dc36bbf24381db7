"""landing_zone_sensor: new complete recordings -> batch partitions -> staggered `bulk` runs.

Listing, batching and the stagger policy are Dagster-free (robodata.ingest.landing.launches); this file
only turns a tick into dynamic-partition requests and run requests. Configure with env vars:
ROBODATA_LANDING (local dir or s3://bucket/prefix), ROBODATA_ROOT (ingest state root: local dir or
s3://...; default ROBODATA_STORAGE_ROOT, else .demo), ROBODATA_BATCH_ITEMS, ROBODATA_SETTLE_S,
ROBODATA_MAX_CONCURRENT_RUNS, ROBODATA_RUN_S. S3 endpoint and credentials: the AWS_* variables.
"""

import json
import os

import dagster as dg

from robodata.ingest.landing.launches import BatchPolicy, LaunchState, tick
from robodata.ingest.landing.stagger import StaggerPolicy
from robodata.ingest.tables import IngestPaths
from robodata_dagster.defs.ingest.jobs import profile_config
from robodata_dagster.defs.ingest.partitions import INGEST_BATCH
from robodata_dagster.defs.ingest.resources import default_root


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _evaluate(
    context: dg.SensorEvaluationContext, profile: str, batches: BatchPolicy, stagger: StaggerPolicy
) -> dg.SensorResult:
    root = default_root()
    landing = _env("ROBODATA_LANDING", os.path.join(root, "landing"))
    state = LaunchState()
    if context.cursor:
        state.load_state_dict(json.loads(context.cursor))
    t = tick(state, landing, IngestPaths(root), batches, stagger)
    runs = [dg.RunRequest(run_key=b, partition_key=b, run_config=profile_config(profile, root=root)) for b in t.launch]
    return dg.SensorResult(
        run_requests=runs,
        cursor=json.dumps(state.state_dict()),
        dynamic_partitions_requests=[INGEST_BATCH.build_add_request(t.new_batches)] if t.new_batches else [],
    )


@dg.sensor(
    job_name="bulk",
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Lists the landing zone with a cursor, cuts batches, requests staggered `bulk` runs.",
)
def landing_zone_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    return _evaluate(
        context,
        "bulk",
        BatchPolicy(
            max_items=int(_env("ROBODATA_BATCH_ITEMS", "1000")), settle_s=float(_env("ROBODATA_SETTLE_S", "2"))
        ),
        StaggerPolicy(
            max_concurrent=int(_env("ROBODATA_MAX_CONCURRENT_RUNS", "8")), run_s=float(_env("ROBODATA_RUN_S", "60"))
        ),
    )


@dg.sensor(
    job_name="live",
    minimum_interval_seconds=5,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Per-arrival ingestion: whatever landed since the last tick (small batches), launched at once.",
)
def landing_zone_live_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
    return _evaluate(
        context,
        "live",
        BatchPolicy(max_items=int(_env("ROBODATA_LIVE_BATCH_ITEMS", "16")), settle_s=0.5),
        StaggerPolicy(max_concurrent=int(_env("ROBODATA_MAX_CONCURRENT_RUNS", "8")), run_s=0.0),
    )
