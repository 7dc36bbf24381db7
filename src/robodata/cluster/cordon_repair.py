"""Restore nodes that are cordoned, healthy and idle past a grace period.

Cordoned is a normal-looking state, so nothing alerts on a node left cordoned after
its problem went away. A node is restored only when all of these hold:
cordoned longer than `cordon_grace_s`; no operator hold annotation; the node is Ready;
and the newest health record is fresh, *postdates the cordon*, and says healthy and
assignable. A node cordoned past grace without such evidence gets an alert instead.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from robodata.cluster.actions import Action
from robodata.cluster.config import RepairConfig
from robodata.cluster.snapshot import ClusterSnapshot, cordon_taints, fmt_time, is_cordoned, is_ready, parse_time
from robodata.cluster.state import RepairState


def plan_cordon_repairs(
    snap: ClusterSnapshot, health: dict[str, dict[str, Any]], state: RepairState, cfg: RepairConfig, now: datetime
) -> list[Action]:
    actions: list[Action] = []
    cordoned_keys: set[str] = set()
    for node in snap.nodes:
        name = node["metadata"]["name"]
        if not is_cordoned(node, cfg.cordon_taint_keys):
            continue
        key = f"cordon:{name}"
        cordoned_keys.add(key)
        since = _cordoned_since(node, cfg, state.seen_since(key, now))
        age = now - since
        if age < timedelta(seconds=cfg.cordon_grace_s):
            continue
        if cfg.keep_cordoned_annotation in (node["metadata"].get("annotations") or {}) or not is_ready(node):
            continue  # an operator's hold, or the node controller's business
        before = _node_state(node)
        record = health.get(name)
        evidence = _evidence_problem(record, since, now, cfg)
        hours = age.total_seconds() / 3600
        if evidence:
            actions.append(
                Action(
                    "cordon",
                    "alert",
                    name,
                    f"Node/{name}",
                    f"cordoned {hours:.1f}h since {fmt_time(since)}; {evidence}",
                    before,
                    before,
                )
            )
            continue
        assert record is not None  # no evidence problem: the node has a fresh, healthy record
        remaining = [t for t in node["spec"].get("taints") or [] if t not in cordon_taints(node, cfg.cordon_taint_keys)]
        ops: list[dict[str, Any]] = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": before["resourceVersion"]}
        ]
        if "unschedulable" in node["spec"]:
            ops.append({"op": "remove", "path": "/spec/unschedulable"})
        if "taints" in node["spec"]:
            ops.append(
                {"op": "replace", "path": "/spec/taints", "value": remaining}
                if remaining
                else {"op": "remove", "path": "/spec/taints"}
            )
        after = dict(before, unschedulable=False, taints=remaining)
        reason = (
            f"cordoned {hours:.1f}h since {fmt_time(since)}, Ready, health run {record['run_id']} "
            f"at {fmt_time(record['checked_at'])} healthy and assignable"
        )
        actions.append(
            Action("cordon", "uncordon", name, f"Node/{name}", reason, before, after, {"name": name, "ops": ops})
        )
    state.forget_gone("cordon:", cordoned_keys)
    return actions


def _cordoned_since(node: dict[str, Any], cfg: RepairConfig, first_seen: datetime) -> datetime:
    added = [parse_time(t.get("timeAdded")) for t in cordon_taints(node, cfg.cordon_taint_keys)]
    known = [t for t in added if t]
    return min([*known, first_seen])


def _evidence_problem(record: dict[str, Any] | None, since: datetime, now: datetime, cfg: RepairConfig) -> str:
    if record is None:
        return "no health record; run `robodata health check` on it (a DaemonSet tolerates the cordon)"
    checked = record["checked_at"]
    if now - checked > timedelta(seconds=cfg.health_max_age_s):
        return f"newest health record {fmt_time(checked)} is stale"
    if checked < since:
        return f"newest health record {fmt_time(checked)} predates the cordon"
    if not (record["healthy"] and record["assignable"]):
        return "still unhealthy: " + "; ".join(record.get("reasons") or ["not assignable"])
    return ""


def _node_state(node: dict[str, Any]) -> dict[str, Any]:
    meta = node["metadata"]
    return {
        "uid": meta.get("uid"),
        "resourceVersion": meta["resourceVersion"],
        "unschedulable": bool(node["spec"].get("unschedulable")),
        "taints": node["spec"].get("taints") or [],
    }
