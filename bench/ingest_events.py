"""bench.ingest section `events`: Dagster event-log rows of one `full` run over a batch of tiny
episodes, per episode, at two batch sizes (it must not grow with the batch), and the same batch
again as the sensor launches it (the `bulk` profile through execute_job)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any


def events(tmp: Path, sizes: tuple[int, ...]) -> dict:
    import dagster as dg

    from robodata.ingest.landing.batch import write_manifest
    from robodata.ingest.landing.scan import LandingCursor, new_items
    from robodata.ingest.synth import SynthConfig, synthesize
    from robodata.ingest.tables import IngestPaths
    from robodata_dagster.definitions import bulk_job, loaded

    out: dict[int, dict[str, Any]] = {}
    (tmp / "dh").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp / "dh")) as instance:
        for n in sizes:
            land = tmp / f"ev{n}"
            synthesize(
                SynthConfig(
                    episodes=n, duration_s=1.0, cameras=("cam",), height=16, width=16, fps=4.0, state_hz=10.0, seed=n
                ),
                land,
            )
            name = f"ev-{n}"
            write_manifest(IngestPaths(str(tmp / "state")), name, new_items(str(land), LandingCursor()))
            instance.add_dynamic_partitions("ingest_batch", [name])
            t0 = time.perf_counter()
            res = (
                loaded()
                .resolve_job_def("full")
                .execute_in_process(
                    instance=instance,
                    partition_key=name,
                    raise_on_error=False,
                    run_config={
                        "resources": {
                            "ingest": {"config": {"root": str(tmp / "state"), "workers": 2, "visual_frames": 2}}
                        }
                    },
                )
            )
            rows = len(instance.all_logs(res.run_id))
            conv = [
                e.materialization.metadata["converted"].value
                for e in res.get_asset_materialization_events()
                if e.asset_key is not None and e.asset_key.to_user_string() == "episodes"
            ]
            out[n] = {
                "rows": rows,
                "success": res.success,
                "wall_s": round(time.perf_counter() - t0, 1),
                "converted": conv[0] if conv else 0,
            }
        big = max(sizes)
        # The same batch again as the sensor launches it: the `bulk` profile through execute_job.
        from robodata_dagster.jobs.ingest import profile_config

        t0 = time.perf_counter()
        with dg.execute_job(
            dg.reconstructable(bulk_job),
            instance,
            tags={"dagster/partition": f"ev-{big}"},
            run_config=profile_config("bulk", root=str(tmp / "state"), workers=2),
        ) as r:
            mp_rows, mp_ok = len(instance.all_logs(r.run_id)), r.success
        mp_wall = round(time.perf_counter() - t0, 1)
    return {
        "events_per_episode": round(max(out[big]["rows"], mp_rows) / big, 4),
        "event_rows_per_run": {str(k): v["rows"] for k, v in out.items()},
        "event_rows_per_run_bulk": mp_rows,
        "events_runs_succeeded": all(v["success"] for v in out.values()) and mp_ok,
        "events_batch_converted": {str(k): v["converted"] for k, v in out.items()},
        "events_run_wall_s": {**{str(k): v["wall_s"] for k, v in out.items()}, f"{big}_bulk": mp_wall},
    }
