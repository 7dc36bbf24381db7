"""Part of bench.dagster_paths: the Dagster-native surface, read from the definitions and the
bench's instance after the user paths ran (`u`: bench.dagster_paths.User)."""

from __future__ import annotations

from typing import Any

RUN_KIND = "robodata/run-kind"


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
