"""Every step of the loaded code location declares its kind, every job its run kind, and every
ConfigError a step raises fails it without a retry."""

import json
from pathlib import Path

import dagster as dg
import pytest
import yaml

from robodata.errors import ConfigError
from robodata_dagster.definitions import loaded
from robodata_dagster.lib import steps
from robodata_dagster.lib.step_kinds import K8S_CONFIG_TAG, STEP_KIND_TAG, STEP_SIZES, step_pool, step_resources

ROOT = Path(__file__).resolve().parents[2]
RUN_KIND = "robodata/run-kind"


def _step_nodes():
    """(name, op definition) of every asset, asset check and job op in the code location."""
    defs = loaded()
    out = {}
    for ad in defs.resolve_asset_graph().assets_defs:
        if ad.is_executable:
            out[ad.node_def.name] = ad.node_def
    for job in defs.resolve_all_job_defs():  # and the ops of op jobs
        for node in job.graph.node_defs:
            out.setdefault(node.name, node)
    return out


def _k8s(tag):  # op tags are stored as strings (non-string values JSON-encoded)
    return json.loads(tag) if isinstance(tag, str) else tag


def _helm_run_kinds() -> set[str]:
    vals = yaml.safe_load((ROOT / "deploy" / "helm" / "values.yaml").read_text())
    q = vals["dagsterDaemon"]["runCoordinator"]["config"]["queuedRunCoordinator"]
    return {lim["value"] for lim in q["tagConcurrencyLimits"] if lim["key"] == RUN_KIND}


def test_every_asset_check_and_op_carries_its_step_kind_and_pool():
    nodes = _step_nodes()
    assert {"episodes", "training_run", "manifest", "qc_post_conversion", "prune_old_runs"} <= set(nodes)
    missing = {}
    for name, node in nodes.items():
        kind = node.tags.get(STEP_KIND_TAG)
        if kind not in STEP_SIZES:
            missing[name] = "no step kind"
        elif _k8s(node.tags.get(K8S_CONFIG_TAG)) != step_resources(kind)[K8S_CONFIG_TAG]:
            missing[name] = f"k8s config is not the {kind} pod"
        elif node.pool != step_pool(kind):
            missing[name] = f"pool {node.pool!r}, not {step_pool(kind)!r}"
        elif not steps.is_adapted(node.compute_fn.decorated_fn):
            missing[name] = "not declared through robodata_dagster.lib.steps (no ConfigError adapter)"
    assert not missing, missing
    kinds = {name: node.tags[STEP_KIND_TAG] for name, node in nodes.items()}
    assert kinds["training_run"] == "train" and kinds["episodes"] == "encode" and kinds["manifest"] == "light"


def test_every_job_emits_a_run_kind_the_run_queue_knows_and_every_queued_kind_is_emitted():
    helm = _helm_run_kinds()
    jobs = {j.name: j for j in loaded().resolve_all_job_defs() if not j.name.startswith("__")}
    emitted = {name: j.run_tags.get(RUN_KIND) for name, j in jobs.items()}
    assert not {n for n, k in emitted.items() if k not in helm}, emitted  # no job outside the queue's limits
    assert helm - set(emitted.values()) == set(), (
        f"run kinds in values.yaml no job emits: {helm - set(emitted.values())}"
    )
    assert emitted["training"] == "train" and emitted["bulk"] == "ingest-batch"
    inst = yaml.safe_load((ROOT / "deploy" / "dagster.yaml").read_text())
    limits = inst["run_coordinator"]["config"]["tag_concurrency_limits"]
    assert {lim["value"] for lim in limits if lim["key"] == RUN_KIND} == helm


def test_a_config_error_fails_the_step_once_without_retries():
    calls = []

    @steps.asset("light", retry_policy=dg.RetryPolicy(max_retries=3))
    def misconfigured() -> None:
        calls.append(1)
        raise ConfigError("spec.yaml: filters[0].column 'nope' is not a catalog column")

    @steps.multi_asset_check("light", specs=[dg.AssetCheckSpec("c", asset="misconfigured")])
    def misconfigured_check():
        yield from ()
        raise ConfigError("qc.checks: unknown check 'x'")

    res = dg.materialize([misconfigured], instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)
    kinds = [e.event_type_value for e in res.all_events]
    assert not res.success and calls == [1] and "STEP_UP_FOR_RETRY" not in kinds
    (failure,) = [e for e in res.all_events if e.event_type_value == "STEP_FAILURE"]
    assert "ConfigError: spec.yaml: filters[0].column" in str(failure.event_specific_data.error)

    gen = misconfigured_check.node_def.compute_fn.decorated_fn
    with pytest.raises(dg.Failure, match="unknown check") as info:
        list(gen())
    assert info.value.allow_retries is False
