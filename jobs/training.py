"""The `training` job: materializes `training_run` partitions, with automatic resume.

A failed attempt is retried twice: inside the run by the asset's RetryPolicy, and as a whole
run by the instance's run retries (`run_retries` in dagster.yaml; this job's
`dagster/max_retries` tag sets the count, FROM_FAILURE re-executes only what failed). Every
retry resumes from the newest complete checkpoint and records its recovery cost (`recovery/*`).
"""

import dagster as dg

# robodata/run-kind: the Helm run queue caps concurrent training runs on it (deploy/helm/values.yaml).
TRAINING_TAGS = {
    "dagster/max_retries": "2",
    "dagster/retry_strategy": "FROM_FAILURE",
    "robodata/profile": "training",
    "robodata/run-kind": "train",
}

training_job = dg.define_asset_job(
    "training",
    selection=dg.AssetSelection.assets("training_run"),
    tags=TRAINING_TAGS,
    description="Train a config on its spec's manifest (partition <spec>|<config>); retried runs resume.",
)
