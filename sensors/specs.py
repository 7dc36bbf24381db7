"""spec_registry_sensor: a new file in specs/curation/ or specs/training/ becomes a partition of
`manifest` / `training_run` (lib/registry.py; `robodata-dagster specs` does the same once)."""

import dagster as dg

from robodata_dagster.lib.registry import CURATION_SPEC, TRAIN_CONFIG, new_partitions
from robodata_dagster.resources.catalog import SpecsResource


@dg.sensor(
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Adds a partition for every new named curation spec and training config file.",
)
def spec_registry_sensor(context: dg.SensorEvaluationContext, specs: SpecsResource) -> dg.SensorResult:
    dirs = specs.dirs()
    for kind in (CURATION_SPEC, TRAIN_CONFIG):
        for path in dirs.rejected(kind):
            context.log.warning(f"{path}: not a valid partition name (letters, digits, '.', '_', '-'); skipped")
    new = new_partitions(context.instance, dirs)
    requests = [dg.AddDynamicPartitionsRequest(kind, names) for kind, names in new.items() if names]
    skip = None if requests else dg.SkipReason("no new specs")
    return dg.SensorResult(dynamic_partitions_requests=requests, skip_reason=skip)
