"""Event-log retention: delete old finished runs (and their event-log rows) in bounded batches.

`instance.delete_run` removes a run and all its event-log rows. Finished runs (success, failure,
canceled) created before the cutoff go oldest first, in bounded batches (each batch is one small
set of deletes, so the database never sees one huge transaction and a tick never runs unbounded).
Runs holding the latest materialization of an asset are kept, so the UI and freshness logic still
know when each asset was last built.
"""

from dataclasses import dataclass
from datetime import datetime

import dagster as dg

FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]


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
