"""One repair pass: snapshot the cluster, plan, apply (or only report in dry-run), audit."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from kubernetes import client

from robodata.cluster.actions import Action, execute
from robodata.cluster.allocation_repair import plan_allocation_repairs
from robodata.cluster.audit import audit_row, write_audit
from robodata.cluster.config import RepairConfig
from robodata.cluster.cordon_repair import plan_cordon_repairs
from robodata.cluster.snapshot import ClusterSnapshot
from robodata.cluster.state import RepairState
from robodata.health.store import latest_by_node

REPAIRS = ("cordon", "allocation")


@dataclass
class RepairReport:
    pass_id: str
    dry_run: bool
    planned: list[Action] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # audit rows written this pass
    deferred: int = 0  # changes left for the next pass by max_writes_per_pass

    def count(self, outcome: str) -> int:
        return sum(1 for r in self.rows if r["outcome"] == outcome)

    def summary(self) -> str:
        if not self.rows:
            return f"{len(self.planned)} planned, nothing new to report"
        parts = [f"{r['action']} {r['target']} -> {r['outcome']}" for r in self.rows]
        more = f"; {self.deferred} deferred to the next pass" if self.deferred else ""
        return f"{len(self.rows)} action(s){' (dry-run)' if self.dry_run else ''}: " + "; ".join(parts) + more


def run_repair(
    api: client.ApiClient,
    cfg: RepairConfig,
    *,
    audit_uri: str,
    health_uri: str | None = None,
    state: RepairState | None = None,
    repairs: tuple[str, ...] = REPAIRS,
    now: datetime | None = None,
    storage_options: dict[str, str] | None = None,
) -> RepairReport:
    """Plan and (unless cfg.dry_run) apply repairs; every reported action goes to the audit table.

    In dry-run, a planned action is reported again only after cfg.realert_s. Each applied
    change is audited right after it is made; at most cfg.max_writes_per_pass per pass.
    """
    unknown = set(repairs) - set(REPAIRS)
    if unknown:
        raise ValueError(f"unknown repair(s) {sorted(unknown)}; known: {list(REPAIRS)}")
    now = now or datetime.now(UTC)
    state = state if state is not None else RepairState()
    snap = ClusterSnapshot.fetch(api, cfg)
    planned: list[Action] = []
    if "cordon" in repairs:
        health = (
            latest_by_node(
                health_uri, max_age=timedelta(seconds=cfg.health_max_age_s), now=now, storage_options=storage_options
            )
            if health_uri
            else {}
        )
        planned += plan_cordon_repairs(snap, health, state, cfg, now)
    if "allocation" in repairs:
        planned += plan_allocation_repairs(snap, state, cfg, now)
    report = RepairReport(uuid.uuid4().hex, cfg.dry_run, planned)
    reported: list[dict[str, Any]] = []
    writes = 0
    for action in planned:
        reporting_only = cfg.dry_run or action.action == "alert"
        if reporting_only:
            if not state.should_report(action.key, now, cfg.realert_s):
                continue
            row = audit_row(report.pass_id, now, action, execute(api, action, cfg.dry_run), cfg.dry_run)
            state.mark_reported(action.key, now)
            reported.append(row)
        else:
            if writes >= cfg.max_writes_per_pass:
                report.deferred += 1
                continue
            writes += 1
            row = audit_row(report.pass_id, now, action, execute(api, action, False), False)
            write_audit(audit_uri, [row], storage_options=storage_options)  # a change is on record at once
        report.rows.append(row)
    state.prune_reported(now, older_than_s=max(cfg.realert_s, 1.0) * 2)
    write_audit(audit_uri, reported, storage_options=storage_options)
    return report
