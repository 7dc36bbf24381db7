"""Re-lay catalog partitions (days) into the advised layout with the `relayout` job.

    python -m robodata_dagster.relayout --catalog CATALOG_URI --plan PLAN.json [--day YYYY-MM-DD ...]

Without --day, every day of the catalog is registered as a partition and re-laid in turn.
Each partition run re-encodes its episodes, verifies every new object and flips the
catalog's pointers in one merge; re-running a day is a no-op for finished episodes.
"""

from __future__ import annotations

import sys

import dagster as dg

from robodata_dagster.assets.partitions import DAY


def catalog_days(catalog_uri: str) -> list[str]:
    from deltalake import DeltaTable

    return sorted({p["day"] for p in DeltaTable(catalog_uri).partitions()})


def main(argv: list[str]) -> int:
    from robodata_dagster.definitions import job

    def opt(name: str, many: bool = False):
        vals = [argv[i + 1] for i, a in enumerate(argv[:-1]) if a == name]
        return vals if many else (vals[0] if vals else None)

    catalog, plan = opt("--catalog"), opt("--plan")
    if not catalog or not plan:
        print(__doc__, file=sys.stderr)
        return 2
    days = opt("--day", many=True) or catalog_days(catalog)
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions(DAY, days)
    relayout = job("relayout")
    ok = True
    for day in days:
        cfg = {"ops": {"relaid_containers": {"config": {"catalog_uri": catalog, "plan_path": plan}}}}
        res = relayout.execute_in_process(instance=instance, run_config=cfg, partition_key=day)
        ok &= res.success
        for ev in res.get_asset_materialization_events():
            md = ev.materialization.metadata
            print(f"{day}: " + ", ".join(f"{k}={v.value}" for k, v in md.items() if k != "errors"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
