"""training_run downstream of a materialized `manifest`: it finds the manifest through the
upstream materialization's `path` metadata and records that manifest's lineage."""

import os

import dagster as dg
import pyarrow.parquet as pq
import pytest

from assets.training import training_run
from robodata.catalog.schema import (MANIFEST_META_CATALOG_VERSION, MANIFEST_META_CONTENT_HASH,
                                     MANIFEST_META_SPEC_HASH)
from robodata.container import EpisodeReader
from tests.core.helpers_container import write_small
from tests.core.helpers_dataset import manifest as manifest_table

pytestmark = pytest.mark.timeout(300)


def test_training_run_trains_on_the_upstream_manifest(tmp_path):
    @dg.asset(name="manifest")
    def fake_manifest() -> dg.MaterializeResult:
        paths = []
        for i in range(2):
            p = tmp_path / f"ep{i}.rdep"
            write_small(p, duration_s=2.0)
            paths.append(str(p))
        hints = [(EpisodeReader.open(p).footer_offset, EpisodeReader.open(p).footer_length) for p in paths]
        table = manifest_table(paths, [2.0, 2.0], sizes=[os.path.getsize(p) for p in paths], footers=hints)
        table = table.replace_schema_metadata({MANIFEST_META_CONTENT_HASH: b"feed", MANIFEST_META_SPEC_HASH: b"s1",
                                               MANIFEST_META_CATALOG_VERSION: b"3"})
        pq.write_table(table, tmp_path / "m.parquet")
        return dg.MaterializeResult(metadata={"path": dg.MetadataValue.path(str(tmp_path / "m.parquet"))})

    overrides = ["steps=2", "global_batch_size=4", "topology.nodes=1", "topology.gpus_per_node=2",
                 "data.image_size=16", "data.stride_s=0.25", "model.cameras=[wrist]", "model.channels=[8]",
                 "model.latent_dim=8", "model.hidden_dim=16"]
    run_config = {"ops": {"training_run": {"config": {"run_dir": str(tmp_path / "run"), "overrides": overrides}}}}
    res = dg.materialize([fake_manifest, training_run], run_config=run_config,
                         instance=dg.DagsterInstance.ephemeral())
    assert res.success
    md = res.asset_materializations_for_node("training_run")[0].metadata
    assert (md["manifest_hash"].value, md["spec_hash"].value, md["catalog_version"].value) == ("feed", "s1", 3)
    assert md["layout_version"].value == "v1" and md["manifest"].value == str(tmp_path / "m.parquet")
    assert md["step"].value == 2
