"""The Dagster sensors call the core repair; cursor carries state; dry-run by default."""

import json
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from robodata.cluster.audit import read_audit
from robodata_dagster.resources.cluster import ClusterRepairResource, RepairSettings
from robodata_dagster.sensors.cluster import cluster_cordon_repair, cluster_stale_allocation_repair
from robodata_testing.fake_apiserver import FakeApiServer

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "k8s"
RECORDED_NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # the fixtures' "now"


def test_sensors_dry_run_then_apply(tmp_path):
    with FakeApiServer.from_fixtures(FIX / "nodelist.json", FIX / "podlist.json", FIX / "leaselist.json") as srv:
        srv.store.shift_times(datetime.now(UTC) - RECORDED_NOW)  # these paths use the wall clock
        res = ClusterRepairResource(
            kube_host=srv.url, audit_uri=str(tmp_path / "audit"), health_uri=str(tmp_path / "health")
        )
        with dg.build_sensor_context(resources={"cluster_repair": res}) as ctx:
            result = cluster_stale_allocation_repair(ctx)
        assert isinstance(result, dg.SensorResult) and not result.run_requests
        assert "dry-run" in result.skip_reason.skip_message and srv.mutations() == []
        cursor = json.loads(result.cursor)
        assert cursor["reported"]
        with dg.build_sensor_context(resources={"cluster_repair": res}, cursor=result.cursor) as ctx:
            again = cluster_stale_allocation_repair(ctx)
        assert "nothing new" in again.skip_reason.skip_message  # no repeat alerts every tick
        applying = ClusterRepairResource(
            kube_host=srv.url,
            audit_uri=str(tmp_path / "audit"),
            health_uri=str(tmp_path / "health"),
            repair=RepairSettings(dry_run=False),
        )
        with dg.build_sensor_context(resources={"cluster_repair": applying}) as ctx:
            cluster_stale_allocation_repair(ctx)
            cordon = cluster_cordon_repair(ctx)
        assert srv.mutations() and all(r.method == "DELETE" or "pods" in r.path for r in srv.mutations())
        assert "alert" in cordon.skip_reason.skip_message  # no health table: alert, don't restore
    outcomes = [r["outcome"] for r in read_audit(str(tmp_path / "audit"))]
    assert "dry_run" in outcomes and "applied" in outcomes
