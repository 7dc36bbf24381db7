"""Cordon and stale-allocation repair, through the real kubernetes client, against a
loopback API server over recorded Kubernetes JSON (tests/fixtures/k8s)."""

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import kubernetes_validate
import pytest

from robodata.cluster.audit import read_audit
from robodata.cluster.config import RepairConfig
from robodata.cluster.kube import api_client
from robodata.cluster.repair import run_repair
from robodata.cluster.state import RepairState
from robodata.health.config import HealthConfig
from robodata.health.preflight import run_preflight
from robodata.health.store import write_results
from robodata_testing.fake_apiserver import FakeApiServer
from robodata_testing.fake_nvml import FakeGpu, FakeNvml

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "k8s"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.fixture
def server():
    with FakeApiServer.from_fixtures(FIX / "nodelist.json", FIX / "podlist.json", FIX / "leaselist.json") as srv:
        yield srv


@pytest.fixture
def health_uri(tmp_path):
    """Fresh health records: node-02 and node-06 healthy, node-05 with volatile ECC errors."""

    def rec(node, gpu):
        r = run_preflight(HealthConfig(), node=node, nvml=FakeNvml([gpu]), probes=False)
        return dataclasses.replace(r, checked_at=NOW - timedelta(minutes=10))

    uri = str(tmp_path / "node_health")
    write_results(
        uri,
        [
            rec("gpu-node-02", FakeGpu(aggregate_uncorrected=9)),
            rec("gpu-node-06", FakeGpu()),
            rec("gpu-node-05", FakeGpu(volatile_uncorrected=3, aggregate_uncorrected=3)),
            rec("gpu-node-07", FakeGpu()),
        ],
    )
    return uri


def node(server, name):
    return server.store.get("nodes", "", name)


def test_fixtures_are_valid_kubernetes_objects():
    kinds = {
        "nodelist.json": ("Node", "v1"),
        "podlist.json": ("Pod", "v1"),
        "leaselist.json": ("Lease", "coordination.k8s.io/v1"),
    }
    for fname, (kind, api_version) in kinds.items():
        data = json.loads((FIX / fname).read_text())
        kubernetes_validate.validate(data, "1.31.0", strict=True)
        for item in data["items"]:
            kubernetes_validate.validate(dict(item, kind=kind, apiVersion=api_version), "1.31.0", strict=True)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "x"}, "spec": {"unschedulabel": True}},
            "1.31.0",
            strict=True,
        )


def test_dry_run_alerts_and_never_writes(server, health_uri, tmp_path):
    audit = str(tmp_path / "audit")
    state = RepairState()
    report = run_repair(
        api_client(host=server.url),
        RepairConfig(page_size=2),
        audit_uri=audit,
        health_uri=health_uri,
        state=state,
        now=NOW,
    )
    assert server.mutations() == []
    # paging really happened (page_size=2 over 7 nodes)
    assert sum(1 for r in server.requests if r.path == "/api/v1/nodes") == 4
    got = {(r["action"], r["target"], r["outcome"]) for r in report.rows}
    assert ("uncordon", "Node/gpu-node-02", "dry_run") in got
    assert ("clear_pod", "Pod/training/dagster-run-dead-worker-0-m3c8v", "dry_run") in got
    assert ("delete_pod", "Pod/training/dagster-run-dead-launcher-h2w9s", "dry_run") in got
    assert ("delete_lease", "Lease/robodata/robodata-alloc-gpu-node-03", "dry_run") in got
    assert ("alert", "Node/gpu-node-05", "alerted") in got  # cordoned and unhealthy: someone must act
    targets = {t for _, t, _ in got}
    for untouched in ("Node/gpu-node-04", "Node/gpu-node-07", "Node/gpu-node-01", "Node/gpu-node-06"):
        assert untouched not in targets  # hold annotation / NotReady / busy / within grace
    assert read_audit(audit) and len(read_audit(audit)) == len(report.rows)
    # the next tick does not repeat the same reports
    again = run_repair(
        api_client(host=server.url),
        RepairConfig(),
        audit_uri=audit,
        health_uri=health_uri,
        state=state,
        now=NOW + timedelta(minutes=1),
    )
    assert again.rows == []


def test_apply_restores_healthy_cordoned_node_with_audit(server, health_uri, tmp_path):
    audit = str(tmp_path / "audit")
    cfg = RepairConfig(dry_run=False)
    rv_before = node(server, "gpu-node-02")["metadata"]["resourceVersion"]
    report = run_repair(
        api_client(host=server.url), cfg, audit_uri=audit, health_uri=health_uri, repairs=("cordon",), now=NOW
    )
    n2 = node(server, "gpu-node-02")
    assert "unschedulable" not in n2["spec"] and "taints" not in n2["spec"]
    assert node(server, "gpu-node-05")["spec"]["unschedulable"] is True  # unhealthy: stays cordoned
    assert node(server, "gpu-node-04")["spec"]["unschedulable"] is True  # operator hold
    assert node(server, "gpu-node-07")["spec"]["unschedulable"] is True  # NotReady
    patch = next(r for r in server.mutations() if r.path == "/api/v1/nodes/gpu-node-02")
    assert patch.content_type == "application/json-patch+json"
    assert patch.body[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": rv_before}
    (row,) = [r for r in read_audit(audit) if r["action"] == "uncordon"]
    assert row["outcome"] == "applied" and not row["dry_run"]
    assert json.loads(row["before_json"])["unschedulable"] is True
    assert json.loads(row["after_json"])["unschedulable"] is False
    assert "healthy and assignable" in row["reason"]
    assert report.count("applied") == 1


def test_taint_only_cordon_waits_out_the_grace_period(server, health_uri, tmp_path):
    audit, state, cfg = str(tmp_path / "audit"), RepairState(), RepairConfig(dry_run=False)
    run_repair(
        api_client(host=server.url),
        cfg,
        audit_uri=audit,
        health_uri=health_uri,
        state=state,
        repairs=("cordon",),
        now=NOW,
    )
    assert node(server, "gpu-node-06")["spec"]["taints"]  # no timeAdded: first seen now, grace starts
    later = NOW + timedelta(seconds=cfg.cordon_grace_s + 1)
    # the health evidence must be fresh at that time too
    fresh = run_preflight(HealthConfig(), node="gpu-node-06", nvml=FakeNvml([FakeGpu()]), probes=False)
    write_results(health_uri, [dataclasses.replace(fresh, checked_at=later - timedelta(minutes=1))])
    state2 = RepairState()
    state2.load_state_dict(json.loads(json.dumps(state.state_dict())))  # survives a sensor cursor round trip
    run_repair(
        api_client(host=server.url),
        cfg,
        audit_uri=audit,
        health_uri=health_uri,
        state=state2,
        repairs=("cordon",),
        now=later,
    )
    assert "taints" not in node(server, "gpu-node-06")["spec"]


def test_cordoned_without_health_evidence_is_alerted_not_restored(server, tmp_path):
    audit = str(tmp_path / "audit")
    report = run_repair(
        api_client(host=server.url),
        RepairConfig(dry_run=False),
        audit_uri=audit,
        health_uri=str(tmp_path / "no_health"),
        repairs=("cordon",),
        now=NOW,
    )
    assert server.mutations() == []
    alerts = {r["target"]: r["reason"] for r in report.rows if r["action"] == "alert"}
    assert "no health record" in alerts["Node/gpu-node-02"]


def test_apply_clears_stale_allocation_and_keeps_live_ones(server, tmp_path):
    audit, state, cfg = str(tmp_path / "audit"), RepairState(), RepairConfig(dry_run=False)
    live_before = [
        p["metadata"]["name"]
        for p in server.store.items("pods")
        if p["status"]["phase"] == "Running" and not p["metadata"].get("deletionTimestamp")
    ]
    run_repair(api_client(host=server.url), cfg, audit_uri=audit, state=state, repairs=("allocation",), now=NOW)
    pods = {p["metadata"]["name"] for p in server.store.items("pods")}
    assert "dagster-run-dead-worker-0-m3c8v" not in pods and "dagster-run-dead-launcher-h2w9s" not in pods
    assert "dagster-run-old-eval-q9z4d" in pods  # finished, but on a busy node: left alone
    assert set(live_before) <= pods  # no live pod touched
    leases = {lease["metadata"]["name"] for lease in server.store.items("leases")}
    assert "robodata-alloc-gpu-node-03" not in leases and "robodata-alloc-gpu-node-01" in leases
    assert len([x for x in leases if x.startswith("gpu-node-")]) == 7  # node heartbeats untouched
    # the orphan annotation is judged from first sight: cleared once the grace has passed
    assert node(server, "gpu-node-03")["metadata"]["annotations"]["robodata.io/allocated-to"] == "run-dead"
    run_repair(
        api_client(host=server.url),
        cfg,
        audit_uri=audit,
        state=state,
        repairs=("allocation",),
        now=NOW + timedelta(seconds=cfg.stale_grace_s + 1),
    )
    assert "robodata.io/allocated-to" not in node(server, "gpu-node-03")["metadata"]["annotations"]
    assert node(server, "gpu-node-01")["metadata"]["annotations"]["robodata.io/allocated-to"] == "run-live"
    rows = read_audit(audit)
    clear = next(r for r in rows if r["action"] == "clear_pod")
    assert clear["outcome"] == "applied" and json.loads(clear["before_json"])["holds"] == {"nvidia.com/gpu": "8"}
    # the stuck pod: finalizers dropped (uid-tested), then force-deleted with a uid precondition
    calls = [(r.method, r.path) for r in server.mutations()]
    assert ("PATCH", "/api/v1/namespaces/training/pods/dagster-run-dead-worker-0-m3c8v") in calls
    delete = next(r for r in server.mutations() if r.path.endswith("dagster-run-dead-launcher-h2w9s"))
    assert delete.method == "DELETE" and delete.body["preconditions"]["uid"]


def test_concurrent_change_is_a_conflict_not_a_clobber(server, health_uri, tmp_path):
    audit = str(tmp_path / "audit")
    server.store.get("nodes", "", "gpu-node-02")  # planned from this version...
    original = server.handle

    def bump_then_handle(req):  # ...and someone else writes the node between read and patch
        if req.method == "PATCH" and req.path == "/api/v1/nodes/gpu-node-02":
            n = server.store.get("nodes", "", "gpu-node-02")
            n["metadata"]["labels"]["touched"] = "yes"
            server.store.put("nodes", n)
        return original(req)

    server.handle = bump_then_handle
    report = run_repair(
        api_client(host=server.url),
        RepairConfig(dry_run=False),
        audit_uri=audit,
        health_uri=health_uri,
        repairs=("cordon",),
        now=NOW,
    )
    (row,) = [r for r in report.rows if r["target"] == "Node/gpu-node-02"]
    assert row["outcome"] == "conflict" and "422" in row["error"]
    assert node(server, "gpu-node-02")["spec"]["unschedulable"] is True


def test_server_error_is_recorded_as_failed(server, tmp_path):
    server.fail[("DELETE", "/apis/coordination.k8s.io/v1/namespaces/robodata/leases/robodata-alloc-gpu-node-03")] = 500
    report = run_repair(
        api_client(host=server.url),
        RepairConfig(dry_run=False),
        audit_uri=str(tmp_path / "a"),
        repairs=("allocation",),
        now=NOW,
    )
    (row,) = [r for r in report.rows if r["action"] == "delete_lease"]
    assert row["outcome"] == "failed" and "500" in row["error"]
    assert any(x["metadata"]["name"] == "robodata-alloc-gpu-node-03" for x in server.store.items("leases"))


def test_write_brake_defers_the_rest_to_the_next_pass(server, tmp_path):
    audit, state = str(tmp_path / "audit"), RepairState()
    cfg = RepairConfig(dry_run=False, max_writes_per_pass=1)
    first = run_repair(api_client(host=server.url), cfg, audit_uri=audit, state=state, repairs=("allocation",), now=NOW)
    assert first.count("applied") == 1 and first.deferred == 2 and "2 deferred" in first.summary()
    assert len(read_audit(audit)) == 1  # the change was audited as it was made
    for _ in range(2):
        run_repair(api_client(host=server.url), cfg, audit_uri=audit, state=state, repairs=("allocation",), now=NOW)
    assert sum(r["outcome"] == "applied" for r in read_audit(audit)) == 3
    last = run_repair(api_client(host=server.url), cfg, audit_uri=audit, state=state, repairs=("allocation",), now=NOW)
    assert last.planned == [] and last.deferred == 0


def test_state_forgets_conditions_that_went_away(server, tmp_path):
    state = RepairState()
    run_repair(api_client(host=server.url), RepairConfig(), audit_uri=str(tmp_path / "a"), state=state, now=NOW)
    assert (
        "cordon:gpu-node-06" in state.first_seen
        and "annotation:gpu-node-03:robodata.io/allocated-to=run-dead" in state.first_seen
    )
    n6 = server.store.get("nodes", "", "gpu-node-06")
    del n6["spec"]["taints"]  # someone uncordoned it by hand
    server.store.put("nodes", n6)
    run_repair(api_client(host=server.url), RepairConfig(), audit_uri=str(tmp_path / "a"), state=state, now=NOW)
    assert "cordon:gpu-node-06" not in state.first_seen and "cordon:gpu-node-02" in state.first_seen
