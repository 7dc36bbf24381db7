"""The training_run asset: same code path as the CLI, resumes on rerun, records lineage."""

import dagster as dg
import pytest

from robodata_dagster.defs.train.assets import training_run

pytestmark = pytest.mark.timeout(400)


def _run_config(tmp_path, **extra):
    overrides = [
        "steps=4",
        "global_batch_size=4",
        "topology.nodes=1",
        "topology.gpus_per_node=2",
        "data.episodes=16",
        "data.image_size=16",
        "model.channels=[8]",
        "model.latent_dim=8",
        "model.hidden_dim=16",
        "checkpoint.every_steps=2",
    ]
    cfg = {"run_dir": str(tmp_path / "run"), "overrides": overrides, "use_upstream_manifest": False, **extra}
    return {"ops": {"training_run": {"config": cfg}}}


def test_training_run_materializes_with_lineage_and_a_rerun_resumes(tmp_path):
    instance = dg.DagsterInstance.ephemeral()
    res = dg.materialize([training_run], run_config=_run_config(tmp_path), instance=instance)
    assert res.success
    md = res.asset_materializations_for_node("training_run")[0].metadata
    assert md["step"].value == 4 and md["manifest_hash"].value == "synthetic-16x16-seed0"
    assert md["code_version"].value.startswith(("git:", "robodata=="))
    assert md["sampler_position"].value["global_position"] == 16
    assert 0 < md["goodput_fraction"].value <= 1 and md["resumed_from"].value == "None"
    assert (tmp_path / "run" / "checkpoints" / "step-00000004" / "COMPLETE").exists()
    assert "steps: 4" in (tmp_path / "run" / "config.yaml").read_text()  # the resolved config, kept

    again = dg.materialize([training_run], run_config=_run_config(tmp_path), instance=instance)
    md2 = again.asset_materializations_for_node("training_run")[0].metadata
    assert md2["resumed_from"].value.endswith("step-00000004") and md2["step"].value == 4


def test_training_run_without_a_manifest_fails_clearly_without_retrying(tmp_path):
    cfg = _run_config(tmp_path, use_upstream_manifest=True)
    res = dg.materialize([training_run], run_config=cfg, instance=dg.DagsterInstance.ephemeral(), raise_on_error=False)
    assert not res.success
    failure = [e for e in res.all_events if e.event_type_value == "STEP_FAILURE"]
    assert len(failure) == 1 and "never materialized" in str(failure[0].event_specific_data.error)
    assert not (tmp_path / "run").exists()
