"""The ingestion graph on a real (temp-dir) Dagster instance: critical vs non-critical failures,
re-execution from failure, and the number of event-log rows per batch."""

import shutil

import dagster as dg
import pytest
from deltalake import DeltaTable

from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.synth import SynthConfig, synthesize
from robodata.ingest.tables import IngestPaths
from robodata_dagster.definitions import full_job


def _config(root):
    return {"resources": {"ingest": {"config": {"root": str(root), "workers": 1, "visual_frames": 2}}}}


def _batch(instance, tmp, name, n):
    land = tmp / f"land-{name}"
    synthesize(SynthConfig(episodes=n, duration_s=1.0, height=32, width=32, fps=10.0, state_hz=20.0, seed=n), land)
    write_manifest(IngestPaths(str(tmp / "state")), name, new_items(str(land), LandingCursor()))
    instance.add_dynamic_partitions("ingest_batch", [name])


def _steps(instance, run_id, event_type):
    return {
        r.event_log_entry.step_key for r in instance.get_records_for_run(run_id, of_type=event_type, limit=1000).records
    }


@pytest.fixture()
def instance(tmp_path):
    (tmp_path / "dh").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dh")) as inst:
        yield inst


def test_features_failure_does_not_cancel_run_and_reexecution_finishes_it(instance, tmp_path):
    _batch(instance, tmp_path, "b-fail", 2)
    blocker = tmp_path / "state" / "ingest" / "features"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("not a Delta table")  # the features table cannot be written
    job = dg.reconstructable(full_job)
    with dg.execute_job(
        job, instance, run_config=_config(tmp_path / "state"), tags={"dagster/partition": "b-fail"}
    ) as r1:
        assert not r1.success
        run1 = r1.run_id
    failed = _steps(instance, run1, dg.DagsterEventType.STEP_FAILURE)
    done = _steps(instance, run1, dg.DagsterEventType.STEP_SUCCESS)
    assert failed == {"features"}
    assert {"raw_episodes", "aligned_tracks", "episodes", "qc_results", "episode_metadata", "segments"} <= done
    cat = DeltaTable(IngestPaths(str(tmp_path / "state")).catalog).to_pyarrow_table()
    assert cat.num_rows == 2 and set(cat.column("qc_status").to_pylist()) == {"pass"}

    blocker.unlink()
    opts = dg.ReexecutionOptions.from_failure(run1, instance)
    with dg.execute_job(
        job,
        instance,
        run_config=_config(tmp_path / "state"),
        reexecution_options=opts,
        tags={"dagster/partition": "b-fail"},
    ) as r2:
        assert r2.success
        run2 = r2.run_id
    assert _steps(instance, run2, dg.DagsterEventType.STEP_SUCCESS) == {"features"}  # nothing finished is redone
    feats = DeltaTable(IngestPaths(str(tmp_path / "state")).table("features")).to_pyarrow_table()
    assert feats.num_rows == 2


def test_event_rows_per_batch_do_not_grow_with_episodes(instance, tmp_path):
    counts = {}
    for name, n in (("b-small", 1), ("b-large", 6)):
        _batch(instance, tmp_path, name, n)
        res = full_job().execute_in_process(
            instance=instance, partition_key=name, run_config={"resources": _config(tmp_path / "state")["resources"]}
        )
        assert res.success
        counts[n] = len(instance.all_logs(res.run_id))
    # a handful of events per asset and one per QC check (4 more non-blocking findings since issue 36: 103)
    assert counts[6] == counts[1] and counts[1] < 120


def test_metadata_backfill_and_relabel_profiles_touch_only_their_assets(instance, tmp_path):
    from robodata_dagster.definitions import job

    _batch(instance, tmp_path, "b-prof", 2)
    cfg = {"resources": _config(tmp_path / "state")["resources"]}

    def run(name: str):
        return job(name).execute_in_process(instance=instance, partition_key="b-prof", run_config=cfg)

    assert run("full").success
    containers = sorted((tmp_path / "state" / "containers").rglob("*.rdep"))
    mtimes = [p.stat().st_mtime_ns for p in containers]
    for name, assets in (("metadata_backfill", {"episode_metadata"}), ("relabel", {"segments", "features"})):
        res = run(name)
        assert res.success
        assert {e.asset_key.to_user_string() for e in res.get_asset_materialization_events()} == assets
    assert [p.stat().st_mtime_ns for p in containers] == mtimes  # no video touched
    shutil.rmtree(tmp_path / "state" / "catalog")
    assert run("metadata_backfill").success
    assert DeltaTable(IngestPaths(str(tmp_path / "state")).catalog).to_pyarrow_table().num_rows == 2


def test_check_severity_matches_what_the_check_did(instance, tmp_path):
    """A report-only check never blocks and only warns; a check that quarantines is ERROR when the
    whole batch is broken (declared blocking: the default quarantining set), WARN for a few episodes."""
    from robodata.ingest.qc import DEFAULT_BLOCKING
    from robodata_dagster.assets.ingest_checks import BROKEN_MIN, qc_pre_conversion

    blocking = {s.name: s.blocking for s in qc_pre_conversion.check_specs}
    assert {n for n, b in blocking.items() if b} == {n for n in blocking if n in DEFAULT_BLOCKING}
    assert all(s.description for s in qc_pre_conversion.check_specs)

    def short_batch(name: str, n: int, seed: int) -> None:  # every episode shorter than the QC minimum
        land = tmp_path / f"land-{name}"
        synthesize(
            SynthConfig(episodes=n, duration_s=0.3, height=16, width=16, fps=10.0, state_hz=20.0, seed=seed), land
        )
        write_manifest(IngestPaths(str(tmp_path / "state")), name, new_items(str(land), LandingCursor()))
        instance.add_dynamic_partitions("ingest_batch", [name])

    short_batch("b-short", 2, 1)
    cfg = {"resources": _config(tmp_path / "state")["resources"]}
    res = full_job().execute_in_process(instance=instance, partition_key="b-short", run_config=cfg)
    checks = {e.check_name: e for e in res.get_asset_check_evaluations()}
    # min_duration is report-only by default: it quarantines nobody, so it warns and blocks nothing
    assert not checks["min_duration"].passed and checks["min_duration"].severity == dg.AssetCheckSeverity.WARN
    assert checks["min_duration"].metadata["batch"].value == "b-short"
    md = {e.asset_key.to_user_string(): e.materialization.metadata for e in res.get_asset_materialization_events()}
    assert md["episodes"]["converted"].value == 2
    # Delta-backed steps carry their table's columns and this batch's rows
    assert md["qc_results"]["dagster/row_count"].value > 0
    assert "episode_id" in {c.name for c in md["episodes"]["dagster/column_schema"].value.columns}
    assert md["raw_episodes"]["dagster/row_count"].value == 2
    # configured to quarantine, failing every episode of a batch: ERROR, and nothing converted
    short_batch("b-short2", BROKEN_MIN, 2)
    cfg_q = {
        "resources": {"ingest": {"config": {"root": str(tmp_path / "state"), "qc": {"blocking": ["min_duration"]}}}}
    }
    res = full_job().execute_in_process(instance=instance, partition_key="b-short2", run_config=cfg_q)
    checks = {e.check_name: e for e in res.get_asset_check_evaluations()}
    assert checks["min_duration"].severity == dg.AssetCheckSeverity.ERROR
    md = {e.asset_key.to_user_string(): e.materialization.metadata for e in res.get_asset_materialization_events()}
    assert md["episodes"]["converted"].value == 0
    # the same check failing for some episodes only is a warning; those episodes are quarantined
    land2 = tmp_path / "land-mixed"
    synthesize(SynthConfig(episodes=2, duration_s=1.0, height=16, width=16, fps=10.0, state_hz=20.0, seed=4), land2)
    synthesize(
        SynthConfig(episodes=1, duration_s=0.3, height=16, width=16, fps=10.0, state_hz=20.0, seed=5, site="x"), land2
    )
    write_manifest(IngestPaths(str(tmp_path / "state")), "b-mixed", new_items(str(land2), LandingCursor()))
    instance.add_dynamic_partitions("ingest_batch", ["b-mixed"])
    cfg2 = {
        "resources": {
            "ingest": {
                "config": {
                    "root": str(tmp_path / "state"),
                    "qc": {"blocking": ["readable", "min_duration", "converted"]},
                }
            }
        }
    }
    res2 = full_job().execute_in_process(instance=instance, partition_key="b-mixed", run_config=cfg2)
    assert res2.success
    md = {e.asset_key.to_user_string(): e.materialization.metadata for e in res2.get_asset_materialization_events()}
    assert md["qc_results"]["quarantined"].value == 1 and md["episodes"]["converted"].value == 2
    warn = {e.check_name: e for e in res2.get_asset_check_evaluations()}["min_duration"]
    assert not warn.passed and warn.severity == dg.AssetCheckSeverity.WARN
    (reason,) = warn.metadata["quarantine_reasons"].value.splitlines()  # the one short episode, and why
    assert reason.startswith("x-robot-") and "episode spans 0.29 s < 0.5 s" in reason
    assert warn.description.startswith("1 of 3 failed; first: x-robot-")


def test_profiles_choose_threads():
    """bulk: a conversion process per core of the machine that runs the step, each decoding and
    encoding on its one thread (IngestSettings.for_bulk); live and full: read-ahead threads and the
    codec's own threads. Run config reaches the conversion's settings."""
    import os

    from robodata.ingest.settings import IngestSettings
    from robodata_dagster.jobs.ingest import profile_config
    from robodata_dagster.resources.ingest import IngestResource, VideoConfig

    def settings(profile, **fields):
        return IngestResource(**profile_config(profile, root="r", **fields)["resources"]["ingest"]["config"]).settings()

    bulk = settings("bulk")
    assert bulk == IngestSettings().for_bulk(os.cpu_count() or 1)
    assert (bulk.video.threads, bulk.decode_threads) == (1, 0)
    assert settings("bulk", workers=3).workers == 3  # an explicit worker count wins
    assert (settings("live").video.threads, settings("live").video.preset) == (0, "ultrafast")
    assert settings("full").video.threads == 0 and settings("full").decode_threads == 2
    with pytest.raises(Exception, match="threads"):
        IngestResource(root="r", video=VideoConfig(threads=-2)).settings()


def test_qc_checks_are_per_batch_a_failed_batch_stays_failed_when_the_next_passes(instance, tmp_path):
    from dagster._core.event_api import PartitionKeyFilter
    from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus as Status

    land = tmp_path / "land-short"
    synthesize(SynthConfig(episodes=1, duration_s=0.3, height=16, width=16, fps=10.0, state_hz=20.0, seed=7), land)
    write_manifest(IngestPaths(str(tmp_path / "state")), "b-short", new_items(str(land), LandingCursor()))
    instance.add_dynamic_partitions("ingest_batch", ["b-short"])
    _batch(instance, tmp_path, "b-ok", 1)
    cfg = {"resources": _config(tmp_path / "state")["resources"]}
    for batch in ("b-short", "b-ok"):  # the failing batch first, then one that passes
        res = full_job().execute_in_process(instance=instance, partition_key=batch, run_config=cfg)
        (ev,) = [e for e in res.get_asset_check_evaluations() if e.check_name == "min_duration"]
        assert ev.partition == batch  # each evaluation carries its batch
    key = dg.AssetCheckKey(dg.AssetKey("aligned_tracks"), "min_duration")
    latest = {
        b: instance.event_log_storage.get_latest_asset_check_execution_by_key([key], PartitionKeyFilter(key=b))[key]
        for b in ("b-short", "b-ok")
    }
    assert latest["b-short"].status == Status.FAILED and latest["b-ok"].status == Status.SUCCEEDED
