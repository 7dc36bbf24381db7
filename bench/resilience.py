"""Resilience benchmark: inject faults, check the platform survives each, nothing lost.

    python -m bench.resilience --quick

Every fault is one entry in FAULTS: a name, its owner and a function that injects the
fault into a scratch directory and reports whether the system survived it and how many
records / objects that should have been kept were lost. The training faults ("kill a
training worker", "corrupt the newest checkpoint") live in bench/resilience_training.py
and are registered below with `register(Fault(...))`.

The last stdout line is {"faults_tried", "faults_survived", "data_lost", "peak_rss_mb", ...}.
--smoke runs every fault at its --quick size (the training faults are already a tiny model; their
cost is process start-up) and the scaled repair pass over 20 nodes instead of 140.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
import traceback
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import resilience_training
from bench.common import emit, parse, size_of
from bench.resilience_fault import Fault, FaultResult
from robodata.cluster.audit import read_audit
from robodata.cluster.config import RepairConfig
from robodata.cluster.kube import api_client
from robodata.cluster.repair import run_repair
from robodata.cluster.snapshot import is_active
from robodata.cluster.state import RepairState
from robodata.health.config import HealthConfig
from robodata.health.preflight import PreflightResult, run_preflight
from robodata.health.store import latest_by_node, write_results
from robodata_testing.fake_apiserver import FakeApiServer
from robodata_testing.fake_nvml import FakeGpu, FakeNvml

KEYS = ("faults_tried", "faults_survived", "data_lost", "failed", "scale_nodes", "scale_pass_s", "peak_rss_mb")
SCALE_NODES = {"smoke": 20, "quick": 140, "full": 2000}
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "k8s"
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # the recorded cluster's "now"


FAULTS: list[Fault] = []


def register(fault: Fault) -> Fault:
    if any(f.name == fault.name for f in FAULTS):
        raise ValueError(f"fault {fault.name!r} registered twice")
    FAULTS.append(fault)
    return fault


# -- health faults: one node's NVML reports something; is the verdict right and recorded? --


def _preflight_node(tmp: Path, node: str, gpus: list[FakeGpu]) -> tuple[PreflightResult, dict[str, Any] | None]:
    result = run_preflight(HealthConfig(), node=node, nvml=FakeNvml(gpus), probes=False)
    uri = str(tmp / "node_health")
    write_results(uri, [result])
    return result, latest_by_node(uri).get(node)


def _expect(tmp: Path, gpus: list[FakeGpu], assignable: bool, healthy: bool, reason_has: str = "") -> FaultResult:
    result, row = _preflight_node(tmp, "node-x", gpus)
    v = result.verdict
    lost = 0 if row is not None and row["run_id"] == result.run_id else 1  # the verdict must be on record
    reasons = row["exclusion_reasons"] if row else []
    ok = v.assignable == assignable and v.healthy == healthy and lost == 0
    if reason_has:
        ok = ok and any(reason_has in r for r in reasons)
    return FaultResult(ok, lost, f"healthy={v.healthy} assignable={v.assignable} reasons={reasons}")


def lifetime_ecc_zero_volatile(tmp: Path, quick: bool) -> FaultResult:
    """An old, cleared fault: lifetime counters high, volatile zero -> stays assignable."""
    return _expect(tmp, [FakeGpu(aggregate_uncorrected=12, aggregate_corrected=4000), FakeGpu()], True, True)


def volatile_ecc_errors(tmp: Path, quick: bool) -> FaultResult:
    gpus = [FakeGpu(), FakeGpu(volatile_uncorrected=2, aggregate_uncorrected=14)]
    return _expect(tmp, gpus, False, False, "gpu.ecc.volatile: gpu1")


def xid_event(tmp: Path, quick: bool) -> FaultResult:
    """XID 79 (fallen off the bus) during the preflight -> excluded; XID 13 alone -> kept."""
    fatal = _expect(tmp / "fatal", [FakeGpu(xids=[13, 79])], False, False, "XID 79")
    benign = _expect(tmp / "benign", [FakeGpu(xids=[13])], True, True)
    return FaultResult(
        fatal.survived and benign.survived,
        fatal.data_lost + benign.data_lost,
        f"fatal: {fatal.detail}; benign: {benign.detail}",
    )


def pending_retired_pages(tmp: Path, quick: bool) -> FaultResult:
    """Page retirement (pre-Ampere) or row remap (Ampere+) pending -> excluded until reset."""
    pages = _expect(
        tmp / "pages",
        [FakeGpu(retired_pending=1, retired_dbe_pages=[0x2A000], remapped_rows=None)],
        False,
        False,
        "page retirement pending",
    )
    rows = _expect(tmp / "rows", [FakeGpu(remapped_rows=[0, 1, 1, 0])], False, False, "row remapping pending")
    return FaultResult(
        pages.survived and rows.survived,
        pages.data_lost + rows.data_lost,
        f"pages: {pages.detail}; rows: {rows.detail}",
    )


# -- cluster faults: the recorded cluster, through the real kubernetes client ---------------


def _keepers(srv: FakeApiServer) -> set[str]:
    """Objects repair must never remove: live pods, node heartbeats, live leases."""
    keep = {
        f"pod/{p['metadata']['namespace']}/{p['metadata']['name']}" for p in srv.store.items("pods") if is_active(p)
    }
    keep |= {
        f"lease/{x['metadata']['namespace']}/{x['metadata']['name']}"
        for x in srv.store.items("leases")
        if x["metadata"]["namespace"] == "kube-node-lease" or x["spec"].get("holderIdentity") == "run-live"
    }
    keep |= {f"node/{n['metadata']['name']}" for n in srv.store.items("nodes")}
    return keep


def _present(srv: FakeApiServer) -> set[str]:
    out = {f"pod/{p['metadata']['namespace']}/{p['metadata']['name']}" for p in srv.store.items("pods")}
    out |= {f"lease/{x['metadata']['namespace']}/{x['metadata']['name']}" for x in srv.store.items("leases")}
    return out | {f"node/{n['metadata']['name']}" for n in srv.store.items("nodes")}


def _server() -> FakeApiServer:
    return FakeApiServer.from_fixtures(
        FIXTURES / "nodelist.json", FIXTURES / "podlist.json", FIXTURES / "leaselist.json"
    )


def healthy_node_cordoned(tmp: Path, quick: bool) -> FaultResult:
    health = str(tmp / "node_health")
    fresh = run_preflight(HealthConfig(), node="gpu-node-02", nvml=FakeNvml([FakeGpu()]), probes=False)
    write_results(health, [dataclasses.replace(fresh, checked_at=NOW - timedelta(minutes=5))])
    with _server() as srv:
        keep = _keepers(srv)
        t0 = time.perf_counter()
        run_repair(
            api_client(host=srv.url),
            RepairConfig(dry_run=False),
            audit_uri=str(tmp / "audit"),
            health_uri=health,
            repairs=("cordon",),
            now=NOW,
        )
        seconds = time.perf_counter() - t0
        n2 = srv.store.get("nodes", "", "gpu-node-02")
        still_held = [n["metadata"]["name"] for n in srv.store.items("nodes") if n["spec"].get("unschedulable")]
        lost = len(keep - _present(srv))
    rows = [r for r in read_audit(str(tmp / "audit")) if r["action"] == "uncordon" and r["outcome"] == "applied"]
    restored = not n2["spec"].get("unschedulable") and not n2["spec"].get("taints")
    audited = len(rows) == 1 and json.loads(rows[0]["before_json"])["unschedulable"] is True
    others_kept = set(still_held) == {"gpu-node-04", "gpu-node-05", "gpu-node-07"}  # hold / no evidence / NotReady
    return FaultResult(
        restored and audited and others_kept,
        lost,
        f"restored={restored} audited={audited} still cordoned={still_held}",
        {"repair_pass_s": round(seconds, 3)},
    )


def stale_allocation(tmp: Path, quick: bool) -> FaultResult:
    cfg, state, audit = RepairConfig(dry_run=False), RepairState(), str(tmp / "audit")
    with _server() as srv:
        keep = _keepers(srv)
        api = api_client(host=srv.url)
        run_repair(api, cfg, audit_uri=audit, state=state, repairs=("allocation",), now=NOW)
        run_repair(
            api,
            cfg,
            audit_uri=audit,
            state=state,
            repairs=("allocation",),
            now=NOW + timedelta(seconds=cfg.stale_grace_s + 1),
        )
        present = _present(srv)
        n3 = srv.store.get("nodes", "", "gpu-node-03")
        lost = len(keep - present)
    stale = {
        "pod/training/dagster-run-dead-worker-0-m3c8v",
        "pod/training/dagster-run-dead-launcher-h2w9s",
        "lease/robodata/robodata-alloc-gpu-node-03",
    }
    cleared = not (stale & present) and "robodata.io/allocated-to" not in n3["metadata"].get("annotations", {})
    applied = sum(1 for r in read_audit(audit) if r["outcome"] == "applied")
    return FaultResult(cleared and applied == 4, lost, f"cleared={cleared} applied_actions={applied}")


for _fn, _owner in [
    (lifetime_ecc_zero_volatile, "health"),
    (volatile_ecc_errors, "health"),
    (xid_event, "health"),
    (pending_retired_pages, "health"),
    (healthy_node_cordoned, "cluster"),
    (stale_allocation, "cluster"),
]:
    register(Fault(_fn.__name__, _owner, _fn))
register(Fault("kill_training_worker", "training", resilience_training.kill_training_worker))
register(Fault("corrupt_newest_checkpoint", "training", resilience_training.corrupt_newest_checkpoint))


def scaled_repair_pass(nodes: int) -> dict[str, Any]:
    """One dry-run repair pass over a cluster of `nodes` cloned from the recorded one."""
    from robodata_testing.fake_apiserver import FakeStore

    base = FakeStore()
    for name in ("nodelist.json", "podlist.json", "leaselist.json"):
        base.load_list(FIXTURES / name)
    store = FakeStore()
    seed_nodes = base.items("nodes")
    for i in range(nodes):
        src = seed_nodes[i % len(seed_nodes)]
        suffix = f"-c{i // len(seed_nodes)}"
        clone = json.loads(json.dumps(src))
        old = clone["metadata"]["name"]
        clone["metadata"].update(name=old + suffix, uid=f"{clone['metadata']['uid'][:-8]}{i:08d}")
        store.put("nodes", clone)
        for plural in ("pods", "leases"):
            for obj in base.items(plural):
                on_node = (
                    obj.get("spec", {}).get("nodeName") == old
                    or obj["metadata"].get("name") == old
                    or (obj["metadata"].get("labels") or {}).get("robodata.io/node") == old
                )
                if not on_node:
                    continue
                c = json.loads(json.dumps(obj))
                c["metadata"].update(name=c["metadata"]["name"] + suffix, uid=f"{c['metadata']['uid'][:-8]}{i:08d}")
                if "nodeName" in c.get("spec", {}):
                    c["spec"]["nodeName"] = old + suffix
                if (c["metadata"].get("labels") or {}).get("robodata.io/node") == old:
                    c["metadata"]["labels"]["robodata.io/node"] = old + suffix
                store.put(plural, c)
    with tempfile.TemporaryDirectory() as tmp, FakeApiServer(store) as srv:
        t0 = time.perf_counter()
        report = run_repair(api_client(host=srv.url), RepairConfig(), audit_uri=f"{tmp}/audit", now=NOW)
        seconds = time.perf_counter() - t0
    return {
        "scale_nodes": nodes,
        "scale_pods": len(store.items("pods")),
        "scale_pass_s": round(seconds, 2),
        "scale_actions": len(report.rows),
    }


def run_all(quick: bool, only: list[str] | None = None) -> dict[str, Any]:
    selected = [f for f in FAULTS if not only or f.name in only]
    survived, lost, failed, metrics = 0, 0, [], {}
    for fault in selected:
        with tempfile.TemporaryDirectory(prefix=f"resilience-{fault.name}-") as tmp:
            t0 = time.perf_counter()
            try:
                res = fault.run(Path(tmp), quick)
            except Exception:
                res = FaultResult(False, 0, traceback.format_exc(limit=3))
            seconds = time.perf_counter() - t0
        print(
            f"{fault.owner}/{fault.name}: {'survived' if res.survived else 'FAILED'} "
            f"lost={res.data_lost} {seconds:.2f}s  {res.detail}"
        )
        survived += res.survived
        lost += res.data_lost
        if not res.survived:
            failed.append(fault.name)
        metrics.update({f"{fault.name}.{k}": v for k, v in res.metrics.items()})
    return {"faults_tried": len(selected), "faults_survived": survived, "data_lost": lost, "failed": failed, **metrics}


def main() -> None:
    args = parse(__doc__.splitlines()[0])
    size = size_of(args)
    result = run_all(size != "full")
    result.update(scaled_repair_pass(SCALE_NODES[size]))
    emit(result)


if __name__ == "__main__":
    import bench.resilience  # one registry: the training faults build results of that module's classes

    bench.resilience.main()
