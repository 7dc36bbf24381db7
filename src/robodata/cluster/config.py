"""Typed config for scheduler-record repair. Dry-run is the default."""

from __future__ import annotations

from dataclasses import dataclass

from robodata.config import require


@dataclass(frozen=True)
class RepairConfig:
    dry_run: bool = True
    # -- cordon repair -------------------------------------------------------------------
    cordon_grace_s: float = 2 * 3600  # cordoned longer than this, healthy -> restore
    health_max_age_s: float = 3600  # a health record older than this is no evidence
    cordon_taint_keys: tuple[str, ...] = ("node.kubernetes.io/unschedulable", "robodata.io/cordoned")
    keep_cordoned_annotation: str = "robodata.io/keep-cordoned"  # operator's hold: never touched
    # -- stale allocations ---------------------------------------------------------------
    stale_grace_s: float = 15 * 60  # an allocation must be dead this long before it is cleared
    job_label: str = "dagster/run-id"  # pods of one job share this label
    allocation_annotations: tuple[str, ...] = ("robodata.io/allocated-to",)  # node annotation -> job id
    lease_node_label: str = "robodata.io/node"  # allocation leases carry the node they claim
    protected_namespaces: tuple[str, ...] = ("kube-node-lease",)  # node heartbeats: never touched
    clear_finished_pods: bool = True  # delete Succeeded/Failed pods of dead jobs on idle nodes
    realert_s: float = 24 * 3600  # repeat a dry-run alert for the same object after this
    page_size: int = 500
    max_writes_per_pass: int = 50  # safety brake: the rest waits for the next pass

    def __post_init__(self) -> None:
        for name in ("cordon_grace_s", "health_max_age_s", "stale_grace_s", "realert_s"):
            require(getattr(self, name) >= 0, f"repair.{name} must be >= 0")
        require(bool(self.cordon_taint_keys), "repair.cordon_taint_keys must not be empty")
        require(bool(self.job_label), "repair.job_label must not be empty")
        require(1 <= self.page_size <= 5000, "repair.page_size must be in [1, 5000]")
        require(self.max_writes_per_pass >= 1, "repair.max_writes_per_pass must be >= 1")
