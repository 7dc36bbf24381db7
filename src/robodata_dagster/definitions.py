"""The robodata code location, declared explicitly.

    dagster dev -m robodata_dagster.definitions        (or -w workspace.yaml)

Every asset, check, job, sensor, schedule and resource of robodata_dagster.{assets,resources,
sensors,jobs} is listed here (tests/platform/test_definitions.py fails on one that is not). The
default executor comes from the deployment (ROBODATA_DEPLOYMENT=local|prod; lib/deployment.py),
read when the definitions are built, never at import.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import dagster as dg

from robodata_dagster.assets import curation, ingest, ingest_checks, layout, training
from robodata_dagster.jobs import ingest as ingest_jobs
from robodata_dagster.jobs import layout as layout_jobs
from robodata_dagster.jobs import maintenance
from robodata_dagster.jobs import training as training_jobs
from robodata_dagster.lib.deployment import Deployment
from robodata_dagster.resources.catalog import CatalogResource, SpecsResource
from robodata_dagster.resources.cluster import ClusterRepairResource
from robodata_dagster.resources.ingest import IngestResource, LandingResource
from robodata_dagster.sensors import cluster, specs
from robodata_dagster.sensors import ingest as ingest_sensors

ASSETS = [
    ingest.raw_episodes,
    ingest.aligned_tracks,
    ingest.episodes,
    ingest.qc_results,
    ingest.episode_metadata,
    ingest.segments,
    ingest.features,
    curation.manifest,
    curation.site_acceptance,
    training.training_run,
    layout.layout_plan,
    layout.relaid_containers,
]
ASSET_CHECKS = [ingest_checks.qc_pre_conversion, ingest_checks.qc_post_conversion]
JOBS: list[Any] = [  # job definitions and unresolved asset jobs
    ingest_jobs.full_job,
    ingest_jobs.metadata_backfill_job,
    ingest_jobs.relabel_job,
    ingest_jobs.live_job,
    ingest_jobs.bulk_job,
    training_jobs.training_job,
    layout_jobs.relayout_job,
    maintenance.event_log_cleanup,
    maintenance.catalog_compaction,
]
SCHEDULES = [maintenance.event_log_cleanup_schedule, maintenance.catalog_compaction_schedule]
SENSORS = [
    ingest_sensors.landing_zone_sensor,
    ingest_sensors.landing_zone_live_sensor,
    specs.spec_registry_sensor,
    cluster.cluster_cordon_repair,
    cluster.cluster_stale_allocation_repair,
]
RESOURCES = {
    "ingest": IngestResource(),
    "landing": LandingResource(),
    "catalog": CatalogResource(),
    "specs": SpecsResource(),
    "cluster_repair": ClusterRepairResource(),
}


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(
        assets=ASSETS,
        asset_checks=ASSET_CHECKS,
        jobs=JOBS,
        schedules=SCHEDULES,
        sensors=SENSORS,
        resources=RESOURCES,
        executor=Deployment.from_env().executor(),
    )


@cache
def loaded() -> dg.Definitions:
    """The definitions, built once per process (scripts, tests, reconstructable jobs)."""
    return defs()


def job(name: str) -> dg.JobDefinition:
    """A resolved job of the code location."""
    return loaded().resolve_job_def(name)


def full_job() -> dg.JobDefinition:
    """The resolved `full` ingestion job, for dg.reconstructable (execute_job, re-execution)."""
    return job("full")


def bulk_job() -> dg.JobDefinition:
    return job("bulk")
