"""Automatic resume: a training run whose rank is SIGKILLed on the first attempt is retried by
Dagster, resumes from its newest checkpoint and records the recovery cost as metadata."""

import json
import os
import signal
import threading
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from bench.resilience_training import _is_python, children
from robodata.health.recovery import FAILURE_NOTE
from robodata_dagster.assets.partitions import CURATION_SPECS
from robodata_dagster.assets.training import training_run
from robodata_dagster.jobs.training import training_job
from robodata_dagster.resources.catalog import SpecsResource
from robodata_dagster.resources.manifests import ManifestRefIOManager

# the upstream manifest, as training_run sees it when only it is materialized (its ref loads as None)
MANIFEST = dg.AssetSpec("manifest", partitions_def=CURATION_SPECS)

pytestmark = pytest.mark.timeout(240)

ROOT = Path(__file__).resolve().parents[2]


WORK = ("tiny", "s", "own-data")  # the partition's folder under run_dir: <config>/<spec>/<data>


def _materialize(tmp_path: Path, run_dir: Path, instance=None, **kw):
    """training_run partition "s|tiny" (synthetic data) with its run_dir; the training config is
    specs/training/tiny.yaml in tmp_path, the settings are overrides."""
    instance = instance or dg.DagsterInstance.ephemeral()
    (tmp_path / "training").mkdir(exist_ok=True)
    (tmp_path / "training" / "tiny.yaml").write_text("steps: 8\n")
    for kind, key in (("curation_spec", "s"), ("train_config", "tiny")):
        if not instance.has_dynamic_partition(kind, key):
            instance.add_dynamic_partitions(kind, [key])
    return dg.materialize(
        [training_run, MANIFEST],
        run_config=_run_config(run_dir),
        instance=instance,
        resources={
            "specs": SpecsResource(training_dir=str(tmp_path / "training")),
            "manifest_io_manager": ManifestRefIOManager(root=str(tmp_path / "state")),
        },
        partition_key="s|tiny",
        **kw,
    )


def _run_config(run_dir: Path) -> dict:
    overrides = [
        "steps=8",
        "global_batch_size=4",
        "topology.nodes=1",
        "topology.gpus_per_node=2",
        "topology.timeout_s=60",
        "data.episodes=16",
        "data.image_size=16",
        "model.channels=[8]",
        "model.latent_dim=8",
        "model.hidden_dim=16",
        "checkpoint.every_steps=2",
        "checkpoint.keep=10",
    ]
    return {
        "ops": {
            "training_run": {
                "config": {"run_dir": str(run_dir), "overrides": overrides, "use_upstream_manifest": False}
            }
        }
    }


def _launcher() -> int | None:
    for pid in children(os.getpid()):
        try:
            if b"robodata.train.launch" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            pass
    return None


class KillOneRank(threading.Thread):
    """Once the first attempt has finished `at_step` steps, SIGKILL its rank 1 (not the launcher)."""

    def __init__(self, run_dir: Path, at_step: int):
        super().__init__(daemon=True)
        self.run_dir, self.at_step, self.killed_at, self.done = run_dir, at_step, None, threading.Event()

    def run(self) -> None:
        beat = self.run_dir / "heartbeat.json"
        while not self.done.is_set():
            try:
                step = int(json.loads(beat.read_text())["step"])
            except (OSError, ValueError, KeyError):
                step = -1
            launcher = _launcher()
            ranks = [k for k in children(launcher) if _is_python(k)] if launcher else []
            if step >= self.at_step and len(ranks) == 2:
                os.kill(ranks[1], signal.SIGKILL)
                self.killed_at = step
                return
            time.sleep(0.005)


def test_training_job_carries_the_run_retry_tags_and_the_instance_enables_run_retries():
    assert training_job.tags["dagster/max_retries"] == "2"
    assert training_job.tags["dagster/retry_strategy"] == "FROM_FAILURE"
    instance_yaml = yaml.safe_load((ROOT / "deploy" / "dagster.local.yaml").read_text())
    assert instance_yaml["run_retries"]["enabled"] is True
    assert training_run.op.retry_policy is not None and training_run.op.retry_policy.max_retries >= 1


def test_a_killed_rank_is_retried_and_the_retry_resumes_with_recovery_metadata(tmp_path):
    killer = KillOneRank(tmp_path / "run" / Path(*WORK), at_step=3)
    killer.start()
    try:
        res = _materialize(tmp_path, tmp_path / "run")
    finally:
        killer.done.set()
        killer.join(5)
    assert res.success and killer.killed_at is not None
    kinds = [e.event_type_value for e in res.all_events]
    assert kinds.count("STEP_UP_FOR_RETRY") == 1 and kinds.count("STEP_RESTARTED") == 1  # one retry, then success
    md = {k: v.value for k, v in res.asset_materializations_for_node("training_run")[0].metadata.items()}
    assert md["step"] == 8
    assert md["recovery/attempt"] == 1
    resumed = md["recovery/resumed_from_step"]
    assert resumed in (2, 4) and resumed <= killer.killed_at  # newest checkpoint before the kill
    assert md["resumed_from"].endswith(f"step-{resumed:08d}")
    assert 0 <= md["recovery/lost_steps"] <= 2  # at most one checkpoint interval
    assert md["recovery/restart_latency_s"] >= 4  # the RetryPolicy's 5 s delay, at least
    work = tmp_path / "run" / Path(*WORK)
    assert not (work / FAILURE_NOTE).exists()  # consumed by the successful attempt
    assert "died" in (work / "launch.log").read_text() or "exited" in (work / "launch.log").read_text()


def test_a_run_retry_reads_the_parent_run_record_when_the_attempt_left_no_note(tmp_path):
    """A run retry (what the daemon launches after the whole process was killed): tags name the
    parent; the failed attempt left only its heartbeat, its end time is the parent run's record."""
    instance = dg.DagsterInstance.ephemeral()
    parent = _materialize(tmp_path, tmp_path / "other", instance, tags={"robodata/test": "parent"})
    work = tmp_path / "run" / Path(*WORK)
    work.mkdir(parents=True)
    (work / "heartbeat.json").write_text(json.dumps({"step": 5, "time": time.time()}))
    res = _materialize(
        tmp_path,
        tmp_path / "run",
        instance,
        tags={
            "dagster/retry_number": "1",
            "dagster/parent_run_id": parent.run_id,
            "dagster/root_run_id": parent.run_id,
        },
    )
    md = {k: v.value for k, v in res.asset_materializations_for_node("training_run")[0].metadata.items()}
    assert md["recovery/attempt"] == 1 and md["recovery/parent_run_id"] == parent.run_id
    assert md["recovery/lost_steps"] == 5  # no checkpoint in run_dir: all 5 lost
    assert md["recovery/restart_latency_s"] >= 0
