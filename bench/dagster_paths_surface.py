"""Part of bench.dagster_paths: the Dagster-native surface, read from the definitions and the
bench's instance after the user paths ran (`u`: bench.dagster_paths.User)."""

from __future__ import annotations

import json
import sys
from typing import Any

RUN_KIND = "robodata/run-kind"
TINY_TRAIN = [
    "steps=2",
    "global_batch_size=2",
    "topology.nodes=1",
    "topology.gpus_per_node=2",
    "model.channels=[8]",
    "model.latent_dim=8",
    "model.hidden_dim=16",
    "data.image_size=16",
    "data.stride_s=0.25",
]


def input_typed(u: Any, lin: dict[str, Any]) -> bool:
    """training_run's `manifest` input is a ManifestRef, and the ref its newest materialization
    recorded is the manifest materialization the lineage resolved."""
    import dagster as dg

    from robodata_dagster.assets.training import training_run

    typed = "ManifestRef" in training_run.op.ins["manifest"].dagster_type.display_name
    with u.instance() as instance:
        rec = instance.fetch_materializations(dg.AssetKey("training_run"), limit=1).records[0]
        md = rec.asset_materialization.metadata
    ref = md["manifest_ref"].value if "manifest_ref" in md else {}
    return typed and ref.get("content_hash") == lin["manifest_hash"] and ref.get("run_id") == lin["manifest_run_id"]


def cli_run_kinds(u: Any) -> bool:
    """Every run of the CLI path (full, curation, training jobs) carries its job's run kind."""
    want = {"full": "ingest-batch", "curation": "curation", "training": "train"}
    with u.instance() as instance:
        runs = [r for r in instance.get_runs() if r.job_name in want and "dagster/sensor_name" not in r.tags]
    kinds_ok = all(r.tags.get(RUN_KIND) == want[r.job_name] for r in runs)
    return kinds_ok and {r.job_name for r in runs} == set(want)


def vocabulary(u: Any) -> dict[str, Any]:
    """Kinds on every asset; schema and row count on the latest materialization of each delta asset."""
    from robodata_dagster.definitions import loaded

    graph = loaded().resolve_asset_graph()
    nodes = [graph.get(k) for k in graph.get_all_asset_keys()]
    delta = [n.key for n in nodes if "delta" in n.kinds]
    checked, missing = 0, []
    with u.instance() as instance:
        latest = instance.get_latest_materialization_events(delta)
        for key, ev in latest.items():
            if ev is None or ev.asset_materialization is None:
                continue
            checked += 1
            md = ev.asset_materialization.metadata
            if "dagster/column_schema" not in md or "dagster/row_count" not in md:
                missing.append(key.to_user_string())
    return {
        "assets_without_kinds": sum(1 for n in nodes if not n.kinds),
        "delta_assets_without_schema": len(missing),
        "delta_assets_checked": checked,
        "delta_assets_missing_schema": missing,
    }


def lineage(u: Any) -> dict[str, Any]:
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    from robodata.catalog.schema import MANIFEST_META_CATALOG_VERSION
    from robodata.train.lineage import read_checkpoint_meta

    specs = u.run("robodata-dagster", "specs")
    curate = u.launch_job("curation", "demo")
    cfg = {"ops": {"training_run": {"config": {"run_dir": str(u.tmp / "train"), "overrides": TINY_TRAIN}}}}
    train = u.launch_job("training", "demo|demo", cfg)
    out = u.run("robodata-dagster", "lineage")
    ok = all(p.returncode == 0 for p in (specs, curate, train, out))
    if not ok:
        return {"lineage_resolves": False, "lineage_errors": (curate.stderr + train.stderr + out.stderr)[-2000:]}
    lin = json.loads(out.stdout)
    meta = read_checkpoint_meta(lin["checkpoint"])  # the checkpoint's own record, for comparison
    manifest = pq.read_schema(lin["manifest_path"]).metadata
    version = lin["catalog_version"]
    catalog = str(u.state / "catalog" / "episodes")
    listed = u.run("robodata", "lineage", lin["checkpoint"], "--episodes")
    episodes = len(listed.stdout.strip().splitlines()) - 1
    train_rows = pq.read_table(lin["manifest_path"], columns=["split"]).column("split").to_pylist().count("train")
    resolves = (
        lin["consistent"]
        and lin["manifest_partition"] == "demo"
        and version == meta["lineage"]["catalog_version"] == int(manifest[MANIFEST_META_CATALOG_VERSION])
        and DeltaTable(catalog, version=version).version() == version  # that catalog version exists
        and lin["manifest_hash"] == meta["lineage"]["manifest_hash"]
        and episodes == train_rows > 0
    )
    return {
        "lineage_resolves": resolves,
        "lineage_catalog_version": version,
        "lineage_episodes": episodes,
        "training_input_typed": input_typed(u, lin),
    }


def load_warnings(u: Any) -> int:
    """Python warnings while the code location is imported and its definitions built."""
    code = (
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    from robodata_dagster.definitions import loaded\n"
        "    d = loaded()\n"
        "    d.resolve_asset_graph(), d.resolve_all_job_defs()\n"
        "print(len(w))\n"
    )
    out = u.run(sys.executable, "-c", code)
    return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else -1
