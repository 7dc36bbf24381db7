import time
from datetime import UTC, datetime

import dagster as dg
import pytest

from robodata_dagster.jobs.maintenance import event_log_cleanup, event_log_cleanup_schedule
from robodata_dagster.lib.retention import prune_runs


@dg.op
def noop():
    return 1


@dg.job
def tiny():
    noop()


@dg.asset
def tracked_asset():
    return 1


def _runs(inst, n):
    ids = []
    for _ in range(n):
        ids.append(tiny.execute_in_process(instance=inst).run_id)
    return ids


def test_prune_deletes_old_finished_runs_in_bounded_batches():
    with dg.instance_for_test() as inst:
        old = _runs(inst, 5)
        time.sleep(0.05)
        cutoff = datetime.now(UTC)
        time.sleep(0.05)
        new = _runs(inst, 1)
        assert inst.get_records_for_run(old[0]).records  # events exist before pruning
        res = prune_runs(inst, cutoff, batch_size=2, max_batches=2)
        assert (res.deleted, res.batches, res.more_left) == (4, 2, True)
        left = {r.run_id for r in inst.get_runs()}
        assert left == {old[4], new[0]}  # oldest first, bounded
        res = prune_runs(inst, cutoff, batch_size=2, max_batches=2)
        assert (res.deleted, res.more_left) == (1, False)
        assert {r.run_id for r in inst.get_runs()} == set(new)
        assert not inst.get_records_for_run(old[0]).records  # event-log rows went with the run


def test_runs_holding_the_latest_materialization_are_kept():
    with dg.instance_for_test() as inst:
        first = dg.materialize([tracked_asset], instance=inst).run_id
        latest = dg.materialize([tracked_asset], instance=inst).run_id
        _runs(inst, 2)
        res = prune_runs(inst, datetime.now(UTC), batch_size=10)
        assert res.deleted == 3 and res.kept_latest == 1
        assert [r.run_id for r in inst.get_runs()] == [latest]
        assert inst.get_latest_materialization_event(dg.AssetKey("tracked_asset")).run_id == latest
        assert first not in {r.run_id for r in inst.get_runs()}


def test_cleanup_job_runs_and_is_scheduled_daily():
    with dg.instance_for_test() as inst:
        _runs(inst, 3)
        res = event_log_cleanup.execute_in_process(
            instance=inst, run_config={"ops": {"prune_old_runs": {"config": {"older_than_days": 0.0, "batch_size": 2}}}}
        )
        assert res.success and res.output_for_node("prune_old_runs") == 3
        assert [r.run_id for r in inst.get_runs()] == [res.run_id]  # its own (running) run is never pruned
    assert event_log_cleanup_schedule.job_name == "event_log_cleanup"
    assert event_log_cleanup_schedule.cron_schedule == "17 3 * * *"
    assert event_log_cleanup.tags["robodata/run-kind"] == "maintenance"


def test_bad_bounds_rejected():
    with dg.instance_for_test() as inst, pytest.raises(ValueError):
        prune_runs(inst, datetime.now(UTC), batch_size=0)
