import json

import dagster as dg

from robodata.ingest.synth import SynthConfig, synthesize
from robodata_dagster.resources.ingest import (
    BatchConfig,
    IngestResource,
    LandingResource,
    LaunchConfig,
    StaggerConfig,
)
from robodata_dagster.sensors.ingest import landing_zone_sensor


def test_landing_zone_sensor_requests_batch_partitions_and_runs(tmp_path, monkeypatch):
    land = tmp_path / "landing"
    synthesize(SynthConfig(episodes=3, duration_s=0.5, height=16, width=16, fps=4.0, state_hz=10.0), land)
    monkeypatch.setenv("ROBODATA_STORAGE_ROOT", str(tmp_path / "state"))  # read at tick time, not at import
    monkeypatch.setenv("ROBODATA_LANDING", str(land))
    launch = LaunchConfig(batch=BatchConfig(max_items=2, settle_s=0), stagger=StaggerConfig(run_s=0))
    resources = {"ingest": IngestResource(), "landing": LandingResource(bulk=launch)}
    with dg.instance_for_test() as instance:
        res = landing_zone_sensor(dg.build_sensor_context(instance=instance, resources=resources))
        (req,) = res.dynamic_partitions_requests
        assert len(req.partition_keys) == 2  # 3 episodes, at most 2 per batch
        assert [r.partition_key for r in res.run_requests] == list(req.partition_keys)
        cfg = res.run_requests[0].run_config["resources"]["ingest"]["config"]
        assert cfg == {"bulk": True, "root": str(tmp_path / "state")}
        for k in req.partition_keys:
            assert (tmp_path / "state" / "ingest" / "batches" / f"{k}.json").exists()
        again = landing_zone_sensor(dg.build_sensor_context(instance=instance, cursor=res.cursor, resources=resources))
        assert not again.run_requests and not again.dynamic_partitions_requests
        assert json.loads(again.cursor)["landing"]["watermark"] > 0
