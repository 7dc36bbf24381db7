"""`make demo`: synthetic recordings -> landing zone -> one batch -> the whole ingestion graph,
on the embedded default instance (SQLite under DAGSTER_HOME, local files).

    python -m robodata_dagster.demo --root .demo [--episodes 6] [--duration 10]

then register the named specs (specs/curation, specs/training), curate the catalog into the manifest
partition "demo", evaluate site acceptance and train the "demo" config on it (partition "demo|demo").
Prints a short summary (where the containers, the catalog, the manifest and the checkpoint are);
Dagster's own logs go, at INFO, to <root>/dagster.log.
"""

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg

SPEC, TRAIN_CONFIG = "demo", "demo"  # specs/curation/demo.yaml, specs/training/demo.yaml


def prepare_landing(landing: Path, episodes: int, duration_s: float) -> None:
    """Legacy JPEG folders (most), one MCAP recording, one small LeRobot v3.0 dataset."""
    from robodata.ingest.synth import SynthConfig, synthesize
    from robodata.ingest.synth.lerobot import write_lerobot

    n_mcap = 1 if episodes > 1 else 0
    synthesize(SynthConfig(episodes=episodes - n_mcap, duration_s=duration_s), landing)
    if n_mcap:
        synthesize(SynthConfig(episodes=1, duration_s=duration_s, format="mcap", site="site-b", seed=11), landing)
    write_lerobot(landing / "lerobot-demo", "v3.0", episodes=2, frames_per_episode=30, height=96, width=128)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=".demo")
    ap.add_argument("--episodes", type=int, default=6)
    ap.add_argument("--duration", type=float, default=10.0)
    args = ap.parse_args(argv)
    from robodata.storage import StateRoot
    from robodata_dagster.definitions import job
    from robodata_dagster.jobs.ingest import profile_config
    from robodata_dagster.lib.batches import add_batch

    root = Path(args.root).resolve()
    state = StateRoot(root)
    landing = Path(state.landing)
    t0 = time.perf_counter()
    if not landing.exists():
        prepare_landing(landing, args.episodes, args.duration)
    print(f"landing zone ready: {landing} ({time.perf_counter() - t0:.1f} s)")
    instance = dg.DagsterInstance.get()
    added = add_batch(instance, str(root), str(landing))
    if added is None:
        print("no new landing items since the last demo run (delete the root to start over)")
        return 0
    batch = added[0]
    print(f"Dagster's logs: {root / LOG}")
    cfg = {**profile_config("bulk", root=str(root)), **LOGGERS}
    res = execute(root, job("full"), instance=instance, partition_key=batch, run_config=cfg)
    print(f"batch {batch} ({added[1]} landing items): run {res.run_id} {'succeeded' if res.success else 'FAILED'}")
    _show(res)
    failed = [c for c in res.get_asset_check_evaluations() if not c.passed]
    for check in failed:
        print(f"  check {check.check_name} failed ({check.severity.value}): {check.description or ''}")
    containers = Path(state.containers) / batch
    print(f"containers: {containers} ({len(list(containers.rglob('*.rdep')))} files)")
    print(f"catalog: {state.catalog} ({time.perf_counter() - t0:.1f} s)")
    ok = res.success and run_downstream(instance, root)
    print(f"demo finished in {time.perf_counter() - t0:.1f} s")
    return 0 if ok else 1


LOG = "dagster.log"
# Dagster's console logger at INFO (its default is DEBUG: ~250 lines a demo), written to <root>/dagster.log
LOGGERS: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}


def execute(root: Path, target: Any, **kwargs: Any) -> dg.ExecuteInProcessResult:
    """A run in this process, with Dagster's console log (stderr) appended to <root>/dagster.log."""
    with open(root / LOG, "a") as log, contextlib.redirect_stderr(log):
        return target.execute_in_process(raise_on_error=False, **kwargs)


SHOW = {
    "manifest": ("path", "episodes", "hours", "catalog_version", "content_hash"),
    "site_acceptance": ("table", "episodes_evaluated", "shifts_updated", "shifts_below_target"),
    "training_run": ("checkpoint", "step", "loss", "mesh", "manifest_partition", "manifest_hash", "goodput_fraction"),
}


def _show(res: dg.ExecuteInProcessResult) -> None:
    for ev in res.get_asset_materialization_events():
        key = ev.asset_key.to_user_string() if ev.asset_key else "?"
        md = ev.materialization.metadata
        keys = SHOW.get(key)
        if keys is None:  # the ingestion steps: their facts are in the UI and the Delta tables
            continue
        print(f"  {key}: " + ", ".join(f"{k}={md[k].value}" for k in keys if k in md))


def run_downstream(instance: dg.DagsterInstance, root: Path) -> bool:
    """Register the named specs, curate the catalog into the demo spec's manifest, evaluate site
    acceptance, and train the demo config on that manifest (the rest of the asset graph)."""
    from robodata_dagster.assets.partitions import training_key
    from robodata_dagster.definitions import job, loaded
    from robodata_dagster.lib.registry import SpecDirs, register

    register(instance, SpecDirs())
    assets = loaded().resolve_implicit_global_asset_job_def()
    refs = {"manifest_io_manager": {"config": {"root": str(root)}}}
    catalog: dict[str, Any] = {"resources": {"catalog": {"config": {"root": str(root)}}, **refs}, **LOGGERS}
    runs: list[tuple[str, Any, dict[str, Any]]] = [
        (
            "manifest",
            assets,
            {"partition_key": SPEC, "asset_selection": [dg.AssetKey("manifest")], "run_config": catalog},
        ),
        (
            "site_acceptance",
            assets,
            {"asset_selection": [dg.AssetKey("site_acceptance")], "run_config": catalog},
        ),
        (
            "training",
            job("training"),
            {
                "partition_key": training_key(SPEC, TRAIN_CONFIG),
                "run_config": {
                    **LOGGERS,
                    "resources": refs,
                    "ops": {"training_run": {"config": {"run_dir": str(root / "train")}}},
                },
            },
        ),
    ]
    for name, target, kwargs in runs:
        res = execute(root, target, instance=instance, **kwargs)
        print(f"{name}: run {res.run_id} {'succeeded' if res.success else 'FAILED'}")
        _show(res)
        if not res.success:
            return False
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
