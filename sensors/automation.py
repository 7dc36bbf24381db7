"""Automation: the sensors that keep what is built from the catalog caught up with it.

`catalog_automation_sensor` (running by default) requests `manifest` for every registered, valid spec
and `site_acceptance` whenever the catalog's Delta version is newer than the one their latest
materialization read and no run for them is in flight (lib/refresh.py says exactly when): so a
batch whose rows reach the catalog while a manifest run is in progress is picked up on the first
tick after that run, and after the daemon quiesces every manifest has read the catalog's current
version. It is a plain sensor, not declarative automation: `(newly_missing | any_deps_updated)
.since_last_handled()` reset on the in-flight run's own materialization and lost such a commit
(issue 41). A spec file that is invalid, or whose last run failed on it unchanged, is not requested;
the sensor's tick says why.

`training_run` has no condition by default (training is launched by hand, `dg launch --assets
training_run`); with ROBODATA_TRAIN_EAGER=1 in the code location's environment it is eager on its
manifest's *data version* (definitions.py), which changes only when the manifest's rows do, and
`training_automation_sensor` launches it, tagged like the `training` job (run queue key, run retries).
"""

import dagster as dg

from robodata_dagster.jobs.curation import curation_job, site_acceptance_job
from robodata_dagster.jobs.training import TRAINING_TAGS
from robodata_dagster.resources.catalog import CatalogResource, SpecsResource

ACCEPTANCE_CONFIG = "specs/site_acceptance.yaml"  # site_acceptance's default (assets/curation.py)


def _targets(context: dg.SensorEvaluationContext, specs: SpecsResource, version: int) -> list:
    import hashlib
    from pathlib import Path

    from robodata.curate.acceptance import load_acceptance
    from robodata.errors import ConfigError
    from robodata_dagster.lib.refresh import Target
    from robodata_dagster.lib.registry import CURATION_SPEC, curation_spec, digest

    dirs = specs.dirs()
    out = []
    for name in context.instance.get_dynamic_partitions(CURATION_SPEC):
        error, spec_hash, wanted = "", "", version
        try:
            path, spec = curation_spec(dirs, name)
            spec_hash = spec.spec_hash(path.parent)
            wanted = version if spec.catalog_version is None else spec.catalog_version
        except ConfigError as exc:
            error = str(exc)
        out.append(
            Target("manifest", name, curation_job.name, wanted, digest(dirs, CURATION_SPEC, name), error, spec_hash)
        )
    error = ""
    try:
        load_acceptance(ACCEPTANCE_CONFIG)
        config_digest = hashlib.sha256(Path(ACCEPTANCE_CONFIG).read_bytes()).hexdigest()
    except (ConfigError, OSError) as exc:
        error, config_digest = str(exc), ""
    out.append(Target("site_acceptance", None, site_acceptance_job.name, version, config_digest, error))
    return out


@dg.sensor(
    jobs=[curation_job, site_acceptance_job],
    minimum_interval_seconds=15,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description=(
        "Refreshes manifest (per valid spec) and site_acceptance whenever the catalog is newer than what "
        "they last read and no run for them is in flight."
    ),
)
def catalog_automation_sensor(
    context: dg.SensorEvaluationContext, catalog: CatalogResource, specs: SpecsResource
) -> dg.SensorResult:
    from robodata_dagster.lib.refresh import requests

    cat = catalog.catalog()
    if not cat.exists():
        return dg.SensorResult(skip_reason=dg.SkipReason(f"no catalog at {cat.uri} yet"))
    version = cat.version()
    runs, notes = requests(context.instance, _targets(context, specs, version))
    for note in notes:
        if "caught up" not in note:
            context.log.info(note)
    skip = None if runs else dg.SkipReason(f"catalog v{version}: " + "; ".join(notes)[:2000])
    return dg.SensorResult(run_requests=runs, skip_reason=skip)


training_automation_sensor = dg.AutomationConditionSensorDefinition(
    "training_automation_sensor",
    target=dg.AssetSelection.assets("training_run"),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
    run_tags=TRAINING_TAGS,
    description="Launches training_run partitions whose manifest's data changed, when training is eager (by config).",
)
