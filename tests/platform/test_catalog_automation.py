"""catalog_automation_sensor (lib/refresh.py): caught up by construction, never churning, and config
failures neither retried nor requested again until their file changes."""

from __future__ import annotations

import dagster as dg
import pytest
from dagster._core.test_utils import create_run_for_test

from robodata.catalog.table import Catalog
from robodata_dagster.assets.curation import manifest
from robodata_dagster.lib.refresh import Facts, Target, decide
from robodata_dagster.resources.catalog import CatalogResource, SpecsResource
from robodata_dagster.resources.manifests import ManifestRefIOManager
from robodata_dagster.sensors.automation import catalog_automation_sensor
from robodata_testing import synthetic_catalog as synthetic

SPEC = (
    "version: 1\nname: a\nfilters:\n  - {column: qc_status, op: '==', value: pass}\n"
    "split: {val_fraction: 0.1, salt: a}\n"
)
ACCEPT = "version: 1\ndefault: {criteria: {min_quality: 0.8}, target_passes_per_shift: 2}\n"
SHAPE = synthetic.FleetShape(rows_per_day=100, robots_per_site=2)


def test_decide_requests_only_what_is_behind_and_idle():
    t = Target("manifest", "a", "curation", wanted=5, digest="d" * 64, spec_hash="h")
    assert decide(t, Facts()).request  # never materialized
    assert decide(t, Facts(read_version=4, read_spec_hash="h")).request
    assert decide(t, Facts(read_version=5, read_spec_hash="x")).request  # read through another spec
    assert not decide(t, Facts(read_version=5, read_spec_hash="h")).request
    assert not decide(t, Facts(read_version=4, read_spec_hash="h", in_flight=True)).request
    failed = Facts(read_version=4, config_failure_digest="d" * 64)
    assert "waiting for the file to change" in decide(t, failed).why and not decide(t, failed).request
    assert decide(t, Facts(read_version=4, config_failure_digest="e" * 64)).request  # the file changed since
    bad = Target("manifest", "a", "curation", wanted=5, error="no such column")
    assert not decide(bad, Facts()).request and "no such column" in decide(bad, Facts()).why
    a, b = decide(t, Facts()), decide(Target("manifest", "a", "curation", 6, "d" * 64), Facts())
    assert a.run_key != b.run_key  # a failed run is asked again only once the catalog (or file) moved


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the acceptance config's default path is relative
    (tmp_path / "specs" / "curation").mkdir(parents=True)
    (tmp_path / "specs" / "curation" / "a.yaml").write_text(SPEC)
    (tmp_path / "specs" / "site_acceptance.yaml").write_text(ACCEPT)
    cat = Catalog(str(tmp_path / "catalog"))
    cat.merge(synthetic.rows(SHAPE, 0, 200))
    resources = {
        "catalog": CatalogResource(uri=cat.uri, manifests_dir=str(tmp_path / "manifests")),
        "specs": SpecsResource(curation_dir=str(tmp_path / "specs" / "curation")),
        "manifest_io_manager": ManifestRefIOManager(root=str(tmp_path / "state")),
    }
    with dg.instance_for_test(overrides={"run_retries": {"enabled": True, "max_retries": 2}}) as instance:
        instance.add_dynamic_partitions("curation_spec", ["a"])
        yield tmp_path, cat, resources, instance


def _tick(instance, resources) -> dict[str, dg.RunRequest]:
    ctx = dg.build_sensor_context(instance=instance, resources=resources)
    result = catalog_automation_sensor(ctx)
    return {r.partition_key or r.job_name: r for r in result.run_requests or []}


def _curate(instance, resources):
    res = dg.materialize([manifest], resources=resources, instance=instance, partition_key="a", raise_on_error=False)
    return res


def test_a_commit_during_a_run_is_seen_once_it_ends_and_same_rows_write_nothing(setup):
    tmp_path, cat, resources, instance = setup
    assert "a" in _tick(instance, resources)  # never materialized
    first = _curate(instance, resources).asset_materializations_for_node("manifest")[0]
    assert first.metadata["catalog_version_read"].value == cat.version()
    assert "a" not in _tick(instance, resources)  # caught up

    # a commit lands while a run for the spec is in flight: not requested now, requested once it ends
    flying = create_run_for_test(
        instance,
        job_name="curation",
        status=dg.DagsterRunStatus.STARTED,
        tags={"dagster/partition": "a"},
        asset_selection=frozenset({dg.AssetKey("manifest")}),
    )
    cat.merge(synthetic.rows(SHAPE, 0, 200))  # the same rows again: a new version, nothing new selected
    assert "a" not in _tick(instance, resources)
    instance.report_run_canceled(flying)
    request = _tick(instance, resources)["a"]
    assert request.tags["robodata/catalog-version"] == str(cat.version())

    second = _curate(instance, resources).asset_materializations_for_node("manifest")[0]
    assert second.metadata["catalog_version_read"].value == cat.version() > first.metadata["catalog_version_read"].value
    assert second.metadata["path"].value == first.metadata["path"].value  # same rows: the same file
    assert second.tags["dagster/data_version"] == first.tags["dagster/data_version"]
    assert len(list((tmp_path / "manifests").glob("*.parquet"))) == 1
    assert "a" not in _tick(instance, resources)


def test_config_failures_are_not_retried_and_wait_for_their_file(setup):
    tmp_path, cat, resources, instance = setup
    spec_file = tmp_path / "specs" / "curation" / "a.yaml"
    spec_file.write_text(SPEC.replace("qc_status", "qc_statsu"))  # broken after registration
    requests = _tick(instance, resources)
    assert "a" not in requests  # validated before any run: refused, with the reason in the tick

    res = _curate(instance, resources)  # run anyway (by hand): fails on the config, once
    assert not res.success
    run = instance.get_run_by_id(res.run_id)
    assert run.tags["robodata/failure"] == "config" and run.tags["dagster/will_retry"] == "false"
    assert run.tags["dagster/max_retries"] == "0" and run.tags["robodata/spec-digest"]

    spec_file.write_text(SPEC + "# valid again, but its last run failed on the file as it was\n")
    assert "a" in _tick(instance, resources)  # the file changed: requested
    spec_file.write_text(SPEC.replace("qc_status", "qc_statsu"))
    cat.merge(synthetic.rows(SHAPE, 200, 50))
    assert "a" not in _tick(instance, resources)  # a new batch does not ask the failed, unchanged file again


def test_invalid_specs_never_become_partitions(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from robodata_dagster.cli import app
    from robodata_dagster.sensors.specs import spec_registry_sensor

    cur, train = tmp_path / "specs" / "curation", tmp_path / "specs" / "training"
    cur.mkdir(parents=True)
    train.mkdir()
    (cur / "a.yaml").write_text(SPEC)
    (cur / "col.yaml").write_text(SPEC.replace("name: a", "name: col").replace("qc_status", "qc_statsu"))
    (cur / "named.yaml").write_text(SPEC)  # its name: is `a`, not the file's
    home = tmp_path / "dh"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    dirs = ["--curation-dir", str(cur), "--training-dir", str(train)]
    res = CliRunner().invoke(app, ["specs", *dirs])
    assert res.exit_code == 1  # refused files: a script notices
    assert "refused" in res.stderr and "col.yaml" in res.stderr and "qc_statsu" in res.stderr
    assert "named.yaml" in res.stderr and "must match the file name" in res.stderr
    with dg.DagsterInstance.get() as instance:
        assert instance.get_dynamic_partitions("curation_spec") == ["a"]
    (cur / "b.yaml").write_text(SPEC.replace("name: a", "name: b"))
    with dg.instance_for_test() as instance:
        specs = SpecsResource(curation_dir=str(cur), training_dir=str(train))
        ctx = dg.build_sensor_context(instance=instance, resources={"specs": specs})
        result = spec_registry_sensor(ctx)
        (added,) = result.dynamic_partitions_requests
        assert sorted(added.partition_keys) == ["a", "b"]  # the valid ones only
        assert "col.yaml" in result.cursor and "named.yaml" in result.cursor  # refused, logged once per content

    monkeypatch.delenv("DAGSTER_HOME")
    res = CliRunner().invoke(app, ["specs", *dirs])
    assert res.exit_code == 2 and "DAGSTER_HOME is not set" in res.stderr and "Traceback" not in res.output
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    res = CliRunner().invoke(app, ["add-batch", str(tmp_path / "no-such-landing")])
    assert res.exit_code == 2 and "is not a folder" in res.stderr
