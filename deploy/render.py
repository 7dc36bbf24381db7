"""Render the Kubernetes Job each step kind gets under the k8s_job_executor, with dagster-k8s's own builders.

    python -m deploy.render [--out deploy/k8s] [--image registry/robodata:TAG] [--check]

For every kind in robodata_dagster/lib/step_kinds.py (light, encode, train) this builds the executor's
container context exactly as `k8s_job_executor` does (executor config from robodata_dagster/lib/deployment.py
merged with the step's `dagster-k8s/config` op tag) and calls `dagster_k8s.job.construct_dagster_k8s_job`.
The YAML written is what the step pod will look like (run id and step args are placeholders).
`--check` exits 1 when the committed files differ from a fresh render.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml
from dagster_k8s.container_context import K8sContainerContext
from dagster_k8s.job import (
    DagsterK8sJobConfig,
    UserDefinedDagsterK8sConfig,
    construct_dagster_k8s_job,
    get_user_defined_k8s_config,
)
from kubernetes.client import ApiClient

from robodata_dagster.lib.deployment import K8sSettings
from robodata_dagster.lib.step_kinds import STEP_SIZES, step_resources

OUT = Path(__file__).resolve().parent / "k8s"
DEFAULT_IMAGE = "registry.example.com/robodata:0.1.0"
# As in the Helm chart (deploy/helm/values.yaml): instance ConfigMap, Postgres password Secret, DAGSTER_HOME.
RUN_LAUNCHER = {
    "dagster_home": "/opt/dagster/dagster_home",
    "instance_config_map": "dagster-instance",
    "postgres_password_secret": "dagster-postgresql-secret",
}


def _executor_context(settings: K8sSettings) -> K8sContainerContext:
    """The container context k8s_job_executor builds from its executor config."""
    cfg = settings.executor_config(max_concurrent=64)
    return K8sContainerContext(
        image_pull_policy=cfg.get("image_pull_policy"),
        service_account_name=cfg.get("service_account_name"),
        env_config_maps=cfg.get("env_config_maps"),
        env_secrets=cfg.get("env_secrets"),
        namespace=cfg.get("job_namespace"),
        run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(cfg.get("step_k8s_config", {})),
    )


def render_step_job(kind: str, settings: K8sSettings, image: str) -> dict[str, Any]:
    """The V1Job (as a plain camelCase dict) for one step of `kind`."""
    tags = {k: v if isinstance(v, str) else json.dumps(v) for k, v in step_resources(kind).items()}
    ctx = _executor_context(settings).merge(K8sContainerContext(run_k8s_config=get_user_defined_k8s_config(tags)))
    job_config = DagsterK8sJobConfig(
        job_image=image,
        dagster_home=RUN_LAUNCHER["dagster_home"],
        instance_config_map=RUN_LAUNCHER["instance_config_map"],
        postgres_password_secret=RUN_LAUNCHER["postgres_password_secret"],
    )
    name = f"dagster-step-example-{kind}"
    job = construct_dagster_k8s_job(
        job_config=job_config,
        args=["dagster", "api", "execute_step"],
        job_name=name,
        pod_name=name,
        component="step_worker",
        user_defined_k8s_config=ctx.run_k8s_config,
        labels={"dagster/job": "ingest_batch", "dagster/op": f"example_{kind}_step", "dagster/run-id": "example"},
        env_vars=[
            {"name": "DAGSTER_RUN_JOB_NAME", "value": "ingest_batch"},
            {"name": "DAGSTER_RUN_STEP_KEY", "value": f"example_{kind}_step"},
        ],
    )
    body = ApiClient().sanitize_for_serialization(job)
    body["metadata"]["namespace"] = ctx.namespace
    return body


def render_all(image: str = DEFAULT_IMAGE, settings: K8sSettings | None = None) -> dict[str, str]:
    """File name -> YAML text for every step kind."""
    settings = settings or K8sSettings(image=image)
    header = "# Rendered by `python -m deploy.render` from robodata_dagster/lib/step_kinds.py; do not edit.\n"
    return {
        f"step-{kind}.yaml": header + yaml.safe_dump(render_step_job(kind, settings, image), sort_keys=True)
        for kind in STEP_SIZES
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m deploy.render", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--image", default=DEFAULT_IMAGE)
    ap.add_argument("--check", action="store_true", help="fail if files in --out are stale")
    args = ap.parse_args(argv)
    files = render_all(args.image)
    if args.check:
        stale = [n for n, text in files.items() if not (args.out / n).exists() or (args.out / n).read_text() != text]
        if stale:
            print(f"stale: {stale}; run `python -m deploy.render`", file=sys.stderr)
            return 1
        print(f"{len(files)} job specs up to date in {args.out}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (args.out / name).write_text(text)
        print(args.out / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
