"""The cluster-repair resource: where the API server, the audit and health tables are, and the
repair settings (robodata.cluster.config.RepairConfig, field for field).

Empty connection fields are read when a sensor ticks (lib/env.py): ROBODATA_KUBE_HOST, KUBECONFIG,
ROBODATA_KUBE_CONTEXT, ROBODATA_KUBE_IN_CLUSTER=1, ROBODATA_REPAIR_AUDIT, ROBODATA_HEALTH_TABLE;
ROBODATA_REPAIR_APPLY=1 turns dry-run off (the default is to report only).
"""

from typing import TYPE_CHECKING, Any

import dagster as dg

from robodata_dagster.lib.env import flag, setting
from robodata_dagster.lib.settings import to_settings

if TYPE_CHECKING:
    from robodata.cluster.config import RepairConfig


class RepairSettings(dg.Config):
    """robodata.cluster.config.RepairConfig."""

    dry_run: bool = True
    cordon_grace_s: float = 2 * 3600
    health_max_age_s: float = 3600
    cordon_taint_keys: list[str] = ["node.kubernetes.io/unschedulable", "robodata.io/cordoned"]
    keep_cordoned_annotation: str = "robodata.io/keep-cordoned"
    stale_grace_s: float = 15 * 60
    job_label: str = "dagster/run-id"
    allocation_annotations: list[str] = ["robodata.io/allocated-to"]
    lease_node_label: str = "robodata.io/node"
    protected_namespaces: list[str] = ["kube-node-lease"]
    clear_finished_pods: bool = True
    realert_s: float = 24 * 3600
    page_size: int = 500
    max_writes_per_pass: int = 50


class ClusterRepairResource(dg.ConfigurableResource):
    """Settings for the scheduler-record repair sensors (sensors/cluster.py)."""

    repair: RepairSettings = RepairSettings()
    audit_uri: str = ""  # empty: ROBODATA_REPAIR_AUDIT, else .robodata/cluster_repair_audit
    health_uri: str = ""  # empty: ROBODATA_HEALTH_TABLE, else .robodata/node_health
    kube_host: str = ""
    kubeconfig: str = ""
    kube_context: str = ""
    in_cluster: bool = False

    def repair_config(self) -> "RepairConfig":
        from robodata.cluster.config import RepairConfig

        apply = flag("ROBODATA_REPAIR_APPLY")
        return to_settings(RepairConfig, self.repair, **({"dry_run": False} if apply else {}))

    def audit_table(self) -> str:
        return self.audit_uri or setting("ROBODATA_REPAIR_AUDIT", ".robodata/cluster_repair_audit")

    def health_table(self) -> str:
        return self.health_uri or setting("ROBODATA_HEALTH_TABLE", ".robodata/node_health")

    def api(self) -> Any:  # a kubernetes ApiClient (a context manager)
        from robodata.cluster.kube import api_client

        return api_client(
            host=self.kube_host or setting("ROBODATA_KUBE_HOST") or None,
            kubeconfig=self.kubeconfig or setting("KUBECONFIG") or None,
            context=self.kube_context or setting("ROBODATA_KUBE_CONTEXT") or None,
            in_cluster=self.in_cluster or flag("ROBODATA_KUBE_IN_CLUSTER"),
        )
