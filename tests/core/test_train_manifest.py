"""Training on the real dataset (robodata.dataset over a manifest of containers), 2 ranks:
the checkpoint and result name the manifest hash, catalog version, spec hash, layout version."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from robodata.cli import app
from tests.core.helpers_dataset import write_manifest_of_small_episodes
from tests.core.test_train_resume import run, tiny_config

pytestmark = pytest.mark.timeout(300)


def test_train_on_a_manifest_records_its_lineage(tmp_path):
    mpath = write_manifest_of_small_episodes(tmp_path, 2, 3.0, b"c0ffee", b"spec42", 7)
    cfg = tiny_config(
        tmp_path / "run",
        steps=4,
        global_batch_size=4,
        topology__nodes=1,
        topology__gpus_per_node=2,
        data__kind="manifest",
        data__manifest=str(mpath),
        data__stride_s=0.25,
        model__cameras=["cam_left", "wrist"],
    )
    run(cfg, tmp_path)
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["step"] == 4 and result["complete"]
    lin = result["lineage"]
    assert (lin["manifest_hash"], lin["spec_hash"], lin["catalog_version"], lin["layout_version"]) == (
        "c0ffee",
        "spec42",
        7,
        "v1",
    )
    # 24 samples (2 episodes x 12 anchors): after 4 steps of 4, 16 taken in epoch 0
    assert (lin["sampler_position"]["epoch"], lin["sampler_position"]["global_position"]) == (0, 16)
    assert lin["sampler_position"]["num_samples"] == 24
    out = CliRunner().invoke(app, ["lineage", str(tmp_path / "run")])
    assert out.exit_code == 0, out.output
    assert "manifest_hash: c0ffee" in out.output and "catalog_version: 7" in out.output
    assert "layout_version: v1" in out.output and "spec_hash: spec42" in out.output
