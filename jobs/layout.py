"""The `relayout` run profile: re-lay catalog partitions (days) into the advised layout
(`python -m robodata_dagster.relayout` registers the days and runs them)."""

import dagster as dg

relayout_job = dg.define_asset_job(
    "relayout",
    selection=dg.AssetSelection.assets("relaid_containers"),  # partitioned by relayout_day
    tags={"robodata/profile": "relayout", "robodata/run-kind": "relayout"},
    description="Re-encode / re-chunk one catalog day into the advised layout, then flip its pointers.",
)
