"""Declarative automation: the sensors that evaluate the assets' automation conditions.

`manifest` (every spec partition) and `site_acceptance` carry CATALOG_CHANGED (assets/curation.py):
when a batch lands in the catalog, the daemon's next tick of `catalog_automation_sensor` requests
them, with no manual step. `training_run` has no condition by default (training is launched by
hand, `dagster job launch -j training`); with ROBODATA_TRAIN_EAGER=1 in the code location's
environment it is eager (definitions.py) and `training_automation_sensor` launches it, tagged like
the `training` job (run queue key, run retries).
"""

import dagster as dg

from robodata_dagster.jobs.curation import CURATION_RUN_TAGS
from robodata_dagster.jobs.training import TRAINING_TAGS

catalog_automation_sensor = dg.AutomationConditionSensorDefinition(
    "catalog_automation_sensor",
    target=dg.AssetSelection.assets("manifest", "site_acceptance"),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    run_tags=CURATION_RUN_TAGS,
    description="Refreshes manifest (per spec) and site_acceptance when the catalog changes.",
)

training_automation_sensor = dg.AutomationConditionSensorDefinition(
    "training_automation_sensor",
    target=dg.AssetSelection.assets("training_run"),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
    run_tags=TRAINING_TAGS,
    description="Launches training_run partitions whose manifest changed, when training is eager (by config).",
)
