import copy
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from deploy.render import render_all
from robodata_dagster.lib.step_kinds import POOL_LIMITS, STEP_SIZES

ROOT = Path(__file__).resolve().parents[2]
K8S_VERSION = "1.37.0"


def _jobs():
    return {name: yaml.safe_load(text) for name, text in render_all().items()}


def _container(job):
    return job["spec"]["template"]["spec"]["containers"][0]


def test_rendered_step_jobs_pass_the_kubernetes_schema():
    jobs = _jobs()
    assert set(jobs) == {f"step-{k}.yaml" for k in STEP_SIZES}
    for job in jobs.values():
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)  # raises on any schema error
        assert job["kind"] == "Job" and job["metadata"]["namespace"] == "robodata"


def test_step_kinds_get_their_own_pod_sizes():
    jobs = _jobs()
    res = {k: _container(jobs[f"step-{k}.yaml"])["resources"] for k in STEP_SIZES}
    assert res["light"]["requests"]["cpu"] == "250m"
    assert int(res["encode"]["requests"]["cpu"]) >= 4 and "nvidia.com/gpu" not in res["encode"]["limits"]
    assert res["train"]["limits"]["nvidia.com/gpu"] == "1"
    train_spec = jobs["step-train.yaml"]["spec"]["template"]["spec"]
    assert train_spec["nodeSelector"] == {"robodata.io/pool": "gpu"}
    assert any(t["key"] == "nvidia.com/gpu" for t in train_spec["tolerations"])
    for job in jobs.values():  # executor-level settings survive the per-step merge
        spec = job["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == "robodata-steps"
        assert {"configMapRef": {"name": "robodata-env"}} in _container(job)["envFrom"]


def test_schema_validation_rejects_a_broken_spec():
    job = copy.deepcopy(_jobs()["step-encode.yaml"])
    _container(job)["resources"]["requests"]["cpu"] = {"cores": 4}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    job = copy.deepcopy(_jobs()["step-light.yaml"])
    job["spec"]["template"]["spec"]["nodeSelektor"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)


def test_committed_job_specs_are_fresh():
    out = subprocess.run([sys.executable, "-m", "deploy.render", "--check"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_helm_values_match_the_instance_yaml():
    inst = yaml.safe_load((ROOT / "deploy" / "dagster.yaml").read_text())
    vals = yaml.safe_load((ROOT / "deploy" / "helm" / "values.yaml").read_text())
    q = vals["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    rc = inst["run_coordinator"]["config"]
    assert q["maxConcurrentRuns"] == rc["max_concurrent_runs"]
    assert q["tagConcurrencyLimits"] == rc["tag_concurrency_limits"]
    assert vals["dagsterDaemon"]["runRetries"]["maxRetries"] == inst["run_retries"]["max_retries"] > 0
    assert vals["telemetry"]["enabled"] is False and inst["telemetry"]["enabled"] is False
    launcher = vals["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]["containerConfig"]["resources"]
    assert launcher == inst["run_launcher"]["config"]["run_k8s_config"]["container_config"]["resources"]
    assert vals["postgresql"]["enabled"] is False and vals["generatePostgresqlPasswordSecret"] is False
    assert {d["name"] for d in vals["dagster-user-deployments"]["deployments"]} == {"robodata"}
    env = vals["dagster-user-deployments"]["deployments"][0]["env"]
    assert {"name": "ROBODATA_DEPLOYMENT", "value": "prod"} in env
    assert set(POOL_LIMITS) == {"robodata-light", "robodata-encode", "robodata-train"}
