"""Clear allocations that idle nodes still carry for jobs that no longer run.

After a controller restart a node can come back idle but still "held": a pod stuck in
Terminating (finalizer never removed), finished pods of a dead job, an allocation
lease nobody renews, or an allocation annotation on the Node. The scheduler (or a gang
scheduler reading those records) then never uses the node, and everything looks healthy.

Only idle nodes are touched (no live workload pod besides DaemonSets), only for jobs
with no live pod anywhere (`job_label`), and only after `stale_grace_s`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from robodata.cluster.actions import Action
from robodata.cluster.config import RepairConfig
from robodata.cluster.snapshot import (
    TERMINAL,
    ClusterSnapshot,
    extended_requests,
    finished_at,
    is_active,
    is_daemon,
    parse_time,
)
from robodata.cluster.state import RepairState


def plan_allocation_repairs(
    snap: ClusterSnapshot, state: RepairState, cfg: RepairConfig, now: datetime
) -> list[Action]:
    grace = timedelta(seconds=cfg.stale_grace_s)
    running = snap.running_jobs(cfg.job_label)
    by_node = snap.pods_by_node()
    leases_by_node: dict[str, list[dict[str, Any]]] = {}
    for lease in snap.leases:
        meta = lease["metadata"]
        node = (meta.get("labels") or {}).get(cfg.lease_node_label)
        if node and meta.get("namespace") not in cfg.protected_namespaces:
            leases_by_node.setdefault(node, []).append(lease)
    actions: list[Action] = []
    live_keys: set[str] = set()
    for node in snap.nodes:
        name = node["metadata"]["name"]
        pods = [p for p in by_node.get(name, []) if not is_daemon(p)]
        if any(is_active(p) for p in pods):
            continue  # not idle: whatever it carries may be in use
        for pod in pods:
            job = (pod["metadata"].get("labels") or {}).get(cfg.job_label)
            if job is not None and job in running:
                continue
            action = _pod_action(name, pod, job, grace, now, cfg)
            if action:
                actions.append(action)
        annotations = node["metadata"].get("annotations") or {}
        for key in cfg.allocation_annotations:
            holder = annotations.get(key)
            if holder is None or holder in running:
                continue
            seen_key = f"annotation:{name}:{key}={holder}"
            live_keys.add(seen_key)
            since = state.seen_since(seen_key, now)
            if now - since >= grace:
                actions.append(_annotation_action(node, key, holder, since))
        for lease in leases_by_node.get(name, []):
            action = _lease_action(name, lease, running, grace, now)
            if action:
                actions.append(action)
    state.forget_gone("annotation:", live_keys)
    return actions


def _pod_state(pod: dict[str, Any]) -> dict[str, Any]:
    meta = pod["metadata"]
    return {
        "uid": meta["uid"],
        "resourceVersion": meta.get("resourceVersion"),
        "phase": pod["status"].get("phase"),
        "deletionTimestamp": meta.get("deletionTimestamp"),
        "finalizers": meta.get("finalizers") or [],
        "holds": extended_requests(pod),
    }


def _pod_action(
    node: str, pod: dict[str, Any], job: str | None, grace: timedelta, now: datetime, cfg: RepairConfig
) -> Action | None:
    meta = pod["metadata"]
    target = f"Pod/{meta['namespace']}/{meta['name']}"
    call = {"namespace": meta["namespace"], "name": meta["name"], "uid": meta["uid"]}
    held = extended_requests(pod)
    deleting = parse_time(meta.get("deletionTimestamp"))
    if deleting is not None:
        deadline = deleting + timedelta(seconds=meta.get("deletionGracePeriodSeconds") or 0)
        if now - deadline < grace:
            return None
        reason = (
            f"job {job or '?'} has no live pod; pod Terminating since {meta['deletionTimestamp']}"
            f"{' with finalizers ' + ','.join(meta['finalizers']) if meta.get('finalizers') else ''}"
            f"{'; holds ' + str(held) if held else ''}"
        )
        return Action(
            "allocation",
            "clear_pod",
            node,
            target,
            reason,
            _pod_state(pod),
            {"deleted": True},
            {**call, "finalizers": bool(meta.get("finalizers"))},
        )
    if pod["status"].get("phase") in TERMINAL and cfg.clear_finished_pods:
        done = finished_at(pod)
        if done is None or now - done < grace:
            return None
        reason = f"job {job or '?'} has no live pod; pod {pod['status']['phase']} since {done.isoformat()}"
        return Action("allocation", "delete_pod", node, target, reason, _pod_state(pod), {"deleted": True}, call)
    return None


def _annotation_action(node: dict[str, Any], key: str, holder: str, since: datetime) -> Action:
    meta = node["metadata"]
    name = meta["name"]
    pointer = "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
        {"op": "test", "path": pointer, "value": holder},
        {"op": "remove", "path": pointer},
    ]
    before = {"uid": meta.get("uid"), "resourceVersion": meta["resourceVersion"], "annotations": {key: holder}}
    reason = f"node idle, annotation {key}={holder} names a job with no live pod (seen since {since.isoformat()})"
    return Action(
        "allocation",
        "remove_annotation",
        name,
        f"Node/{name}",
        reason,
        before,
        {"annotations": {key: None}},
        {"name": name, "ops": ops},
    )


def _lease_action(
    node: str, lease: dict[str, Any], running: set[str], grace: timedelta, now: datetime
) -> Action | None:
    meta, spec = lease["metadata"], lease.get("spec") or {}
    holder = spec.get("holderIdentity")
    if holder and holder in running:
        return None
    renewed = parse_time(spec.get("renewTime") or spec.get("acquireTime")) or parse_time(meta.get("creationTimestamp"))
    expires = (renewed or now) + timedelta(seconds=spec.get("leaseDurationSeconds") or 0)
    if now - expires < grace:
        return None
    before = {
        "uid": meta["uid"],
        "resourceVersion": meta["resourceVersion"],
        "holderIdentity": holder,
        "renewTime": spec.get("renewTime"),
        "leaseDurationSeconds": spec.get("leaseDurationSeconds"),
    }
    reason = (
        f"node idle, lease held by {holder or '(nobody)'} expired at {expires.isoformat()} and its job has no live pod"
    )
    return Action(
        "allocation",
        "delete_lease",
        node,
        f"Lease/{meta['namespace']}/{meta['name']}",
        reason,
        before,
        {"deleted": True},
        {
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"],
        },
    )
