"""The training_run asset: same code path as the CLI, resumes on rerun, records lineage."""

import dagster as dg
import pytest

from robodata_dagster.assets.partitions import CURATION_SPECS
from robodata_dagster.assets.training import training_run
from robodata_dagster.resources.catalog import SpecsResource
from robodata_dagster.resources.manifests import ManifestRefIOManager

# the upstream manifest, as training_run sees it when only it is materialized (its ref loads as None)
MANIFEST = dg.AssetSpec("manifest", partitions_def=CURATION_SPECS)

pytestmark = pytest.mark.timeout(400)

TINY = """
steps: 4
global_batch_size: 4
topology: {nodes: 1, gpus_per_node: 2}
data: {episodes: 16, image_size: 16}
model: {channels: [8], latent_dim: 8, hidden_dim: 16}
checkpoint: {every_steps: 2}
"""


def tiny_training(tmp_path, instance, config: str = TINY, name: str = "tiny") -> dict:
    """Resources for training_run with a training config `name` and the partitions registered."""
    (tmp_path / "training").mkdir(exist_ok=True)
    (tmp_path / "training" / f"{name}.yaml").write_text(config)
    instance.add_dynamic_partitions("curation_spec", ["s"])
    instance.add_dynamic_partitions("train_config", [name])
    refs = ManifestRefIOManager(root=str(tmp_path / "state"))
    return {"specs": SpecsResource(training_dir=str(tmp_path / "training")), "manifest_io_manager": refs}


def _run(tmp_path, instance, resources, *, own_data=True, key="s|tiny", **kw):
    cfg = {"run_dir": str(tmp_path / "run"), "use_upstream_manifest": not own_data}
    return dg.materialize(
        [training_run, MANIFEST],
        run_config={"ops": {"training_run": {"config": cfg}}},
        instance=instance,
        resources=resources,
        partition_key=key,
        **kw,
    )


def test_training_run_materializes_with_lineage_and_a_rerun_resumes(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    resources = tiny_training(tmp_path, instance)
    res = _run(tmp_path, instance, resources)
    assert res.success
    md = res.asset_materializations_for_node("training_run")[0].metadata
    assert md["step"].value == 4 and md["manifest_hash"].value == "synthetic-16x16-seed0"
    assert (md["manifest_partition"].value, md["train_config"].value) == ("s", "tiny")
    assert md["code_version"].value.startswith(("git:", "robodata=="))
    assert md["sampler_position"].value["global_position"] == 16
    assert 0 < md["goodput_fraction"].value <= 1 and md["resumed_from"].value == "None"
    run_dir = tmp_path / "run" / "tiny" / "s" / "own-data"  # <config>/<spec>/<data>: one folder per partition
    assert (run_dir / "checkpoints" / "step-00000004" / "COMPLETE").exists()
    assert "steps: 4" in (run_dir / "config.yaml").read_text()  # the resolved config, kept

    again = _run(tmp_path, instance, resources)
    md2 = again.asset_materializations_for_node("training_run")[0].metadata
    assert md2["resumed_from"].value.endswith("step-00000004") and md2["step"].value == 4


@pytest.mark.parametrize(
    "config, own_data, why",
    [
        (TINY, False, "manifest partition 's' was never materialized"),
        (TINY + "run_dir: /elsewhere\n", True, "run_dir is set by training_run"),
        (TINY.replace("steps: 4", "steps: 0"), True, "steps must be >= 1"),
    ],
)
def test_a_bad_training_setup_fails_clearly_without_retrying(tmp_path, config, own_data, why):
    instance = dg.DagsterInstance.ephemeral()
    resources = tiny_training(tmp_path, instance, config)
    res = _run(tmp_path, instance, resources, own_data=own_data, raise_on_error=False)
    assert not res.success
    kinds = [e.event_type_value for e in res.all_events]
    assert "STEP_UP_FOR_RETRY" not in kinds  # the asset has a RetryPolicy; a ConfigError skips it
    failure = [e for e in res.all_events if e.event_type_value == "STEP_FAILURE"]
    assert len(failure) == 1 and why in str(failure[0].event_specific_data.error)
    assert not (tmp_path / "run").exists()
