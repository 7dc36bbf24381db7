"""landing_zone_sensor: new complete recordings -> batch partitions -> staggered `bulk` runs
(landing_zone_live_sensor: the same per arrival, small batches, `live` runs).

Listing, batching and the stagger policy are Dagster-free (robodata.ingest.landing.launches); this
file only turns a tick into dynamic-partition requests and run requests. Where to list and how to
cut and launch: the `landing` resource; the state root: the `ingest` resource (resources/ingest.py).
"""

import json

import dagster as dg

from robodata_dagster.assets.partitions import INGEST_BATCH
from robodata_dagster.jobs.ingest import profile_config
from robodata_dagster.resources.ingest import IngestResource, LandingResource, LaunchConfig


def _evaluate(
    context: dg.SensorEvaluationContext, profile: str, ingest: IngestResource, landing: str, launch: LaunchConfig
) -> dg.SensorResult:
    from robodata.ingest.landing.launches import LaunchState, tick

    root = ingest.root_uri()
    batches, stagger = launch.policies()
    state = LaunchState()
    if context.cursor:
        state.load_state_dict(json.loads(context.cursor))
    t = tick(state, landing, ingest.paths(), batches, stagger)  # the steps' own derivation
    if t.already_cataloged:
        context.log.info(f"{t.already_cataloged} of {t.items} listed items are cataloged already (same content)")
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
def landing_zone_sensor(
    context: dg.SensorEvaluationContext, ingest: IngestResource, landing: LandingResource
) -> dg.SensorResult:
    return _evaluate(context, "bulk", ingest, landing.landing_uri(ingest.state()), landing.bulk)


@dg.sensor(
    job_name="live",
    minimum_interval_seconds=5,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Per-arrival ingestion: whatever landed since the last tick (small batches), launched at once.",
)
def landing_zone_live_sensor(
    context: dg.SensorEvaluationContext, ingest: IngestResource, landing: LandingResource
) -> dg.SensorResult:
    return _evaluate(context, "live", ingest, landing.landing_uri(ingest.state()), landing.live)
