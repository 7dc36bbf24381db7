"""The downstream half of the graph on an S3 root (moto on loopback): the `curate_and_train` job
reads the catalog and containers that ingestion wrote to s3://bucket/state, writes the manifest and
the site-acceptance table there, and trains with its checkpoints on S3; a second run on a fresh
working dir (a new pod) resumes from the S3 checkpoint. Locally only scratch is used."""

import json
import os
import uuid
from pathlib import Path

import dagster as dg
import fsspec
import pytest
from deltalake import DeltaTable

pytestmark = pytest.mark.timeout(300)

REPO = Path(__file__).resolve().parents[2]
TINY = dict(duration_s=2.0, height=32, width=32, fps=10.0, state_hz=20.0)
TRAIN = [
    "global_batch_size=2",
    "checkpoint.every_steps=2",
    "log_every=2",
    "topology.nodes=1",
    "topology.gpus_per_node=2",
    "model.channels=[8]",
    "model.latent_dim=8",
    "model.hidden_dim=16",
    "data.image_size=16",
    "data.stride_s=0.25",
]


@pytest.fixture
def s3(monkeypatch, tmp_path):
    from robodata_testing.services import LoopbackS3

    with LoopbackS3.start(f"train-{uuid.uuid4().hex[:12]}") as srv:  # moto state is per process
        for k, v in srv.env().items():  # as prod: AWS_* in the environment
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("ROBODATA_SCRATCH", str(tmp_path / "scratch"))
        yield srv


def _ingest_to_s3(s3, tmp_path, root: str) -> None:
    from typer.testing import CliRunner

    from robodata.cli import app
    from robodata.ingest.synth import SynthConfig, synthesize

    synthesize(SynthConfig(episodes=3, **TINY), tmp_path / "src")
    fs = fsspec.filesystem("s3", **s3.location().fsspec_options())
    fs.put(f"{tmp_path / 'src'}/", f"s3://{s3.bucket}/landing/", recursive=True)
    res = CliRunner().invoke(app, ["ingest", f"s3://{s3.bucket}/landing", "--root", root, "--batch", "b1"])
    assert res.exit_code == 0, res.output


def _run(instance, root: str, run_dir: Path, steps: int):
    """manifest[demo], site_acceptance and training_run[demo|demo] (the repo's specs/), as a user runs them."""
    from robodata_dagster.assets.partitions import training_key
    from robodata_dagster.definitions import job, loaded
    from robodata_dagster.lib.registry import SpecDirs, register

    dirs = {"curation_dir": str(REPO / "specs" / "curation"), "training_dir": str(REPO / "specs" / "training")}
    register(instance, SpecDirs(**dirs))
    resources = {
        "catalog": {"config": {"root": root}},
        "specs": {"config": dirs},
        "manifest_io_manager": {"config": {"root": root}},
    }
    train = {
        "run_dir": str(run_dir),
        "checkpoint_root": f"{root}/train/checkpoints",
        "overrides": [f"steps={steps}", f"data.cache_dir={run_dir.parent / 'cache'}", *TRAIN],
    }
    accept = {"config": str(REPO / "specs" / "site_acceptance.yaml")}
    assets = loaded().resolve_implicit_global_asset_job_def()
    runs = [
        (assets, {"partition_key": "demo", "asset_selection": [dg.AssetKey("manifest")]}, {}),
        (assets, {"asset_selection": [dg.AssetKey("site_acceptance")]}, {"site_acceptance": {"config": accept}}),
        (job("training"), {"partition_key": training_key("demo", "demo")}, {"training_run": {"config": train}}),
    ]
    out = {}
    for target, kwargs, ops in runs:
        res = target.execute_in_process(
            instance=instance, run_config={"resources": resources, "ops": ops}, raise_on_error=False, **kwargs
        )
        assert res.success, [e.message for e in res.all_events if e.is_failure]
        out.update(
            {
                ev.asset_key.to_user_string(): {k: v.value for k, v in ev.materialization.metadata.items()}
                for ev in res.get_asset_materialization_events()
            }
        )
    return out


def test_curate_and_train_on_s3_resumes_from_s3_checkpoint(s3, tmp_path, monkeypatch):
    from robodata.curate.manifest import read_manifest
    from robodata.storage import objects
    from robodata.train.lineage import read_checkpoint_meta

    root = f"s3://{s3.bucket}/state"
    opts = s3.location().fsspec_options()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # a relative path written by mistake lands here
    _ingest_to_s3(s3, tmp_path, root)
    scratch = tmp_path / "scratch"
    with dg.instance_for_test() as instance:
        first = _run(instance, root, scratch / "run1", steps=4)
        # the manifest: an immutable object on S3, named by and matching its content hash
        m = first["manifest"]
        path, digest = m["path"], m["content_hash"]
        assert path.startswith(f"{root}/manifests/demo-{digest[:16]}") and path.endswith(".parquet")
        assert read_manifest(path, verify=True, storage_options=opts).num_rows == m["episodes"] >= 2
        # the acceptance table on S3
        acc = DeltaTable(f"{root}/catalog/site_acceptance", storage_options=s3.location().delta_options())
        assert acc.to_pyarrow_table()["episodes"].to_pylist() and first["site_acceptance"]["episodes_evaluated"] == 3
        # the checkpoint on S3, with the lineage of the manifest it was trained on
        t = first["training_run"]
        ckroot = f"{root}/train/checkpoints/demo/demo/{digest[:16]}"  # <config>/<spec>/<manifest>
        assert t["checkpoint"] == f"{ckroot}/step-00000004" and t["step"] == 4 and t["resumed_from"] == "None"
        meta = read_checkpoint_meta(t["checkpoint"], opts)
        assert meta["lineage"]["manifest_hash"] == digest == t["manifest_hash"]
        assert meta["lineage"]["catalog_version"] == m["catalog_version"] == t["catalog_version"]
        marker = json.loads(objects.read_bytes(f"{t['checkpoint']}/COMPLETE", opts))
        assert {".metadata", "meta.json", "__0_0.distcp", "__1_0.distcp"} <= set(marker["files"])

        # a fresh working dir (a new pod): same manifest object, training resumes from S3
        second = _run(instance, root, scratch / "run2", steps=6)
        assert second["manifest"]["path"] == path and second["manifest"]["content_hash"] == digest
        t2 = second["training_run"]
        assert t2["resumed_from"] == f"{ckroot}/step-00000004" and t2["step"] == 6
        assert t2["checkpoint"] == f"{ckroot}/step-00000006" and t2["manifest_hash"] == digest

    fs = objects.filesystem(root, opts)
    steps = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(ckroot.removeprefix("s3://"), detail=False))
    assert steps == ["step-00000002", "step-00000004", "step-00000006"]  # keep=3, no partials
    assert not any(p.endswith((".partial", ".tmp")) for p in fs.find(f"{s3.bucket}/state"))
    # local disk: nothing outside scratch; in scratch only working dirs and the page cache, no checkpoint
    assert os.listdir(cwd) == [] and sorted(os.listdir(tmp_path)) == ["cwd", "scratch", "src"]
    assert sorted(os.listdir(scratch)) == ["cache", "run1", "run2"]
    local = [p.name for p in scratch.rglob("*") if p.is_file()]
    assert not [n for n in local if n.endswith((".distcp", ".parquet")) or n in ("COMPLETE", ".metadata")]
