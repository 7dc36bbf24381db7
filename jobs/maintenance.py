"""Event-log hygiene: Dagster keeps every run and event forever; this job prunes old finished runs.

`instance.delete_run` removes a run and all its event-log rows. The job deletes finished runs
(success, failure, canceled) created before the cutoff, oldest first, in bounded batches (each
batch is one small set of deletes, so the database never sees one huge transaction and a tick
never runs unbounded). Runs holding the latest materialization of an asset are kept, so the UI
and freshness logic still know when each asset was last built. Scheduled daily; see
docs/operations.md for the index and pool setup that goes with it.
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import dagster as dg

from resources.step_kinds import step_resources

FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]


class CleanupConfig(dg.Config):
    older_than_days: float = 30.0
    batch_size: int = 500
    max_batches: int = 100


@dataclass(frozen=True)
class PruneResult:
    deleted: int
    kept_latest: int
    batches: int
    more_left: bool


def latest_materialization_runs(instance: dg.DagsterInstance) -> set[str]:
    """Run ids that hold the latest materialization of some asset key."""
    keys = list(instance.get_asset_keys())
    events = instance.get_latest_materialization_events(keys) if keys else {}
    return {ev.run_id for ev in events.values() if ev is not None}


def prune_runs(
    instance: dg.DagsterInstance, cutoff: datetime, batch_size: int = 500, max_batches: int = 100
) -> PruneResult:
    """Delete finished runs created before `cutoff` (oldest first), at most batch_size * max_batches."""
    if batch_size < 1 or max_batches < 1:
        raise ValueError(f"batch_size and max_batches must be >= 1, got {batch_size}, {max_batches}")
    protected = latest_materialization_runs(instance)
    filters = dg.RunsFilter(statuses=FINISHED, created_before=cutoff)

    def oldest(n: int) -> list[str]:
        records = instance.get_run_records(
            filters=filters, limit=n + len(protected), order_by="create_timestamp", ascending=True
        )
        return [r.dagster_run.run_id for r in records]

    deleted = batches = 0
    kept: set[str] = set()
    while batches < max_batches:
        ids = oldest(batch_size)
        kept.update(i for i in ids if i in protected)
        todo = [i for i in ids if i not in protected][:batch_size]
        if not todo:
            break
        for run_id in todo:
            instance.delete_run(run_id)
        deleted += len(todo)
        batches += 1
    more = batches == max_batches and any(i not in protected for i in oldest(1))
    return PruneResult(deleted=deleted, kept_latest=len(kept), batches=batches, more_left=more)


@dg.op(tags=step_resources("light"), description="Delete finished runs (and their event logs) older than the cutoff.")
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


@dg.job(
    tags={"robodata/run-kind": "maintenance"},
    description="Prune old runs and event-log rows (Dagster has no retention).",
)
def event_log_cleanup():
    prune_old_runs()


event_log_cleanup_schedule = dg.ScheduleDefinition(
    name="event_log_cleanup_daily",
    job=event_log_cleanup,
    cron_schedule="17 3 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.RUNNING,
)
