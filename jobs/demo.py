"""The demo job: run on the embedded default instance by `make demo`."""

from __future__ import annotations

import sys

import dagster as dg

demo_job = dg.define_asset_job("demo", selection=dg.AssetSelection.groups("ingest"))


def main(root: str) -> int:
    from definitions import defs

    instance = dg.DagsterInstance.get()
    job = defs.get_job_def("demo")
    cfg = {"ops": {name: {"config": {"root": root}} for name in ("synthetic_landing", "demo_containers")}}
    result = job.execute_in_process(instance=instance, run_config=cfg)
    if not result.success:
        return 1
    for ev in result.get_asset_materialization_events():
        md = ev.materialization.metadata
        print(f"{ev.asset_key.to_user_string()}: " + ", ".join(f"{k}={v.value}" for k, v in md.items()))
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(args[args.index("--root") + 1] if "--root" in args else ".demo"))
