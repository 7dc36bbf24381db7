"""training_run downstream of a materialized `manifest`: it finds the manifest through the
upstream materialization's `path` metadata and records that manifest's lineage."""

import dagster as dg
import pytest

from robodata_dagster.defs.train.assets import training_run
from tests.core.helpers_dataset import write_manifest_of_small_episodes

pytestmark = pytest.mark.timeout(300)


def test_training_run_trains_on_the_upstream_manifest(tmp_path):
    @dg.asset(name="manifest")
    def fake_manifest() -> dg.MaterializeResult:
        write_manifest_of_small_episodes(tmp_path, 2, 2.0, b"feed", b"s1", 3)
        return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(str(tmp_path / "m.parquet"))})

    overrides = [
        "steps=2",
        "global_batch_size=4",
        "topology.nodes=1",
        "topology.gpus_per_node=2",
        "data.image_size=16",
        "data.stride_s=0.25",
        "model.cameras=[wrist]",
        "model.channels=[8]",
        "model.latent_dim=8",
        "model.hidden_dim=16",
    ]
    run_config = {"ops": {"training_run": {"config": {"run_dir": str(tmp_path / "run"), "overrides": overrides}}}}
    res = dg.materialize([fake_manifest, training_run], run_config=run_config, instance=dg.DagsterInstance.ephemeral())
    assert res.success
    md = res.asset_materializations_for_node("training_run")[0].metadata
    assert (md["manifest_hash"].value, md["spec_hash"].value, md["catalog_version"].value) == ("feed", "s1", 3)
    assert md["layout_version"].value == "v1" and md["manifest"].value == str(tmp_path / "m.parquet")
    assert md["step"].value == 2
