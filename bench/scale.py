"""Launch storm vs staggered launch of batch runs against a real Postgres-backed Dagster instance.

    python -m bench.scale [--smoke | --quick] [--runs N]

Simulates what the ingestion sensor and the run queue do for N batch runs (2,000; 200 with --quick,
20 with --smoke),
through the instance API on dagster-postgres storage (a private PostgreSQL cluster on loopback):
each run is submitted (run row + RUN_ENQUEUED), then, under the queue's max_concurrent_runs, goes
through RUN_STARTING, RUN_START, a step's engine events and one asset materialization, works
for --run-s seconds and ends with RUN_SUCCESS — a handful of events per batch, as in production.

unstaggered: the sensor submits all N in one tick (16 submitting threads).
staggered:   submissions follow robodata.ingest.landing.stagger.launch_offsets (slot = run_s / max_concurrent).

Writes per second are counted in the database (rows in `runs` + `event_logs` per second of their
timestamps). Last stdout line: JSON with peak_writes_per_s_ratio (staggered / unstaggered),
lost_runs (submitted runs that did not reach SUCCESS, both modes) and peak_rss_mb.
"""

from __future__ import annotations

import argparse
import queue
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg2
import yaml
from dagster._core.events import DagsterEvent, DagsterEventType, StepMaterializationData
from dagster._core.remote_origin import GrpcServerCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin

from bench.common import emit, parse, peak_rss_mb, size_of
from robodata.ingest.landing.stagger import StaggerPolicy, launch_offsets
from robodata_dagster.lib.deployment import BATCH_RUN_TAGS
from robodata_testing.services import PrivatePostgres

JOB = "ingest_batch"
RUNS = {"smoke": 20, "quick": 200, "full": 2000}
KEYS = (
    "runs",
    "unstaggered.peak_writes_per_s",
    "unstaggered.lost_runs",
    "staggered.peak_writes_per_s",
    "staggered.lost_runs",
    "peak_writes_per_s_ratio",
    "lost_runs",
    "peak_rss_mb",
)
# Queued runs carry the origin of the code location that defines their job (as submitted by a sensor).
ORIGIN = RemoteJobOrigin(
    repository_origin=RemoteRepositoryOrigin(
        code_location_origin=GrpcServerCodeLocationOrigin(host="robodata", port=3030, location_name="robodata"),
        repository_name="__repository__",
    ),
    job_name=JOB,
)


def _instance(pg: PrivatePostgres, db: str) -> dg.DagsterInstance:
    url = pg.create_database(db).replace("postgresql://", "postgresql+psycopg2://", 1)
    home = Path(tempfile.mkdtemp(prefix=f"robodata-bench-{db}-"))
    (home / "dagster.yaml").write_text(
        yaml.safe_dump({"telemetry": {"enabled": False}, "storage": {"postgres": {"postgres_url": url}}})
    )
    return dg.DagsterInstance.from_config(str(home))


def pool_connections(instance: dg.DagsterInstance, size: int) -> None:
    """Stand-in for PgBouncer in front of Postgres (docs/operations.md): dagster-postgres opens a new
    connection per write (NullPool), and connection setup costs ~25x an insert; a pool of `size`
    open connections shared by the simulated run workers removes that, as PgBouncer does for pods."""
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage
    from dagster_postgres.utils import create_pg_engine

    for storage in (instance.run_storage, instance.event_log_storage, instance.schedule_storage):
        if not isinstance(storage, PostgresRunStorage | PostgresEventLogStorage | PostgresScheduleStorage):
            raise TypeError(f"{type(storage).__name__}: pool_connections needs dagster-postgres storage")
        storage._engine = create_pg_engine(  # private: dagster-postgres has no public way to size its pool
            storage.postgres_url,
            None,
            isolation_level="AUTOCOMMIT",
            pool_size=size,
            max_overflow=0,
            pool_timeout=120,
        )


def _event(kind: DagsterEventType, **kw: object) -> DagsterEvent:
    return DagsterEvent(event_type_value=kind.value, job_name=JOB, **kw)  # type: ignore[arg-type]


class Simulation:
    """N batch runs through submit -> queue (max_concurrent_runs) -> run worker, on one instance."""

    def __init__(self, instance: dg.DagsterInstance, runs: int, run_s: float, max_concurrent_runs: int):
        self.instance, self.runs, self.run_s = instance, runs, run_s
        self.max_concurrent_runs = max_concurrent_runs
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def _fail(self, exc: BaseException) -> None:
        with self._lock:
            self.errors.append(f"{type(exc).__name__}: {exc}"[:300])

    def submit(self, i: int) -> str | None:
        try:
            run = self.instance.add_run(
                dg.DagsterRun(
                    job_name=JOB,
                    run_id=str(uuid.uuid4()),
                    status=dg.DagsterRunStatus.NOT_STARTED,
                    remote_job_origin=ORIGIN,
                    tags={**BATCH_RUN_TAGS, "robodata/batch": f"batch-{i:06d}"},
                )
            )
            self.instance.report_dagster_event(_event(DagsterEventType.RUN_ENQUEUED), run.run_id)
            return run.run_id
        except Exception as exc:  # a failed write loses the run: counted, not hidden
            self._fail(exc)
            return None

    def execute(self, run_id: str, i: int) -> None:
        inst = self.instance
        try:
            inst.report_dagster_event(_event(DagsterEventType.RUN_STARTING), run_id)
            inst.report_dagster_event(_event(DagsterEventType.RUN_START), run_id)
            inst.report_engine_event("step worker starting", job_name=JOB, run_id=run_id, step_key="episodes")
            time.sleep(self.run_s)
            mat = dg.AssetMaterialization(
                asset_key="episodes", partition=f"batch-{i:06d}", metadata={"episodes": 100, "bytes": 123456}
            )
            inst.report_dagster_event(
                _event(
                    DagsterEventType.ASSET_MATERIALIZATION,
                    step_key="episodes",
                    event_specific_data=StepMaterializationData(mat),
                ),
                run_id,
            )
            inst.report_dagster_event(_event(DagsterEventType.RUN_SUCCESS), run_id)
        except Exception as exc:
            self._fail(exc)

    def go(self, offsets: list[float]) -> float:
        """Submit per offsets while the queue runs them; returns wall seconds."""
        pending: queue.Queue[tuple[str, int] | None] = queue.Queue()

        def worker() -> None:
            while (item := pending.get()) is not None:
                self.execute(*item)

        workers = [threading.Thread(target=worker, daemon=True) for _ in range(self.max_concurrent_runs)]
        for w in workers:
            w.start()
        t0 = time.monotonic()

        def submit_at(i: int) -> None:
            delay = offsets[i] - (time.monotonic() - t0)
            if delay > 0:
                time.sleep(delay)
            run_id = self.submit(i)
            if run_id:
                pending.put((run_id, i))

        with ThreadPoolExecutor(max_workers=16) as pool:
            list(pool.map(submit_at, range(self.runs)))
        for _ in workers:
            pending.put(None)
        for w in workers:
            w.join()
        return time.monotonic() - t0


def writes_per_second(pg: PrivatePostgres, db: str) -> Counter[int]:
    """Rows written per wall-clock second (runs + event_logs), from the database itself."""
    conn = psycopg2.connect(pg.url(db))
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT floor(extract(epoch FROM create_timestamp))::bigint FROM runs "
                "UNION ALL SELECT floor(extract(epoch FROM timestamp))::bigint FROM event_logs"
            )
            return Counter(int(r[0]) for r in cur.fetchall())
    finally:
        conn.close()


def lost(instance: dg.DagsterInstance, runs: int) -> int:
    done = instance.get_runs_count(dg.RunsFilter(statuses=[dg.DagsterRunStatus.SUCCESS], tags=BATCH_RUN_TAGS))
    return runs - done


def run_mode(pg: PrivatePostgres, name: str, offsets: list[float], args: argparse.Namespace) -> dict[str, Any]:
    inst = _instance(pg, f"bench_{name}")
    if args.pool:
        pool_connections(inst, args.pool)
    try:
        sim = Simulation(inst, len(offsets), args.run_s, args.max_concurrent_runs)
        wall = sim.go(offsets)
        per_s = writes_per_second(pg, f"bench_{name}")
        return {
            "wall_s": round(wall, 2),
            "peak_writes_per_s": max(per_s.values()),
            "writes": sum(per_s.values()),
            "lost_runs": lost(inst, len(offsets)),
            "errors": len(sim.errors),
            "first_error": sim.errors[0] if sim.errors else "",
        }
    finally:
        inst.dispose()


def options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--runs", type=int, default=None, help="batch runs (default: 20 / 200 / 2,000 by size)")
    ap.add_argument("--run-s", type=float, default=1.0, help="simulated work per batch run, seconds")
    ap.add_argument("--max-concurrent-runs", type=int, default=64, help="run queue limit (deploy/dagster.yaml)")
    ap.add_argument("--stagger-concurrent", type=int, default=4, help="StaggerPolicy.max_concurrent")
    ap.add_argument("--stagger-run-s", type=float, default=1.0, help="StaggerPolicy.run_s")
    ap.add_argument("--pool", type=int, default=32, help="pooled DB connections (PgBouncer stand-in); 0: one per write")


def main() -> None:
    args = parse(__doc__.splitlines()[0], extra=options)
    n = args.runs or RUNS[size_of(args)]
    policy = StaggerPolicy(max_concurrent=args.stagger_concurrent, run_s=args.stagger_run_s, jitter=0.5, seed=0)
    with PrivatePostgres.start() as pg:
        burst = run_mode(pg, "unstaggered", [0.0] * n, args)
        print(f"unstaggered: {burst}", flush=True)
        spread = run_mode(pg, "staggered", launch_offsets(n, policy), args)
        print(f"staggered:   {spread}", flush=True)
    emit(
        {
            "bench": "scale",
            "runs": n,
            "run_s": args.run_s,
            "max_concurrent_runs": args.max_concurrent_runs,
            "db_pool": args.pool,
            "stagger": {"max_concurrent": policy.max_concurrent, "run_s": policy.run_s, "jitter": policy.jitter},
            "unstaggered": burst,
            "staggered": spread,
            "peak_writes_per_s_ratio": round(spread["peak_writes_per_s"] / burst["peak_writes_per_s"], 3),
            "lost_runs": int(burst["lost_runs"] + spread["lost_runs"]),
            "peak_rss_mb": peak_rss_mb(),
        }
    )


if __name__ == "__main__":
    main()
