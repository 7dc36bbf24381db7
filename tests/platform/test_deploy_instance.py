"""deploy/dagster.yaml against a real PostgreSQL, and the ingestion graph on Postgres + S3 end to end."""

import os

import dagster as dg
import pytest
from dagster_k8s import K8sRunLauncher
from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage

from resources.step_kinds import POOL_LIMITS, apply_pool_limits
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


def _demo_config(root):
    return {"ops": {name: {"config": {"root": root, "episodes": 2, "duration_s": 1.0}}
                    for name in ("synthetic_landing", "demo_containers")}}


def demo_job():
    from definitions import defs

    return defs.resolve_job_def("demo")


def test_ingestion_graph_end_to_end_on_postgres_and_s3(prod_instance, tmp_path, monkeypatch):
    from deploy.services import LoopbackS3

    with LoopbackS3.start("robodata-e2e") as s3:
        for k, v in s3.env().items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("ROBODATA_STORAGE_ROOT", s3.location("prod").root)
        # Real multiprocess executor: each step is a subprocess that reaches Postgres through the instance ref.
        with dg.execute_job(dg.reconstructable(demo_job), instance=prod_instance,
                            run_config=_demo_config(str(tmp_path / "demo"))) as result:
            assert result.success, [e.message for e in result.all_events if e.is_failure]
            run_id = result.run_id
        run = prod_instance.get_run_by_id(run_id)
        assert run.status == dg.DagsterRunStatus.SUCCESS
        mats = prod_instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
        keys = {r.event_log_entry.dagster_event.asset_key.to_user_string() for r in mats}
        assert {"synthetic_landing", "demo_containers"} <= keys
        latest = prod_instance.get_latest_materialization_event(dg.AssetKey("demo_containers"))
        assert latest.asset_materialization.metadata["converted"].value == 2


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
