import json

import dagster as dg

from robodata.ingest.synth import SynthConfig, synthesize


def test_landing_zone_sensor_requests_batch_partitions_and_runs(tmp_path, monkeypatch):
    from robodata_dagster.defs.ingest.sensors import landing_zone_sensor

    land = tmp_path / "landing"
    synthesize(SynthConfig(episodes=3, duration_s=0.5, height=16, width=16, fps=4.0, state_hz=10.0), land)
    monkeypatch.setenv("ROBODATA_ROOT", str(tmp_path / "state"))
    monkeypatch.setenv("ROBODATA_LANDING", str(land))
    monkeypatch.setenv("ROBODATA_BATCH_ITEMS", "2")
    monkeypatch.setenv("ROBODATA_RUN_S", "0")
    monkeypatch.setenv("ROBODATA_SETTLE_S", "0")
    with dg.instance_for_test() as instance:
        res = landing_zone_sensor(dg.build_sensor_context(instance=instance))
        (req,) = res.dynamic_partitions_requests
        assert len(req.partition_keys) == 2  # 3 episodes, at most 2 per batch
        assert [r.partition_key for r in res.run_requests] == list(req.partition_keys)
        assert res.run_requests[0].run_config["resources"]["ingest"]["config"]["root"] == str(tmp_path / "state")
        for k in req.partition_keys:
            assert (tmp_path / "state" / "ingest" / "batches" / f"{k}.json").exists()
        again = landing_zone_sensor(dg.build_sensor_context(instance=instance, cursor=res.cursor))
        assert not again.run_requests and not again.dynamic_partitions_requests
        assert json.loads(again.cursor)["landing"]["watermark"] > 0
