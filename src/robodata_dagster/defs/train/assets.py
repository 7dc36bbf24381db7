"""Training as an asset downstream of the curated manifest: runs the same launcher as
`robodata train`, in a fresh process (robodata.train.launch.train_in_subprocess).

A rerun, or a Dagster retry of a failed run, continues from the newest complete checkpoint
in the checkpoint root (run_dir/checkpoints, or `checkpoint_root`: a folder or s3://..., so a
retry on a fresh pod resumes from S3). The manifest may be an s3:// object too. The
materialization records the checkpoint and its lineage (manifest hash,
catalog version, spec hash, layout version, code version, sampler position) and goodput.
On a retried attempt (run retry: `dagster/retry_number` tag; step retry: the RetryPolicy)
it also records the recovery cost (`recovery/*`: lost steps, restart latency).
"""

import json
import time
from pathlib import Path

import dagster as dg

from robodata.errors import ConfigError, RobodataError
from robodata.health.recovery import (
    PARENT_RUN_ID_TAG,
    RETRY_NUMBER_TAG,
    clear_failure,
    note_failure,
    read_failure,
    recovery_cost,
)
from robodata.train.config import apply_overrides, config_from_dict, load_with_overrides
from robodata.train.goodput import Heartbeat
from robodata.train.launch import train_in_subprocess
from robodata_dagster.lib import steps

MANIFEST_KEYS = ("manifest_path", "manifest", "path")


class TrainingRunConfig(dg.Config):
    config_path: str = ""  # training YAML; empty: built-in defaults with run_dir below
    run_dir: str = ".demo/train"  # local working dir (heartbeat, logs, result); on a pod: scratch
    checkpoint_root: str = ""  # folder or s3://... for the checkpoints; empty: <run_dir>/checkpoints
    overrides: list[str] = []  # dotted key=value, like `robodata train --set`
    use_upstream_manifest: bool = True  # train on the latest materialized `manifest`


def upstream_manifest(context: dg.AssetExecutionContext) -> str:
    event = context.instance.get_latest_materialization_event(dg.AssetKey("manifest"))
    if event is None or event.asset_materialization is None:
        raise ConfigError(
            "training_run: asset `manifest` was never materialized; materialize it first or set "
            "use_upstream_manifest: false"
        )
    md = event.asset_materialization.metadata
    for key in MANIFEST_KEYS:
        if key in md:
            value = md[key]
            return str(getattr(value, "path", None) or getattr(value, "value", value))
    raise ConfigError(f"training_run: the manifest materialization has none of {MANIFEST_KEYS} in its metadata")


def recovery_metadata(
    context: dg.AssetExecutionContext,
    run_dir: Path,
    started_at: float,
    beat_before: int | None,
    resumed_from: str | None,
) -> dict:
    """`recovery/*` metadata of this attempt: the failed attempt's last step and end time come from
    its failure note in run_dir (step retry, or a run retry whose process lived to write it), else
    from the heartbeat and the parent run's record (a run retry after the process was killed)."""
    tags = dict(context.run.tags)
    attempt = int(tags.get(RETRY_NUMBER_TAG, "0") or 0) + context.retry_number
    tags[RETRY_NUMBER_TAG] = str(attempt)
    note = read_failure(run_dir)
    last_step, ended_at = (note.last_step, note.ended_at) if note else (beat_before, None)
    if ended_at is None and tags.get(PARENT_RUN_ID_TAG):
        record = context.instance.get_run_record_by_id(tags[PARENT_RUN_ID_TAG])
        ended_at = record.end_time if record is not None else None
    resumed_step = int(Path(resumed_from).name.split("-")[1]) if resumed_from else None
    try:
        cost = recovery_cost(
            tags,
            start_time=started_at,
            parent_end_time=ended_at,
            last_step_before_failure=last_step if attempt else None,
            resumed_from_step=resumed_step,
        )
    except RobodataError as exc:  # bookkeeping only: never fail a finished training run over it
        context.log.warning(f"recovery cost not recorded: {exc}")
        return {"recovery/attempt": attempt, "recovery/error": str(exc)}
    if cost.is_retry:
        context.log.info(
            f"attempt {attempt} resumed from step {resumed_step}: {cost.lost_steps} steps lost, "
            f"restart latency {cost.restart_latency_s}s"
        )
    return cost.as_metadata()


@steps.asset(
    "train",
    group_name="train",
    deps=["manifest"],
    retry_policy=dg.RetryPolicy(max_retries=2, delay=5),
    description="World-action model trained with HSDP on the curated manifest; resumes from checkpoints.",
)
def training_run(context: dg.AssetExecutionContext, config: TrainingRunConfig) -> dg.MaterializeResult:
    overrides = list(config.overrides)
    if config.checkpoint_root:
        overrides.append(f"checkpoint.root={config.checkpoint_root}")
    if config.use_upstream_manifest:
        try:
            overrides += ["data.kind=manifest", f"data.manifest={upstream_manifest(context)}"]
        except ConfigError as exc:
            raise dg.Failure(description=str(exc), allow_retries=False) from exc
    try:
        if config.config_path:
            cfg = load_with_overrides(config.config_path, overrides)
        else:
            cfg = config_from_dict(apply_overrides({"run_dir": config.run_dir}, overrides))
    except ConfigError as exc:  # a bad config does not get better on retry
        raise dg.Failure(description=str(exc), allow_retries=False) from exc
    started_at, beat_before = time.time(), Heartbeat(Path(cfg.run_dir)).last_step()
    try:
        result = train_in_subprocess(cfg)
    except Exception as exc:  # killed rank, OOM, ...: note what was reached, the retry resumes from a checkpoint
        note_failure(cfg.run_dir, Heartbeat(Path(cfg.run_dir)).last_step(), str(exc))
        raise
    if not result["complete"]:  # stopped early (SIGTERM / preemption): fail so a retry resumes
        note_failure(cfg.run_dir, result["step"], "stopped early")
        raise dg.Failure(
            description=f"training stopped at step {result['step']} of {result['steps']}; "
            f"checkpoint {result['checkpoint']} (a retry resumes from it)"
        )
    lin, gp = result["lineage"], result["goodput"]
    context.log.info(f"trained to step {result['step']}; checkpoint {result['checkpoint']}")
    metadata = {
        "checkpoint": dg.MetadataValue.path(result["checkpoint"]),
        "step": result["step"],
        "resumed_from": str(result["resumed_from"]),
        "loss": float(result["loss"]),
        "mesh": str(result["mesh"]),
        **{
            k: (json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v)
            for k, v in lin.items()
            if v is not None
        },
        "sampler_position": dg.MetadataValue.json(lin["sampler_position"]),
        "goodput": dg.MetadataValue.json(gp),
        "goodput_fraction": gp["goodput"],
        "data_wait_fraction": gp["data_wait_fraction"],
        "restart_lost_s": gp["restart_lost_s"],
        "optimizer_bytes_per_rank": result["optimizer_local_bytes_max"],
        **recovery_metadata(context, Path(cfg.run_dir), started_at, beat_before, result["resumed_from"]),
    }
    clear_failure(cfg.run_dir)
    version = f"{lin.get('manifest_hash')}:{lin['code_version']}:{lin['config_hash']}:{result['step']}"
    return dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(version))
