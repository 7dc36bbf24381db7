"""The cluster-repair resource: where the API server, the audit and health tables are.

Environment (all optional): ROBODATA_REPAIR_APPLY=1 to make changes (default: dry-run),
ROBODATA_KUBE_HOST / KUBECONFIG / ROBODATA_KUBE_CONTEXT / ROBODATA_KUBE_IN_CLUSTER=1,
ROBODATA_REPAIR_AUDIT and ROBODATA_HEALTH_TABLE (Delta table URIs).
"""

import os

import dagster as dg

from robodata.cluster.config import RepairConfig
from robodata.cluster.kube import api_client


class ClusterRepairResource(dg.ConfigurableResource):
    """Settings for the scheduler-record repair sensors (defs/cluster/sensors.py)."""

    dry_run: bool = True
    audit_uri: str = ".robodata/cluster_repair_audit"
    health_uri: str = ".robodata/node_health"
    kube_host: str | None = None
    kubeconfig: str | None = None
    kube_context: str | None = None
    in_cluster: bool = False
    cordon_grace_s: float = 2 * 3600
    stale_grace_s: float = 15 * 60
    health_max_age_s: float = 3600

    def repair_config(self) -> RepairConfig:
        return RepairConfig(
            dry_run=self.dry_run,
            cordon_grace_s=self.cordon_grace_s,
            stale_grace_s=self.stale_grace_s,
            health_max_age_s=self.health_max_age_s,
        )

    def api(self):
        return api_client(
            host=self.kube_host, kubeconfig=self.kubeconfig, context=self.kube_context, in_cluster=self.in_cluster
        )


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources={"cluster_repair": _from_env()})


def _from_env() -> ClusterRepairResource:
    return ClusterRepairResource(
        dry_run=not _env_flag("ROBODATA_REPAIR_APPLY"),
        audit_uri=os.environ.get("ROBODATA_REPAIR_AUDIT", ".robodata/cluster_repair_audit"),
        health_uri=os.environ.get("ROBODATA_HEALTH_TABLE", ".robodata/node_health"),
        kube_host=os.environ.get("ROBODATA_KUBE_HOST") or None,
        kubeconfig=os.environ.get("KUBECONFIG") or None,
        kube_context=os.environ.get("ROBODATA_KUBE_CONTEXT") or None,
        in_cluster=_env_flag("ROBODATA_KUBE_IN_CLUSTER"),
    )
