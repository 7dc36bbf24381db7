"""Repair actions: what to change, the state before, the intended state after, and how
to apply it with the kubernetes client (optimistic concurrency on every write)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from robodata.cluster.kube import to_json


@dataclass(frozen=True)
class Action:
    repair: str  # "cordon" | "allocation"
    action: str  # uncordon | alert | clear_pod | delete_pod | delete_lease | remove_annotation
    node: str
    target: str  # "Node/name", "Pod/ns/name", "Lease/ns/name"
    reason: str
    before: dict[str, Any]
    after: dict[str, Any]
    call: dict[str, Any] = field(default_factory=dict)  # what execute() sends

    @property
    def key(self) -> str:
        return f"{self.action}:{self.target}:{self.before.get('uid') or self.before.get('resourceVersion', '')}"


@dataclass(frozen=True)
class Outcome:
    status: str  # applied | dry_run | alerted | conflict | gone | failed
    after: dict[str, Any]
    error: str = ""


def execute(api: client.ApiClient, action: Action, dry_run: bool) -> Outcome:
    if action.action == "alert":
        return Outcome("alerted", action.after)
    if dry_run:
        return Outcome("dry_run", action.after)
    try:
        return Outcome("applied", _APPLY[action.action](api, action))
    except ApiException as exc:
        status = {404: "gone", 409: "conflict", 422: "conflict"}.get(exc.status, "failed")
        return Outcome(status, {}, f"HTTP {exc.status}: {_message(exc)}")


def _message(exc: ApiException) -> str:
    import json

    try:
        return json.loads(exc.body).get("message", exc.reason)
    except (TypeError, ValueError):
        return str(exc.reason)


def _patch_node(api: client.ApiClient, action: Action) -> dict[str, Any]:
    node = client.CoreV1Api(api).patch_node(action.call["name"], action.call["ops"])
    data = to_json(api, node)
    meta = data["metadata"]
    return {
        "unschedulable": bool(data["spec"].get("unschedulable")),
        "taints": data["spec"].get("taints") or [],
        "annotations": meta.get("annotations") or {},
        "resourceVersion": meta["resourceVersion"],
    }


def _clear_pod(api: client.ApiClient, action: Action) -> dict[str, Any]:
    """Stuck Terminating: drop finalizers (uid-tested), then force-delete (uid precondition)."""
    core = client.CoreV1Api(api)
    ns, name, uid = action.call["namespace"], action.call["name"], action.call["uid"]
    if action.call.get("finalizers"):
        ops = [{"op": "test", "path": "/metadata/uid", "value": uid}, {"op": "remove", "path": "/metadata/finalizers"}]
        core.patch_namespaced_pod(name, ns, ops)
    try:
        core.delete_namespaced_pod(
            name, ns, body=client.V1DeleteOptions(grace_period_seconds=0, preconditions=client.V1Preconditions(uid=uid))
        )
    except ApiException as exc:
        if exc.status != 404:  # already gone once the finalizers were dropped
            raise
    return {"deleted": True}


def _delete_pod(api: client.ApiClient, action: Action) -> dict[str, Any]:
    c = action.call
    client.CoreV1Api(api).delete_namespaced_pod(
        c["name"], c["namespace"], body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=c["uid"]))
    )
    return {"deleted": True}


def _delete_lease(api: client.ApiClient, action: Action) -> dict[str, Any]:
    c = action.call
    client.CoordinationV1Api(api).delete_namespaced_lease(
        c["name"],
        c["namespace"],
        body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid=c["uid"], resource_version=c["resourceVersion"])
        ),
    )
    return {"deleted": True}


_APPLY = {
    "uncordon": _patch_node,
    "remove_annotation": _patch_node,
    "clear_pod": _clear_pod,
    "delete_pod": _delete_pod,
    "delete_lease": _delete_lease,
}
