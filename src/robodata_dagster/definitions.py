"""The robodata code location, declared explicitly.

    dagster dev -m robodata_dagster.definitions        (or -w workspace.yaml)

Every asset, check, job, sensor, schedule and resource of robodata_dagster.{assets,resources,
sensors,jobs} is listed here (tests/platform/test_definitions.py fails on one that is not). The
default executor comes from the deployment (ROBODATA_DEPLOYMENT=local|prod; lib/deployment.py),
read when the definitions are built, never at import; so is ROBODATA_TRAIN_EAGER=1, which makes
`training_run` eager (sensors/automation.py). Every asset carries a code reference to its function
(`with_source_code_references`).
"""

from __future__ import annotations

import warnings
from functools import cache
from typing import Any

import dagster as dg

from robodata_dagster.assets import curation, ingest, ingest_checks, layout, training
from robodata_dagster.jobs import curation as curation_jobs
from robodata_dagster.jobs import ingest as ingest_jobs
from robodata_dagster.jobs import layout as layout_jobs
from robodata_dagster.jobs import maintenance
from robodata_dagster.jobs import training as training_jobs
from robodata_dagster.lib.deployment import Deployment
from robodata_dagster.lib.env import flag
from robodata_dagster.resources.catalog import CatalogResource, SpecsResource
from robodata_dagster.resources.cluster import ClusterRepairResource
from robodata_dagster.resources.ingest import IngestResource, LandingResource
from robodata_dagster.resources.manifests import ManifestRefIOManager
from robodata_dagster.sensors import automation, cluster, specs
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
    curation_jobs.curation_job,
    curation_jobs.site_acceptance_job,
    training_jobs.training_job,
    layout_jobs.relayout_job,
    maintenance.event_log_cleanup,
    maintenance.catalog_compaction,
    maintenance.leftovers_sweep,
]
SCHEDULES = [
    maintenance.event_log_cleanup_schedule,
    maintenance.catalog_compaction_schedule,
    maintenance.leftovers_sweep_schedule,
]
SENSORS = [
    ingest_sensors.landing_zone_sensor,
    ingest_sensors.landing_zone_live_sensor,
    specs.spec_registry_sensor,
    automation.catalog_automation_sensor,
    automation.training_automation_sensor,
    cluster.cluster_cordon_repair,
    cluster.cluster_stale_allocation_repair,
]
RESOURCES = {
    "ingest": IngestResource(),
    "landing": LandingResource(),
    "catalog": CatalogResource(),
    "specs": SpecsResource(),
    "cluster_repair": ClusterRepairResource(),
    "manifest_io_manager": ManifestRefIOManager(),
}


def _with_code_references(assets: list[dg.AssetsDefinition]) -> list[Any]:
    # with_source_code_references and its metadata classes are @beta in Dagster 1.13: this is the one
    # place the layer opts into a beta API, knowingly (UI links only; nothing runs differently).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.BetaWarning)
        return list(dg.with_source_code_references(assets))


def train_eager_condition() -> dg.AutomationCondition:
    """`eager`, on the manifest's data version: a manifest refresh that selected the same rows (the
    same data version, assets/curation.py) does not launch training again."""
    changed = dg.AutomationCondition.any_deps_match(dg.AutomationCondition.data_version_changed())
    return dg.AutomationCondition.eager().replace("any_deps_updated", changed.with_label("any_deps_data_changed"))


def _assets(train_eager: bool) -> list[Any]:
    if not train_eager:
        return ASSETS
    eager = train_eager_condition()
    return [
        a.map_asset_specs(lambda s: s.replace_attributes(automation_condition=eager))
        if a is training.training_run
        else a
        for a in ASSETS
    ]


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(
        assets=_with_code_references(_assets(flag("ROBODATA_TRAIN_EAGER"))),
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
