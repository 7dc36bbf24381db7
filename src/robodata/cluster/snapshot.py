"""One consistent-enough read of Nodes, Pods and Leases, as plain API JSON, plus the
facts the planners need (ready, cordoned, idle, which jobs still run)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from robodata.cluster.config import RepairConfig
from robodata.cluster.kube import list_all, to_json

TERMINAL = ("Succeeded", "Failed")


def parse_time(value: str | None) -> datetime | None:
    """RFC 3339 (Time or MicroTime) -> aware datetime."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def fmt_time(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ClusterSnapshot:
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    leases: list[dict[str, Any]]

    @classmethod
    def fetch(cls, api: client.ApiClient, cfg: RepairConfig) -> ClusterSnapshot:
        core, coord = client.CoreV1Api(api), client.CoordinationV1Api(api)
        nodes = list_all(core.list_node, cfg.page_size)
        pods = list_all(core.list_pod_for_all_namespaces, cfg.page_size)
        leases = list_all(coord.list_lease_for_all_namespaces, cfg.page_size)
        return cls([to_json(api, n) for n in nodes], [to_json(api, p) for p in pods], [to_json(api, x) for x in leases])

    def pods_by_node(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for pod in self.pods:
            node = pod.get("spec", {}).get("nodeName")
            if node:
                out[node].append(pod)
        return out

    def running_jobs(self, job_label: str) -> set[str]:
        """Job ids that still have at least one live (non-terminal, not deleting) pod."""
        return {
            p["metadata"]["labels"][job_label]
            for p in self.pods
            if is_active(p) and job_label in (p["metadata"].get("labels") or {})
        }


def is_active(pod: dict[str, Any]) -> bool:
    return pod.get("status", {}).get("phase") not in TERMINAL and not pod["metadata"].get("deletionTimestamp")


def is_daemon(pod: dict[str, Any]) -> bool:
    meta = pod["metadata"]
    if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
        return True
    return any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or [])


def is_ready(node: dict[str, Any]) -> bool:
    conds = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


def cordon_taints(node: dict[str, Any], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    return [
        t for t in node.get("spec", {}).get("taints") or [] if t.get("key") in keys and t.get("effect") == "NoSchedule"
    ]


def is_cordoned(node: dict[str, Any], keys: tuple[str, ...]) -> bool:
    return bool(node.get("spec", {}).get("unschedulable")) or bool(cordon_taints(node, keys))


def finished_at(pod: dict[str, Any]) -> datetime | None:
    """When a terminal pod's last container stopped (startTime if unknown)."""
    times = [
        parse_time(s.get("state", {}).get("terminated", {}).get("finishedAt"))
        for s in pod.get("status", {}).get("containerStatuses") or []
    ]
    known = [t for t in times if t]
    return max(known) if known else parse_time(pod.get("status", {}).get("startTime"))


def extended_requests(pod: dict[str, Any]) -> dict[str, str]:
    """Extended resources (vendor/domain-named, e.g. nvidia.com/gpu) the pod holds."""
    held: dict[str, str] = {}
    for c in pod.get("spec", {}).get("containers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            if "/" in k:
                held[k] = v
    return held
