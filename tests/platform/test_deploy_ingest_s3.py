"""The ingestion graph end to end on the prod instance (Postgres) with its landing zone and its
state root (manifests, Delta tables, containers, catalog) on S3 (a moto server on loopback)."""

import os
import uuid

import dagster as dg
import fsspec
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from robodata_dagster.definitions import full_job
from tests.platform.deploy_support import postgres, prod_instance_home


@pytest.fixture
def s3(monkeypatch):
    from robodata_testing.services import LoopbackS3

    with LoopbackS3.start(f"robodata-ingest-{uuid.uuid4().hex[:8]}") as srv:  # moto state is per process
        for k, v in srv.env().items():  # how prod is configured: AWS_* in the pods' environment
            monkeypatch.setenv(k, v)
        yield srv


@pytest.fixture
def prod_instance(monkeypatch):
    home, env = prod_instance_home(postgres(), "t_ingest_s3")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.from_config(str(home)) as inst:
        yield inst


def _landing_on_s3(tmp_path, s3) -> dict[str, str]:
    """Two good legacy folders, one with a broken JPEG, one good and one truncated MCAP, uploaded."""
    from robodata.ingest.synth import SynthConfig, synthesize
    from tests.core.helpers_ingest import write_ros2_mcap

    src = tmp_path / "upload"
    eps = synthesize(SynthConfig(episodes=3, duration_s=1.0, height=32, width=32, fps=10.0, state_hz=20.0), src)
    victim = sorted((eps[2] / "wrist").glob("*.jpg"))[3]
    victim.write_bytes(victim.read_bytes()[:64])
    good = write_ros2_mcap(src / "ros-good.mcap", seconds=1.0, extra_topic=None)
    (src / "ros-truncated.mcap").write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    fs = fsspec.filesystem("s3", **s3.location().fsspec_options())
    fs.put(str(src) + "/", f"s3://{s3.bucket}/landing/", recursive=True)
    return {
        "good_a": eps[0].name,
        "good_b": eps[1].name,
        "bad_jpeg": eps[2].name,
        "mcap_good": "ros-good.mcap",
        "mcap_truncated": "ros-truncated.mcap",
    }


def test_ingestion_graph_on_postgres_with_s3_landing_and_root(prod_instance, s3, tmp_path, monkeypatch):
    """Sensor (S3 landing, manifests on S3) -> the full graph with its QC checks -> state on S3."""
    from robodata.container import EpisodeReader
    from robodata.ingest.tables import IngestPaths
    from robodata_dagster.resources.ingest import (
        BatchConfig,
        IngestResource,
        LandingResource,
        LaunchConfig,
        StaggerConfig,
    )
    from robodata_dagster.sensors.ingest import landing_zone_sensor

    cases = _landing_on_s3(tmp_path, s3)
    cwd, scratch = tmp_path / "cwd", tmp_path / "scratch"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # a relative path written by mistake lands here
    monkeypatch.setenv("ROBODATA_SCRATCH", str(scratch))  # staged inputs / outputs: must be cleaned up
    root = f"s3://{s3.bucket}/state"
    monkeypatch.setenv("ROBODATA_STORAGE_ROOT", root)  # ingestion follows the deployment's storage root
    monkeypatch.setenv("ROBODATA_LANDING", f"s3://{s3.bucket}/landing")
    launch = LaunchConfig(batch=BatchConfig(settle_s=0), stagger=StaggerConfig(run_s=0))
    resources = {"ingest": IngestResource(), "landing": LandingResource(bulk=launch)}
    tick = landing_zone_sensor(dg.build_sensor_context(instance=prod_instance, resources=resources))
    (rr,) = tick.run_requests
    batch = rr.partition_key
    assert rr.run_config["resources"]["ingest"]["config"]["root"] == root
    paths = IngestPaths(root)  # endpoint + credentials from AWS_* (from_env)
    assert paths.location == s3.location("state")
    prod_instance.add_dynamic_partitions("ingest_batch", [batch])
    run_config = {
        "resources": {
            "ingest": {"config": {**rr.run_config["resources"]["ingest"]["config"], "workers": 2, "visual_frames": 2}}
        }
    }
    with dg.execute_job(
        dg.reconstructable(full_job), instance=prod_instance, run_config=run_config, tags={"dagster/partition": batch}
    ) as result:
        assert result.success, [e.message for e in result.all_events if e.is_failure]
        run_id = result.run_id
    keys = {
        r.event_log_entry.dagster_event.asset_key.to_user_string()
        for r in prod_instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION, limit=1000
        ).records
    }
    assert {
        "raw_episodes",
        "aligned_tracks",
        "episodes",
        "qc_results",
        "episode_metadata",
        "segments",
        "features",
    } <= keys
    checks = {
        (data := r.event_log_entry.dagster_event.event_specific_data).check_name: data
        for r in prod_instance.get_records_for_run(
            run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION, limit=1000
        ).records
    }
    assert not checks["converted"].passed and checks["converted"].severity == dg.AssetCheckSeverity.WARN
    assert len(prod_instance.all_logs(run_id)) < 150  # a handful of events per batch, not per episode

    loc = s3.location("state")
    fs = fsspec.filesystem("s3", **loc.fsspec_options())
    assert fs.exists(paths.batch_manifest(batch))
    # per-episode QC on S3: the bad inputs are quarantined with their reasons, the batch went on
    qc = DeltaTable(paths.table("qc_results"), storage_options=loc.delta_options()).to_pyarrow_table()
    summary = {r["uri"].rsplit("/", 1)[-1]: r for r in qc.to_pylist() if r["stage"] == "summary"}
    assert set(summary) == set(cases.values())
    assert all(summary[cases[k]]["passed"] for k in ("good_a", "good_b", "mcap_good"))
    assert "not a decodable JPEG" in summary[cases["bad_jpeg"]]["reason"]
    assert "truncated or corrupt MCAP" in summary[cases["mcap_truncated"]]["reason"]
    assert all(f"s3://{s3.bucket}/landing/" in r["uri"] for r in summary.values())
    # the catalog on S3 points at container objects in the bucket, which decode
    cat = DeltaTable(paths.catalog, storage_options=loc.delta_options()).to_pyarrow_table()
    assert cat.num_rows == 5
    ok = cat.filter(pc.equal(cat.column("qc_status"), "pass")).to_pylist()
    assert len(ok) == 3 and {r["ingest_batch"] for r in ok} == {batch}
    objs = {f"s3://{p}": fs.size(p) for p in fs.find(f"{s3.bucket}/state/containers/{batch}")}
    assert {r["uri"] for r in ok} <= set(objs) and all(objs[r["uri"]] == r["size_bytes"] for r in ok)
    for r in ok:
        rd = EpisodeReader.open(
            r["uri"], footer_offset=r["footer_offset"], footer_length=r["footer_length"], **loc.fsspec_options()
        )
        cam = r["cameras"][0]
        assert len(rd.read_window(0.0, 0.5, [cam])[cam].data) >= 4
    assert not any(p.endswith(".partial") for p in fs.find(f"{s3.bucket}/state"))
    feats = DeltaTable(paths.table("features"), storage_options=loc.delta_options()).to_pyarrow_table()
    assert feats.num_rows == 3 and not any(feats.column("error").to_pylist())
    # nothing on the local disk: no state under the working dir, scratch copies removed
    assert os.listdir(cwd) == [] and os.listdir(scratch) == []
