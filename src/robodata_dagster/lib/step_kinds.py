"""Per-step pod sizes and pools, set on assets as op tags (one place for every asset author).

    from resources.deployment import step_resources, step_pool

    @dg.asset(op_tags=step_resources("encode"), pool=step_pool("encode"))
    def containers(...): ...

`step_resources(kind)` returns the `dagster-k8s/config` tag the k8s_job_executor reads for that
step's pod (requests/limits, node selector, tolerations) plus `robodata/step-kind`, which the
executor's tag_concurrency_limits use. The tags are inert under the local multiprocess executor,
so asset code is identical in both deployments. `step_pool(kind)` names the Dagster pool
(instance-wide concurrency key); `POOL_LIMITS` are applied with `apply_pool_limits(instance)`.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from robodata.config import require

K8S_CONFIG_TAG = "dagster-k8s/config"
STEP_KIND_TAG = "robodata/step-kind"
GPU_RESOURCE = "nvidia.com/gpu"


@dataclass(frozen=True)
class PodSize:
    cpu_request: str
    memory_request: str
    cpu_limit: str
    memory_limit: str
    gpus: int = 0
    node_selector: dict[str, str] = field(default_factory=dict)
    ephemeral_storage: str = "10Gi"  # scratch for one batch (never grows with the dataset)

    def __post_init__(self) -> None:
        require(self.gpus >= 0, f"PodSize.gpus must be >= 0, got {self.gpus}")

    def k8s_config(self) -> dict[str, Any]:
        """The value of the `dagster-k8s/config` tag (UserDefinedDagsterK8sConfig fields)."""
        requests = {"cpu": self.cpu_request, "memory": self.memory_request, "ephemeral-storage": self.ephemeral_storage}
        limits = {"cpu": self.cpu_limit, "memory": self.memory_limit, "ephemeral-storage": self.ephemeral_storage}
        pod: dict[str, Any] = {}
        if self.gpus:
            requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = str(self.gpus)
            pod["tolerations"] = [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]
        if self.node_selector:
            pod["node_selector"] = dict(self.node_selector)
        cfg: dict[str, Any] = {"container_config": {"resources": {"requests": requests, "limits": limits}}}
        if pod:
            cfg["pod_spec_config"] = pod
        return cfg


STEP_SIZES: dict[str, PodSize] = {
    # catalog updates, manifests, checks: I/O bound, small pods, many of them
    "light": PodSize("250m", "512Mi", "1", "1Gi", node_selector={"robodata.io/pool": "general"}),
    # video encoding: libx264/libsvtav1 use every core they get
    "encode": PodSize("7", "8Gi", "8", "12Gi", node_selector={"robodata.io/pool": "cpu-encode"}),
    # training: one GPU node slice
    "train": PodSize("8", "48Gi", "16", "64Gi", gpus=1, node_selector={"robodata.io/pool": "gpu"}),
}

POOLS: dict[str, str] = {"light": "robodata-light", "encode": "robodata-encode", "train": "robodata-train"}
# Instance-wide open slots per pool (steps across all runs); matches the node pools' capacity.
POOL_LIMITS: dict[str, int] = {"robodata-light": 64, "robodata-encode": 24, "robodata-train": 4}
# Per run, inside the k8s_job_executor / multiprocess executor.
STEP_TAG_LIMITS: list[dict[str, Any]] = [
    {"key": STEP_KIND_TAG, "value": "encode", "limit": 8},
    {"key": STEP_KIND_TAG, "value": "train", "limit": 1},
]


def _check_kind(kind: str) -> None:
    require(kind in STEP_SIZES, f"unknown step kind {kind!r}; known: {sorted(STEP_SIZES)}")


def step_resources(kind: str) -> dict[str, Any]:
    """Op tags for a step of `kind` ("light" | "encode" | "train")."""
    _check_kind(kind)
    return {K8S_CONFIG_TAG: copy.deepcopy(STEP_SIZES[kind].k8s_config()), STEP_KIND_TAG: kind}


def step_pool(kind: str) -> str:
    """The Dagster pool (concurrency key) for steps of `kind`."""
    _check_kind(kind)
    return POOLS[kind]


def apply_pool_limits(instance: Any, limits: dict[str, int] | None = None) -> dict[str, int]:
    """Set the instance-wide slot count of every robodata pool (idempotent); returns what was set."""
    limits = dict(POOL_LIMITS if limits is None else limits)
    for pool, n in limits.items():
        require(n >= 0, f"pool {pool}: limit must be >= 0, got {n}")
        instance.event_log_storage.set_concurrency_slots(pool, n)
    return limits
