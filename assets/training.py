"""Training as an asset downstream of the curated manifest: runs the same launcher as
`robodata train`, in a fresh process (robodata.train.launch.train_in_subprocess).

A rerun, or a Dagster retry of a failed run, continues from the newest complete checkpoint
in run_dir. The materialization records the checkpoint and its lineage (manifest hash,
catalog version, spec hash, layout version, code version, sampler position) and goodput.
"""
import json

import dagster as dg

from robodata.errors import ConfigError
from robodata.train.commands import apply_overrides, load_with_overrides
from robodata.train.config import config_from_dict
from robodata.train.launch import train_in_subprocess

MANIFEST_KEYS = ("manifest_path", "manifest", "path")


class TrainingRunConfig(dg.Config):
    config_path: str = ""            # training YAML; empty: built-in defaults with run_dir below
    run_dir: str = ".demo/train"
    overrides: list[str] = []        # dotted key=value, like `robodata train --set`
    use_upstream_manifest: bool = True   # train on the latest materialized `manifest`


def upstream_manifest(context: dg.AssetExecutionContext) -> str:
    event = context.instance.get_latest_materialization_event(dg.AssetKey("manifest"))
    if event is None or event.asset_materialization is None:
        raise ConfigError("training_run: asset `manifest` was never materialized; materialize it first or set "
                          "use_upstream_manifest: false")
    md = event.asset_materialization.metadata
    for key in MANIFEST_KEYS:
        if key in md:
            value = md[key]
            return str(getattr(value, "path", None) or getattr(value, "value", value))
    raise ConfigError(f"training_run: the manifest materialization has none of {MANIFEST_KEYS} in its metadata")


@dg.asset(group_name="train", deps=["manifest"], retry_policy=dg.RetryPolicy(max_retries=2, delay=5),
          description="World-action model trained with HSDP on the curated manifest; resumes from checkpoints.")
def training_run(context: dg.AssetExecutionContext, config: TrainingRunConfig) -> dg.MaterializeResult:
    overrides = list(config.overrides)
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
    result = train_in_subprocess(cfg)
    if not result["complete"]:  # stopped early (SIGTERM / preemption): fail so a retry resumes
        raise dg.Failure(description=f"training stopped at step {result['step']} of {result['steps']}; "
                                     f"checkpoint {result['checkpoint']} (a retry resumes from it)")
    lin, gp = result["lineage"], result["goodput"]
    context.log.info(f"trained to step {result['step']}; checkpoint {result['checkpoint']}")
    metadata = {
        "checkpoint": dg.MetadataValue.path(result["checkpoint"]),
        "step": result["step"],
        "resumed_from": str(result["resumed_from"]),
        "loss": float(result["loss"]),
        "mesh": str(result["mesh"]),
        **{k: (json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v)
           for k, v in lin.items() if v is not None},
        "sampler_position": dg.MetadataValue.json(lin["sampler_position"]),
        "goodput": dg.MetadataValue.json(gp),
        "goodput_fraction": gp["goodput"],
        "data_wait_fraction": gp["data_wait_fraction"],
        "restart_lost_s": gp["restart_lost_s"],
        "optimizer_bytes_per_rank": result["optimizer_local_bytes_max"],
    }
    version = f"{lin.get('manifest_hash')}:{lin['code_version']}:{lin['config_hash']}:{result['step']}"
    return dg.MaterializeResult(metadata=metadata, data_version=dg.DataVersion(version))
