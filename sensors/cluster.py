"""Scheduler-record repair sensors: thin wrappers over robodata.cluster.repair.

Each tick snapshots the cluster, plans, applies (dry-run by default: report only) and
writes every action to the audit table. The sensors launch no runs; their cursor holds
the repair state (first-seen times, what was already reported). Stopped by default:
turn them on where a cluster is configured (resources/cluster.py).
"""

import json

import dagster as dg

from robodata_dagster.resources.cluster import ClusterRepairResource

INTERVAL_S = 300


def _tick(context: dg.SensorEvaluationContext, res: ClusterRepairResource, repairs: tuple) -> dg.SensorResult:
    from robodata.cluster.repair import run_repair
    from robodata.cluster.state import RepairState

    state = RepairState()
    if context.cursor:
        state.load_state_dict(json.loads(context.cursor))
    with res.api() as api:
        report = run_repair(
            api,
            res.repair_config(),
            audit_uri=res.audit_table(),
            health_uri=res.health_table(),
            state=state,
            repairs=repairs,
        )
    for row in report.rows:
        log = (
            context.log.warning if row["outcome"] in ("alerted", "dry_run", "failed", "conflict") else context.log.info
        )
        log(f"{row['repair']}: {row['action']} {row['target']} -> {row['outcome']}: {row['reason']}")
    return dg.SensorResult(skip_reason=dg.SkipReason(report.summary()), cursor=json.dumps(state.state_dict()))


@dg.sensor(
    name="cluster_cordon_repair",
    minimum_interval_seconds=INTERVAL_S,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Restore nodes cordoned past the grace period that pass health (dry-run: alert).",
)
def cluster_cordon_repair(context: dg.SensorEvaluationContext, cluster_repair: ClusterRepairResource):
    return _tick(context, cluster_repair, ("cordon",))


@dg.sensor(
    name="cluster_stale_allocation_repair",
    minimum_interval_seconds=INTERVAL_S,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Clear allocations idle nodes still carry for jobs that no longer run (dry-run: alert).",
)
def cluster_stale_allocation_repair(context: dg.SensorEvaluationContext, cluster_repair: ClusterRepairResource):
    return _tick(context, cluster_repair, ("allocation",))
