"""Deployment selection, in one place: ROBODATA_DEPLOYMENT=local|prod.

local (default): storage root on the filesystem (ROBODATA_STORAGE_ROOT, default .demo),
    SQLite instance (deploy/dagster.local.yaml), in-process executor (steps one after another).
prod: storage on S3 (ROBODATA_STORAGE_ROOT=s3://bucket/prefix; endpoint, region and credentials
    from the standard AWS_* variables or the pod's IAM role), Postgres instance (deploy/dagster.yaml,
    dagster-postgres), k8s_job_executor: one pod per step, sized by `step_resources(kind)` tags.

Other variables: ROBODATA_K8S_NAMESPACE (default "robodata"), ROBODATA_K8S_IMAGE (default: the
code location's image from the Helm user deployment), ROBODATA_MAX_CONCURRENT_STEPS (step pods per run).

`Deployment.from_env().executor()` is the code location's default executor (definitions.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from robodata.config import require
from robodata.storage import StorageLocation
from robodata_dagster.lib.env import DEFAULT_STORAGE_ROOT, STORAGE_ROOT, setting
from robodata_dagster.lib.step_kinds import STEP_SIZES, STEP_TAG_LIMITS

DEPLOYMENTS = ("local", "prod")
# The instance YAML of each deployment, relative to the repository (copied to $DAGSTER_HOME; not in the wheel).
INSTANCE_YAML = {"local": Path("deploy/dagster.local.yaml"), "prod": Path("deploy/dagster.yaml")}
# Tags the ingestion sensor puts on batch runs; the run queue limits them (deploy/dagster.yaml).
BATCH_RUN_TAGS = {"robodata/run-kind": "ingest-batch"}


@dataclass(frozen=True)
class K8sSettings:
    namespace: str = "robodata"
    image: str | None = None  # None: the code location's image
    image_pull_policy: str = "IfNotPresent"
    service_account: str = "robodata-steps"  # bound to the S3 IAM role (IRSA)
    env_config_maps: tuple[str, ...] = ("robodata-env",)  # ROBODATA_*, AWS_REGION, AWS_ENDPOINT_URL
    env_secrets: tuple[str, ...] = ("robodata-s3-credentials",)  # optional static keys

    def __post_init__(self) -> None:
        require(bool(self.namespace), "K8sSettings.namespace must not be empty")
        require(
            self.image_pull_policy in ("Always", "IfNotPresent", "Never"),
            f"K8sSettings.image_pull_policy: bad value {self.image_pull_policy!r}",
        )

    def executor_config(self, max_concurrent: int) -> dict[str, Any]:
        cfg: dict[str, Any] = {
            "job_namespace": self.namespace,
            "image_pull_policy": self.image_pull_policy,
            "service_account_name": self.service_account,
            "env_config_maps": list(self.env_config_maps),
            "env_secrets": list(self.env_secrets),
            "max_concurrent": max_concurrent,
            "tag_concurrency_limits": STEP_TAG_LIMITS,
            # steps without a step_resources() tag get a light pod
            "step_k8s_config": STEP_SIZES["light"].k8s_config(),
        }
        if self.image:
            cfg["job_image"] = self.image
        return cfg


@dataclass(frozen=True)
class Deployment:
    name: str
    storage: StorageLocation
    max_concurrent_steps: int
    k8s: K8sSettings | None = None

    def __post_init__(self) -> None:
        require(self.name in DEPLOYMENTS, f"ROBODATA_DEPLOYMENT must be one of {DEPLOYMENTS}, got {self.name!r}")
        require(self.max_concurrent_steps >= 1, f"max_concurrent_steps must be >= 1, got {self.max_concurrent_steps}")
        if self.name == "prod":
            require(
                self.storage.is_s3,
                f"prod storage must be on S3 (ROBODATA_STORAGE_ROOT=s3://...), got {self.storage.root!r}",
            )
            require(self.k8s is not None, "prod deployment needs K8sSettings")

    @property
    def instance_yaml(self) -> Path:
        """The dagster.yaml this deployment's instance uses, relative to the repository (copied to $DAGSTER_HOME)."""
        return INSTANCE_YAML[self.name]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Deployment:
        """From `env`, else this process's environment (through dg.EnvVar; called when the
        definitions are built, never at import)."""

        def get(name: str, default: str) -> str:
            return (env.get(name) or default) if env is not None else setting(name, default)

        name = get("ROBODATA_DEPLOYMENT", "local").strip().lower() or "local"
        require(name in DEPLOYMENTS, f"ROBODATA_DEPLOYMENT must be one of {DEPLOYMENTS}, got {name!r}")
        root = get(STORAGE_ROOT, DEFAULT_STORAGE_ROOT if name == "local" else "")
        require(bool(root), "ROBODATA_STORAGE_ROOT must be set for the prod deployment (s3://bucket/prefix)")
        raw = get("ROBODATA_MAX_CONCURRENT_STEPS", "1" if name == "local" else "64")
        require(raw.isdigit(), f"ROBODATA_MAX_CONCURRENT_STEPS must be a positive integer, got {raw!r}")
        k8s = None
        if name == "prod":
            k8s = K8sSettings(
                namespace=get("ROBODATA_K8S_NAMESPACE", "robodata"), image=get("ROBODATA_K8S_IMAGE", "") or None
            )
        return cls(name=name, storage=StorageLocation.from_env(root, env), max_concurrent_steps=int(raw), k8s=k8s)

    def executor(self) -> dg.ExecutorDefinition:
        if self.name == "prod":
            from dagster_k8s import k8s_job_executor

            assert self.k8s is not None
            return k8s_job_executor.configured(self.k8s.executor_config(self.max_concurrent_steps), name="robodata_k8s")
        # Locally every step runs in the run's own process, one after another: the parallel work is
        # inside the steps (conversion / alignment worker processes, training ranks), and a process
        # per step costs seconds of start-up each (measured: ~6 s a step vs < 1 s of work for a
        # small batch), the same reasoning as the ingestion profiles' in_process_executor.
        return dg.in_process_executor.configured({}, name="robodata_local")
