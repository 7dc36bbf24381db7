"""The deployment's environment, read only here, only through `dg.EnvVar`, only when needed.

Nothing reads the environment at import: resources resolve their empty fields when a step or a
sensor tick uses them (in that process: the run's pod, the code server), and the executor is chosen
when the definitions are built (definitions.py). Variables:

ROBODATA_DEPLOYMENT, ROBODATA_MAX_CONCURRENT_STEPS, ROBODATA_K8S_NAMESPACE, ROBODATA_K8S_IMAGE
    executor (lib/deployment.py)
ROBODATA_TRAIN_EAGER    1: training_run is eager (declarative automation; definitions.py)
ROBODATA_STORAGE_ROOT   state root: ingest tables, containers, catalog, manifests (default .demo)
ROBODATA_LANDING        landing zone (default <root>/landing)
ROBODATA_REPAIR_APPLY, ROBODATA_REPAIR_AUDIT, ROBODATA_HEALTH_TABLE, ROBODATA_KUBE_HOST,
ROBODATA_KUBE_CONTEXT, ROBODATA_KUBE_IN_CLUSTER, KUBECONFIG
    the cluster-repair sensors (resources/cluster.py)

S3 endpoint, region and credentials: the standard AWS_* variables, read by robodata.storage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dagster as dg

if TYPE_CHECKING:
    from robodata.storage import StateRoot

STORAGE_ROOT = "ROBODATA_STORAGE_ROOT"
DEFAULT_STORAGE_ROOT = ".demo"


def setting(name: str, default: str = "") -> str:
    """`name` from this process's environment (empty or unset: `default`)."""
    return dg.EnvVar(name).get_value() or default


def flag(name: str) -> bool:
    """A yes/no variable: 1, true or yes (any case) is yes."""
    return setting(name).strip().lower() in ("1", "true", "yes")


def storage_root(explicit: str = "") -> str:
    """`explicit`, else ROBODATA_STORAGE_ROOT, else .demo (a folder or s3://bucket/prefix), without a trailing /."""
    root = explicit or setting(STORAGE_ROOT, DEFAULT_STORAGE_ROOT)
    return root.rstrip("/") or root


def state_root(explicit: str = "") -> StateRoot:
    """The state root `storage_root(explicit)` names (robodata.storage.StateRoot: where everything
    lives under it; S3 options from this process's AWS_* variables)."""
    from robodata.storage import StateRoot

    return StateRoot(storage_root(explicit))
