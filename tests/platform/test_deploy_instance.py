"""deploy/dagster.yaml against a real PostgreSQL, and the ingestion graph on Postgres end to end (local root;
test_deploy_ingest_s3.py runs it with an S3 landing zone and root)."""

import dagster as dg
import pytest
from dagster_k8s import K8sRunLauncher
from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage

from robodata_dagster.definitions import full_job
from robodata_dagster.lib.step_kinds import POOL_LIMITS, apply_pool_limits
from tests.platform.deploy_support import postgres, prod_instance_home


@pytest.fixture
def prod_instance(monkeypatch, request):
    home, env = prod_instance_home(postgres(), f"t_{request.node.name[:40].lower().replace('[', '_').replace(']', '')}")
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.from_config(str(home)) as inst:
        yield inst


def test_prod_instance_yaml_runs_on_postgres(prod_instance):
    inst = prod_instance
    assert isinstance(inst.run_storage, PostgresRunStorage)
    assert isinstance(inst.event_log_storage, PostgresEventLogStorage)
    assert isinstance(inst.run_coordinator, dg.QueuedRunCoordinator)
    assert isinstance(inst.run_launcher, K8sRunLauncher) and inst.run_launcher.job_namespace == "robodata"
    assert inst.run_retries_enabled and inst.run_retries_max_retries == 2
    queue = inst.get_concurrency_config().run_queue_config
    assert queue.max_concurrent_runs == 64
    assert {"key": "robodata/run-kind", "value": "ingest-batch", "limit": 48} in queue.tag_concurrency_limits
    apply_pool_limits(inst)
    apply_pool_limits(inst)  # idempotent
    for pool, n in POOL_LIMITS.items():
        assert inst.event_log_storage.get_concurrency_info(pool).slot_count == n


def test_ingestion_graph_end_to_end_on_postgres(prod_instance, tmp_path, monkeypatch):
    """Landing zone -> sensor policy (batches, staggered launch) -> the whole ingestion graph with its
    QC checks, on the prod instance yaml (Postgres); asset and check events land in Postgres."""
    from deltalake import DeltaTable

    from robodata.ingest.landing.launches import BatchPolicy, LaunchState, tick
    from robodata.ingest.landing.stagger import StaggerPolicy
    from robodata.ingest.synth import SynthConfig, synthesize
    from robodata.ingest.tables import IngestPaths

    landing, root = tmp_path / "landing", tmp_path / "state"
    synthesize(SynthConfig(episodes=2, duration_s=1.0, height=32, width=32, fps=10.0, state_hz=20.0), landing)
    monkeypatch.setenv("ROBODATA_STORAGE_ROOT", str(root))
    t = tick(LaunchState(), str(landing), IngestPaths(str(root)), BatchPolicy(settle_s=0.0), StaggerPolicy(run_s=0.0))
    assert len(t.new_batches) == 1 and t.launch == t.new_batches
    batch = t.launch[0]
    prod_instance.add_dynamic_partitions("ingest_batch", [batch])
    run_config = {"resources": {"ingest": {"config": {"root": str(root), "workers": 1, "visual_frames": 2}}}}
    with dg.execute_job(
        dg.reconstructable(full_job), instance=prod_instance, run_config=run_config, tags={"dagster/partition": batch}
    ) as result:
        assert result.success, [e.message for e in result.all_events if e.is_failure]
        run_id = result.run_id
    assert prod_instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.SUCCESS
    mats = prod_instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION, limit=1000
    ).records
    keys = {r.event_log_entry.dagster_event.asset_key.to_user_string() for r in mats}
    assert {"raw_episodes", "episodes", "episode_metadata"} <= keys
    checks = prod_instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION, limit=1000
    ).records
    assert checks and all(r.event_log_entry.dagster_event.event_specific_data.passed for r in checks)
    assert prod_instance.get_latest_materialization_event(dg.AssetKey("episodes")).run_id == run_id
    assert DeltaTable(IngestPaths(str(root)).catalog).to_pyarrow_table().num_rows == 2
    # a handful of events per batch run, never per episode
    assert len(prod_instance.all_logs(run_id)) < 150


def _sql_statements(path):
    lines = [ln for ln in path.read_text().splitlines() if not ln.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def test_postgres_index_setup_applies_to_the_dagster_schema(prod_instance):
    import psycopg2

    from tests.platform.deploy_support import ROOT

    url = prod_instance.run_storage.postgres_url.replace("postgresql+psycopg2://", "postgresql://", 1)
    conn = psycopg2.connect(url)
    conn.autocommit = True  # CREATE INDEX CONCURRENTLY cannot run in a transaction
    try:
        with conn.cursor() as cur:
            for _ in range(2):  # idempotent
                for stmt in _sql_statements(ROOT / "deploy" / "postgres-indexes.sql"):
                    cur.execute(stmt)
            cur.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'robodata_runs_by_create_timestamp'")
            assert "(create_timestamp)" in cur.fetchone()[0]
            cur.execute("SELECT reloptions FROM pg_class WHERE relname = 'event_logs'")
            assert "autovacuum_vacuum_scale_factor=0.02" in cur.fetchone()[0]
    finally:
        conn.close()
