"""spec_registry_sensor: a new valid file in specs/curation/ or specs/training/ becomes a partition of
`manifest` / `training_run` (lib/registry.py; `robodata-dagster specs` does the same once).

A file is validated first, as its run would read it; an invalid one is refused: no partition (so no
run), a warning in the sensor's log naming the file and the error (once per content of the file: the
cursor keeps the refused files' digests), and the tick's skip reason lists it in the UI.
"""

import json

import dagster as dg

from robodata_dagster.lib.registry import candidates
from robodata_dagster.resources.catalog import SpecsResource


@dg.sensor(
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Adds a partition for every new valid curation spec and training config file; refuses invalid ones.",
)
def spec_registry_sensor(context: dg.SensorEvaluationContext, specs: SpecsResource) -> dg.SensorResult:
    import hashlib
    from pathlib import Path

    found = candidates(context.instance, specs.dirs())
    logged: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    refused: dict[str, str] = {}
    for path, why in sorted(found.refused.items()):
        try:
            refused[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            refused[path] = ""
        if logged.get(path) != refused[path]:
            context.log.warning(f"refused {path}: {why}")
    requests = [dg.AddDynamicPartitionsRequest(kind, names) for kind, names in found.added.items() if names]
    skip = None
    if not requests:
        why = "; ".join(f"{p}: {w}" for p, w in sorted(found.refused.items()))
        skip = dg.SkipReason(f"no new specs; refused {len(refused)}: {why}"[:2000] if refused else "no new specs")
    return dg.SensorResult(dynamic_partitions_requests=requests, skip_reason=skip, cursor=json.dumps(refused))
