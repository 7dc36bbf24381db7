"""`make demo`: synthetic recordings -> landing zone -> one batch -> the whole ingestion graph,
on the embedded default instance (SQLite under DAGSTER_HOME, local files).

    python -m robodata_dagster.demo --root .demo [--episodes 6] [--duration 10]

then curate the catalog into a manifest, evaluate site acceptance and train briefly on it.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import dagster as dg

# The demo's training run: 2 simulated nodes x 2 ranks (HSDP on gloo), a few steps.
DEMO_TRAIN = [
    "steps=8",
    "global_batch_size=4",
    "checkpoint.every_steps=4",
    "log_every=4",
    "topology.nodes=2",
    "topology.gpus_per_node=2",
]


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
    from robodata.ingest.landing.launches import BatchPolicy, LaunchState, tick
    from robodata.ingest.landing.stagger import StaggerPolicy
    from robodata.ingest.tables import IngestPaths
    from robodata_dagster.definitions import loaded
    from robodata_dagster.defs.ingest.jobs import profile_config

    root = Path(args.root).resolve()
    landing = root / "landing"
    t0 = time.perf_counter()
    if not landing.exists():
        prepare_landing(landing, args.episodes, args.duration)
    print(f"landing zone ready: {landing} ({time.perf_counter() - t0:.1f} s)")
    state_file = root / "ingest" / "sensor_cursor.json"
    state = LaunchState()
    if state_file.exists():
        state.load_state_dict(json.loads(state_file.read_text()))
    t = tick(state, str(landing), IngestPaths(str(root)), BatchPolicy(settle_s=0.0), StaggerPolicy(run_s=0.0))
    state_file.parent.mkdir(parents=True, exist_ok=True)
    state_file.write_text(json.dumps(state.state_dict()))
    if not t.new_batches:
        print("no new landing items since the last demo run (delete the root to start over)")
        return 0
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions("ingest_batch", t.new_batches)
    defs = loaded()
    job = defs.resolve_job_def("full")
    ok = True
    for batch in t.new_batches:
        res = job.execute_in_process(
            instance=instance,
            partition_key=batch,
            raise_on_error=False,
            run_config=profile_config("bulk", root=str(root)),
        )
        ok &= res.success
        print(f"batch {batch}: run {res.run_id} {'succeeded' if res.success else 'FAILED'}")
        for ev in res.get_asset_materialization_events():
            md = ev.materialization.metadata
            print(f"  {ev.asset_key.to_user_string()}: " + ", ".join(f"{k}={v.value}" for k, v in md.items()))
        for ev in res.get_asset_check_evaluations():
            print(
                f"  check {ev.asset_key.to_user_string()}:{ev.check_name} passed={ev.passed} "
                + ", ".join(f"{k}={v.value}" for k, v in ev.metadata.items())
            )
    print(f"catalog: {IngestPaths(str(root)).catalog} ({time.perf_counter() - t0:.1f} s)")
    if ok:
        ok = run_downstream(defs, instance, root)
    print(f"demo finished in {time.perf_counter() - t0:.1f} s")
    return 0 if ok else 1


def run_downstream(defs, instance: dg.DagsterInstance, root: Path) -> bool:
    """Curate the fresh catalog into a manifest and train on it (the rest of the asset graph)."""
    cfg = {"ops": {"training_run": {"config": {"run_dir": str(root / "train"), "overrides": DEMO_TRAIN}}}}
    res = defs.resolve_job_def("curate_and_train").execute_in_process(
        instance=instance, run_config=cfg, raise_on_error=False
    )
    print(f"curate_and_train: run {res.run_id} {'succeeded' if res.success else 'FAILED'}")
    show = {
        "manifest": ("path", "episodes", "hours", "catalog_version", "content_hash"),
        "site_acceptance": ("table", "episodes_evaluated", "shifts_updated", "shifts_below_target"),
        "training_run": ("checkpoint", "step", "loss", "mesh", "manifest_hash", "goodput_fraction"),
    }
    for ev in res.get_asset_materialization_events():
        key = ev.asset_key.to_user_string()
        md = ev.materialization.metadata
        print(f"  {key}: " + ", ".join(f"{k}={md[k].value}" for k in show.get(key, ()) if k in md))
    return res.success


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
