"""The leftovers_sweep maintenance job runs robodata.ingest.sweep over the ingest root (issue 44)."""

from __future__ import annotations

import os
import time

from robodata.catalog.table import Catalog
from robodata.ingest.tables import IngestPaths
from robodata.storage import objects


def test_leftovers_sweep_job_dry_run_then_removes_an_old_unreferenced_object(tmp_path, monkeypatch):
    from robodata_dagster.jobs.maintenance import leftovers_sweep, leftovers_sweep_schedule
    from robodata_dagster.resources.ingest import IngestResource

    monkeypatch.setenv("ROBODATA_SCRATCH", str(tmp_path / "scratch"))
    paths = IngestPaths(str(tmp_path / "state"))
    stray, kept = paths.container("b1", "ep-a"), paths.container("b1", "ep-b")
    old = time.time() - 3 * 3600
    for uri in (stray, kept):
        objects.write_bytes(uri, b"RDEP", {})
        os.utime(uri, (old, old))
    Catalog(paths.catalog).merge([{"episode_id": "ep-b", "uri": kept, "qc_status": "quarantined"}])
    resources = {"ingest": IngestResource(root=paths.root)}

    def run(dry: bool):
        config = {"ops": {"sweep_leftovers": {"config": {"grace_hours": 1.0, "dry_run": dry}}}}
        res = leftovers_sweep.execute_in_process(resources=resources, run_config=config)
        assert res.success
        (mat,) = [e for e in res.all_events if e.event_type_value == "STEP_OUTPUT"]
        return mat.event_specific_data.metadata

    meta = run(True)
    assert meta["orphans"].value == 1 and meta["deleted"].value == 0 and os.path.exists(stray)
    meta = run(False)
    assert meta["deleted"].value == 1 and not os.path.exists(stray) and os.path.exists(kept)
    assert leftovers_sweep.tags["robodata/run-kind"] == "maintenance"
    assert leftovers_sweep_schedule.job_name == "leftovers_sweep"
