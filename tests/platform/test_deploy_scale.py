"""bench.scale's simulation on a real Postgres instance: every submitted run is accounted for."""

import argparse

from bench.scale import run_mode, writes_per_second
from robodata.ingest.landing.stagger import StaggerPolicy, launch_offsets
from tests.platform.deploy_support import postgres


def test_simulated_batch_runs_all_succeed_and_writes_are_counted():
    pg = postgres()
    args = argparse.Namespace(run_s=0.05, max_concurrent_runs=4, pool=4)
    offsets = launch_offsets(6, StaggerPolicy(max_concurrent=6, run_s=0.3, jitter=0.5))
    res = run_mode(pg, "testmode", offsets, args)
    assert res["lost_runs"] == 0 and res["errors"] == 0, res["first_error"]
    # one run row + ENQUEUED, STARTING, START, engine event, materialization, SUCCESS per run
    assert res["writes"] == 6 * 7 == sum(writes_per_second(pg, "bench_testmode").values())
    assert 1 <= res["peak_writes_per_s"] <= res["writes"]
