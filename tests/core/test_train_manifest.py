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


def test_train_on_a_manifest_mixing_corpora_reads_it_by_role(tmp_path):
    """data.mix_pattern: the run reads a MixedDataset (cameras by role, state / action padded to the
    manifest's widest) through the same sampler and loader."""
    from bench.mixing_data import ALIASES, build
    from robodata.catalog.table import Catalog
    from robodata.curate.run import curate
    from robodata.curate.spec import spec_from_dict

    cat = Catalog(str(tmp_path / "cat"))
    cat.backfill(build(tmp_path / "eps", 1, 3.0))  # aloha 14-d, bridge 7-d, pusht 2-d, go2 12-d (no camera)
    spec = {"version": 1, "name": "mixtrain", "mix": {"by": "source_dataset"}, "split": {"val_fraction": 0}}
    info, _ = curate(spec_from_dict(spec), cat, tmp_path / "m")
    pattern = {"name": "mix", "hz": 10, "cameras": {"front": ALIASES["front"]}, "camera": {"length": 2}}
    pattern |= {"state": {"length": 1}, "action": {"length": 4}, "resize": [16, 16], "anchor_stride_s": 0.5}
    cfg = tiny_config(
        tmp_path / "run",
        steps=2,
        global_batch_size=4,
        topology__nodes=1,
        topology__gpus_per_node=2,
        data__kind="manifest",
        data__manifest=str(info.path),
        data__mix_pattern=pattern,
        model__cameras=["front"],
        model__state_key="state",
        model__action_key="action",
        model__state_dim=14,
        model__action_dim=14,
    )
    run(cfg, tmp_path)
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["step"] == 2 and result["complete"]
    assert result["lineage"]["manifest_hash"] == info.content_hash
    from robodata.errors import ConfigError
    from robodata.train.config import config_from_dict

    with pytest.raises(ConfigError, match="data.pattern and data.mix_pattern"):
        config_from_dict(cfg | {"data": cfg["data"] | {"pattern": {"name": "x", "windows": []}}})


def test_a_rank_reads_its_manifest_once(tmp_path, monkeypatch):
    """The rank's data source reads the manifest with one open; its lineage comes from that read
    (the schema's key-value metadata and the layout_version column), not from a second open."""
    import fsspec

    from robodata.train.config import config_from_dict
    from robodata.train.manifest_source import build_manifest_source

    mpath = str(write_manifest_of_small_episodes(tmp_path, 2, 3.0, b"c0ffee", b"spec42", 7))
    cfg = tiny_config(
        tmp_path / "run",
        global_batch_size=4,
        data__kind="manifest",
        data__manifest=mpath,
        data__stride_s=0.25,
        model__cameras=["cam_left", "wrist"],
    )
    opened: list[str] = []
    real_open = fsspec.open

    def counting_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(fsspec, "open", counting_open)
    source = build_manifest_source(config_from_dict(cfg), rank=0, world_size=1)
    assert opened.count(mpath) == 1, opened
    lin = source.lineage
    assert (lin["manifest_hash"], lin["spec_hash"], lin["catalog_version"], lin["layout_version"]) == (
        "c0ffee",
        "spec42",
        7,
        "v1",
    )
