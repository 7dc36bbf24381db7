import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dagster_k8s.job import get_user_defined_k8s_config

from robodata.errors import ConfigError
from robodata_dagster.lib.deployment import Deployment
from robodata_dagster.lib.step_kinds import GPU_RESOURCE, POOL_LIMITS, apply_pool_limits, step_pool, step_resources

ROOT = Path(__file__).resolve().parents[2]


def _as_run_tags(tags):  # what Dagster stores: non-string op tag values are JSON-encoded
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in tags.items()}


def test_local_is_the_default():
    d = Deployment.from_env({})
    assert d.name == "local" and not d.storage.is_s3 and os.path.isabs(d.storage.root)
    assert d.executor().name == "robodata_local"
    assert d.instance_yaml.name == "dagster.local.yaml" and (ROOT / d.instance_yaml).exists()
    assert d.k8s is None


def test_prod_selects_s3_postgres_and_k8s():
    env = {
        "ROBODATA_DEPLOYMENT": "prod",
        "ROBODATA_STORAGE_ROOT": "s3://robodata-prod/v1/",
        "AWS_REGION": "eu-west-1",
        "ROBODATA_K8S_NAMESPACE": "data",
        "ROBODATA_K8S_IMAGE": "reg/robodata:1",
    }
    d = Deployment.from_env(env)
    assert d.storage.root == "s3://robodata-prod/v1" and d.storage.region == "eu-west-1"
    assert d.storage.delta_options()["AWS_REGION"] == "eu-west-1"
    assert ROOT / d.instance_yaml == ROOT / "deploy" / "dagster.yaml"
    ex = d.executor()
    assert ex.name == "robodata_k8s"
    cfg = d.k8s.executor_config(d.max_concurrent_steps)
    assert cfg["job_namespace"] == "data" and cfg["job_image"] == "reg/robodata:1" and cfg["max_concurrent"] == 64


@pytest.mark.parametrize(
    "env, msg",
    [
        ({"ROBODATA_DEPLOYMENT": "staging"}, "ROBODATA_DEPLOYMENT"),
        ({"ROBODATA_DEPLOYMENT": "prod"}, "ROBODATA_STORAGE_ROOT"),
        ({"ROBODATA_DEPLOYMENT": "prod", "ROBODATA_STORAGE_ROOT": "/data"}, "S3"),
        ({"ROBODATA_MAX_CONCURRENT_STEPS": "many"}, "ROBODATA_MAX_CONCURRENT_STEPS"),
        ({"ROBODATA_STORAGE_ROOT": "gs://x"}, "scheme"),
    ],
)
def test_bad_deployment_env_is_a_clear_error(env, msg):
    with pytest.raises(ConfigError, match=msg):
        Deployment.from_env(env)


def test_step_resources_are_read_by_dagster_k8s():
    light = get_user_defined_k8s_config(_as_run_tags(step_resources("light")))
    encode = get_user_defined_k8s_config(_as_run_tags(step_resources("encode")))
    train = get_user_defined_k8s_config(_as_run_tags(step_resources("train")))
    res = {k: c.container_config["resources"] for k, c in (("light", light), ("encode", encode), ("train", train))}
    assert res["light"]["requests"]["cpu"] == "250m"
    assert int(res["encode"]["requests"]["cpu"]) >= 4  # CPU-heavy pods for video encoding
    assert res["train"]["limits"][GPU_RESOURCE] == "1" and GPU_RESOURCE not in res["encode"]["limits"]
    assert train.pod_spec_config["tolerations"][0]["key"] == GPU_RESOURCE
    assert step_resources("encode")["robodata/step-kind"] == "encode"
    assert {step_pool(k) for k in ("light", "encode", "train")} <= set(POOL_LIMITS)
    with pytest.raises(ConfigError, match="unknown step kind"):
        step_resources("gpu")


def test_tags_are_copies():
    step_resources("train")["dagster-k8s/config"]["container_config"].clear()
    assert step_resources("train")["dagster-k8s/config"]["container_config"]["resources"]


def test_pool_limits_applied_to_instance():
    import dagster as dg

    with dg.instance_for_test() as inst:
        apply_pool_limits(inst)
        for pool, n in POOL_LIMITS.items():
            assert inst.event_log_storage.get_concurrency_info(pool).slot_count == n


def test_definitions_use_k8s_executor_in_prod(tmp_path):
    code = (
        "from robodata_dagster.definitions import loaded\n"
        "names = {j.executor_def.name for j in loaded().resolve_all_job_defs()}\n"
        "print(sorted(names))\n"
    )
    env = dict(os.environ, ROBODATA_DEPLOYMENT="prod", ROBODATA_STORAGE_ROOT="s3://robodata-prod/v1")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    names = set(ast.literal_eval(out.stdout.strip().splitlines()[-1]))
    # every job gets the k8s executor unless it pins its own (ingestion profiles run in one pod on purpose)
    assert "robodata_k8s" in names and names <= {"robodata_k8s", "in_process"}, names


def test_executor_configs_pass_the_executors_own_schemas():
    import dagster as dg
    from dagster._config import validate_config
    from dagster_k8s import k8s_job_executor

    from robodata_dagster.lib.deployment import K8sSettings
    from robodata_dagster.lib.step_kinds import STEP_TAG_LIMITS

    k8s = validate_config(
        k8s_job_executor.config_schema.config_type, K8sSettings(image="reg/robodata:1").executor_config(64)
    )
    assert k8s.success, k8s.errors
    assert not validate_config(k8s_job_executor.config_schema.config_type, {"max_concurrent": "many"}).success
    local = validate_config(
        dg.multiprocess_executor.config_schema.config_type,
        {"max_concurrent": 2, "tag_concurrency_limits": STEP_TAG_LIMITS},
    )
    assert local.success, local.errors
