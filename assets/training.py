"""Training as an asset partitioned by (curation spec, training config): partition "<spec>|<config>"
trains specs/training/<config>.yaml on the ManifestRef of manifest partition "<spec>", its typed input
(loaded by the manifest_io_manager through the partition mapping, assets/partitions.py), with the
same launcher as `robodata train`, in a fresh process (robodata.train.launch.train_in_subprocess).

Each partition works in its own folders, `<run_dir>/<config>/<spec>/<manifest hash[:16]>` (and the
same under `checkpoint_root`: a folder or s3://..., so a retry on a fresh pod resumes from S3): a
rerun, or a Dagster retry of a failed run, continues from the newest complete checkpoint of the
same data; a new manifest starts a new run. The materialization names the manifest partition and
the ref trained on (and the run that wrote it), and the checkpoint's lineage (manifest
hash, catalog version, spec hash, layout version, code version, sampler position) and goodput. On a
retried attempt (run retry: `dagster/retry_number` tag; step retry: the RetryPolicy) it also records
the recovery cost (`recovery/*`: lost steps, restart latency).
"""

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg

from robodata.errors import ConfigError
from robodata_dagster.assets.partitions import TRAINING, split_key
from robodata_dagster.lib import steps
from robodata_dagster.lib.lineage import ManifestRef
from robodata_dagster.lib.recovery import recovery_metadata
from robodata_dagster.lib.registry import training_config
from robodata_dagster.resources.catalog import SpecsResource

if TYPE_CHECKING:
    from robodata.train.config import TrainConfig


class TrainingRunConfig(dg.Config):
    run_dir: str = ".demo/train"  # local working dirs (heartbeat, logs, result) per partition; on a pod: scratch
    checkpoint_root: str = ""  # folder or s3://... for the checkpoints; empty: under the run dir
    overrides: list[str] = []  # dotted key=value over the training config, like `robodata train --set`
    use_upstream_manifest: bool = True  # false: the config's own data (e.g. synthetic), no manifest


def _train_config(
    config: TrainingRunConfig, base: dict[str, Any], folder: str, ref: ManifestRef | None
) -> "TrainConfig":
    """The config file, the run's overrides, then the partition's own fields (which nothing overrides)."""
    from robodata.train.config import apply_overrides, config_from_dict

    data = apply_overrides(base, list(config.overrides))
    data["run_dir"] = str(Path(config.run_dir) / folder)
    if config.checkpoint_root:
        data["checkpoint"] = {**data.get("checkpoint", {}), "root": f"{config.checkpoint_root.rstrip('/')}/{folder}"}
    if ref is not None:  # exactly the ref training_run loaded
        data["data"] = {**data.get("data", {}), "kind": "manifest", "manifest": ref.path}
    return config_from_dict(data)


@steps.asset(
    "train",
    group_name="train",
    partitions_def=TRAINING,
    # partition "<spec>|<config>" <- manifest "<spec>" (TRAINING's `spec` dimension), as a typed ManifestRef
    ins={"manifest": dg.AssetIn("manifest", input_manager_key="manifest_io_manager")},
    retry_policy=dg.RetryPolicy(max_retries=2, delay=5),
    kinds={"pytorch"},
    description="World-action model trained with HSDP on its spec's manifest; resumes from checkpoints.",
)
def training_run(
    context: dg.AssetExecutionContext, config: TrainingRunConfig, specs: SpecsResource, manifest: ManifestRef | None
) -> dg.MaterializeResult:
    from robodata.health.recovery import clear_failure, note_failure
    from robodata.train.goodput import Heartbeat
    from robodata.train.launch import train_in_subprocess

    spec, config_name = split_key(context.partition_key)
    base = training_config(specs.dirs(), config_name)
    ref = manifest if config.use_upstream_manifest else None
    if config.use_upstream_manifest and ref is None:
        raise ConfigError(
            f"manifest partition {spec!r} was never materialized; materialize it first "
            f"(`dg launch -m robodata_dagster.definitions --job curation --partition {spec}`)"
        )
    folder = f"{config_name}/{spec}/{ref.content_hash[:16] if ref else 'own-data'}"
    cfg = _train_config(config, base, folder, ref)
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
    if ref is not None and lin.get("manifest_hash") != ref.content_hash:
        raise dg.Failure(
            description=f"trained on manifest {lin.get('manifest_hash')} but manifest[{spec}] is {ref.content_hash}",
            allow_retries=False,
        )
    context.log.info(f"trained to step {result['step']}; checkpoint {result['checkpoint']}")
    upstream = {"manifest_run_id": ref.run_id, "manifest_ref": dg.MetadataValue.json(ref.__dict__)} if ref else {}
    metadata = {
        "checkpoint": dg.MetadataValue.path(result["checkpoint"]),
        "step": result["step"],
        "resumed_from": str(result["resumed_from"]),
        "loss": float(result["loss"]),
        "mesh": str(result["mesh"]),
        "manifest_partition": spec,
        "train_config": config_name,
        **upstream,
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
