"""Workload-aware layout: the advised plan for a read pattern, and catalog partitions re-laid into it.

Core logic lives in robodata.layout; these assets only pass config and report a handful of
facts per plan / per partition (never per episode).
"""

import dagster as dg

from robodata_dagster.assets.partitions import RELAYOUT_DAY
from robodata_dagster.lib import steps
from robodata_dagster.lib.settings import to_settings


class LayoutPlanConfig(dg.Config):
    pattern: str = "wam"  # preset name or a ReadPattern YAML/JSON file
    # several patterns over one copy, each PATTERN[:WEIGHT] (replaces `pattern` when given)
    patterns: list[str] = []
    episodes: list[str] = []  # sample containers (paths, dirs, globs, URLs) ...
    catalog_uri: str = ""  # ... or a random sample of this catalog
    sample: int = 4
    advisor_yaml: str = ""  # AdvisorConfig YAML (defaults if empty)
    plan_path: str = ".robodata/layout/plan.json"


class RelayoutRunConfig(dg.Config):
    """robodata.layout.relayout.RelayoutConfig (storage options: from the AWS_* variables)."""

    catalog_uri: str
    plan_path: str = ".robodata/layout/plan.json"
    max_episodes: int = 0  # 0: the whole partition
    merge_every: int = 500
    min_psnr_db: float = 30.0


@steps.asset(
    "encode",
    group_name="layout",
    kinds={"python", "json"},
    description="The layout (GOP, CRF, chunk spans, groups, page size) advised for a read pattern.",
)
def layout_plan(context: dg.AssetExecutionContext, config: LayoutPlanConfig) -> dg.MaterializeResult:
    from robodata.config import load_yaml
    from robodata.container import EpisodeReader
    from robodata.layout.advisor import advise
    from robodata.layout.config import AdvisorConfig
    from robodata.layout.inputs import expand_episodes, resolve_pattern, sample_catalog, weighted_spec
    from robodata.storage import StorageLocation

    cfg = load_yaml(AdvisorConfig, config.advisor_yaml) if config.advisor_yaml else AdvisorConfig()
    # catalog, sample containers and the plan may be on S3 (options from the AWS_* variables)
    if config.catalog_uri:
        delta = StorageLocation.from_env(config.catalog_uri).delta_options()
        uris = sample_catalog(config.catalog_uri, config.sample, cfg.seed, storage_options=delta)
    else:
        uris = expand_episodes(config.episodes)
    opts = StorageLocation.from_env(uris[0]).fsspec_options()
    first = EpisodeReader.open(uris[0], **opts)
    specs = [weighted_spec(p) for p in config.patterns] or [(config.pattern, 1.0)]
    mix = [(resolve_pattern(spec, first.meta), weight) for spec, weight in specs]
    first.close()
    plan = advise(mix, uris, cfg, log=context.log.info, **opts)
    plan_path = StorageLocation.from_env(config.plan_path)
    plan.save(plan_path.root, plan_path.fsspec_options())
    return dg.MaterializeResult(
        metadata={
            "plan_path": plan_path.root,
            "pattern": plan.pattern.get("name", ""),
            "patterns": dg.MetadataValue.json(plan.patterns),
            "chosen": plan.chosen,
            "layout_version": plan.version,
            "page_size": plan.page_size,
            "sample_episodes": len(uris),
            "alternatives": dg.MetadataValue.json(plan.alternatives),
        }
    )


@steps.asset(
    "encode",
    group_name="layout",
    deps=["layout_plan"],
    partitions_def=RELAYOUT_DAY,
    kinds={"video", "python"},
    description="One catalog day re-laid into the plan's layout: verified new versions, pointers flipped.",
)
def relaid_containers(context: dg.AssetExecutionContext, config: RelayoutRunConfig) -> dg.MaterializeResult:
    from robodata.layout.relayout import RelayoutConfig, relayout_partition

    cfg = to_settings(RelayoutConfig, config)
    report = relayout_partition(context.partition_key, cfg, log=context.log.warning)
    md = report.as_dict()
    md["errors"] = dg.MetadataValue.json(md["errors"])
    return dg.MaterializeResult(metadata=md)
