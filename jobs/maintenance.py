"""Housekeeping jobs: event-log retention and catalog compaction (and their schedules).

event_log_cleanup   Dagster keeps every run and event forever; this prunes old finished runs
                    (robodata_dagster.lib.retention; see docs/operations.md for the index and
                    pool setup that goes with it).
catalog_compaction  merges leave small files in the days they touch; this folds the recent days
                    back into `delta.targetFileSize` files sorted in the budget order (budget_hash of
                    the configured split salt, robodata.catalog.maintenance) and writes a checkpoint,
                    so budgeted specs keep reading a prefix of each day. Older days are not touched
                    by ingestion and stay as compacted.
leftovers_sweep     killed ingests leave container objects no catalog row references and scratch
                    folders; this removes those older than a grace period, never a referenced
                    container (robodata.ingest.sweep; `robodata gc --dry-run` by hand).
"""

from datetime import UTC, datetime, timedelta

import dagster as dg

from robodata_dagster.lib import steps
from robodata_dagster.lib.retention import prune_runs
from robodata_dagster.resources.catalog import CatalogResource
from robodata_dagster.resources.ingest import IngestResource

MAINTENANCE_TAGS = {"robodata/run-kind": "maintenance"}


class CleanupConfig(dg.Config):
    older_than_days: float = 30.0
    batch_size: int = 500
    max_batches: int = 100


@steps.op("light", description="Delete finished runs (and their event logs) older than the cutoff.")
def prune_old_runs(context: dg.OpExecutionContext, config: CleanupConfig) -> dg.Output:
    cutoff = datetime.now(UTC) - timedelta(days=config.older_than_days)
    res = prune_runs(context.instance, cutoff, config.batch_size, config.max_batches)
    context.log.info(
        f"pruned {res.deleted} runs created before {cutoff.isoformat()} "
        f"in {res.batches} batches; kept {res.kept_latest} holding latest materializations"
    )
    return dg.Output(
        res.deleted,
        metadata={
            "deleted_runs": res.deleted,
            "batches": res.batches,
            "kept_latest": res.kept_latest,
            "more_left": res.more_left,
            "cutoff": cutoff.isoformat(),
        },
    )


@dg.job(tags=MAINTENANCE_TAGS, description="Prune old runs and event-log rows (Dagster has no retention).")
def event_log_cleanup():
    prune_old_runs()


class CompactConfig(dg.Config):
    days: int = 3
    # that of the specs the catalog mostly serves (its budget order); None keeps the table's. A change
    # rewrites every day once.
    split_salt: str | None = None


@steps.op("light", description="Compact the catalog's most recent days in the budget order.")
def compact_recent_days(context: dg.OpExecutionContext, config: CompactConfig, catalog: CatalogResource) -> None:
    from robodata.catalog.maintenance import OptimizeConfig, optimize

    cat = catalog.catalog()
    if not cat.exists():
        context.log.info(f"no catalog at {cat.uri} yet; nothing to compact")
        return
    today = datetime.now(UTC).date()
    days = [(today - timedelta(days=k)).isoformat() for k in range(config.days)]
    metrics = optimize(cat, days, OptimizeConfig(split_salt=config.split_salt))
    context.add_output_metadata(
        {
            "days": days,
            "files_added": metrics.get("numFilesAdded", 0),
            "files_removed": metrics.get("numFilesRemoved", 0),
        }
    )


@dg.job(tags=MAINTENANCE_TAGS, description="Daily catalog compaction of the most recent days.")
def catalog_compaction():
    compact_recent_days()


class SweepSettings(dg.Config):
    grace_hours: float = 24.0  # leftovers younger than this are kept (ingests in flight)
    dry_run: bool = False


@steps.op("light", description="Remove unreferenced container objects and scratch leftovers past a grace period.")
def sweep_leftovers(context: dg.OpExecutionContext, config: SweepSettings, ingest: IngestResource) -> None:
    from robodata.ingest.sweep import SweepConfig, sweep

    report = sweep(ingest.paths(), SweepConfig(grace_s=config.grace_hours * 3600.0, dry_run=config.dry_run))
    context.log.info(f"{'would remove' if config.dry_run else 'removed'} {len(report.orphans)} orphans")
    context.add_output_metadata(
        {
            k: dg.MetadataValue.json(v) if isinstance(v, (list, dict)) else v
            for k, v in report.summary().items()
            if v is not None
        }
    )


@dg.job(tags=MAINTENANCE_TAGS, description="Sweep what killed ingests leave (unreferenced containers, scratch).")
def leftovers_sweep():
    sweep_leftovers()


# When the housekeeping jobs run (UTC).
event_log_cleanup_schedule = dg.ScheduleDefinition(
    name="event_log_cleanup_daily",
    job_name="event_log_cleanup",
    cron_schedule="17 3 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)

catalog_compaction_schedule = dg.ScheduleDefinition(
    name="catalog_compaction_schedule",
    job_name="catalog_compaction",
    cron_schedule="30 3 * * *",
    execution_timezone="UTC",
)

leftovers_sweep_schedule = dg.ScheduleDefinition(
    name="leftovers_sweep_daily",
    job_name="leftovers_sweep",
    cron_schedule="45 3 * * *",
    execution_timezone="UTC",
)
