"""Manifests per curation spec and training per (spec, config), on the loaded code location: two
specs curated in either order each train on their own data; the lineage of the newest checkpoint
resolves through the event log alone, and `robodata lineage --episodes` lists its exact episodes."""

import dagster as dg
import polars as pl
import pytest
from typer.testing import CliRunner

from robodata.cli import app
from robodata.ingest.synth import SynthConfig, synthesize
from robodata_dagster.assets.partitions import TRAINING, training_key
from robodata_dagster.definitions import job, loaded
from robodata_dagster.lib.lineage import manifest_record, newest_checkpoint_lineage
from robodata_dagster.lib.registry import SpecDirs, register

pytestmark = pytest.mark.timeout(400)

TINY = dict(duration_s=2.0, height=32, width=32, fps=10.0, state_hz=20.0)
SPEC = (
    "version: 1\nname: {name}\nfilters:\n  - {{column: site, op: '==', value: {site}}}\nsplit: {{val_fraction: 0.0}}\n"
)
TRAIN = """
steps: 2
global_batch_size: 2
topology: {nodes: 1, gpus_per_node: 2}
model: {channels: [8], latent_dim: 8, hidden_dim: 16}
data: {image_size: 16, stride_s: 0.25}
"""


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A real catalog: 2 episodes from site-a, 3 from site-b, ingested with `robodata ingest`."""
    tmp = tmp_path_factory.mktemp("fleet")
    synthesize(SynthConfig(episodes=2, site="site-a", seed=1, **TINY), tmp / "landing")
    synthesize(SynthConfig(episodes=3, site="site-b", seed=2, **TINY), tmp / "landing")
    res = CliRunner().invoke(app, ["ingest", str(tmp / "landing"), "--root", str(tmp / "state"), "--batch", "b1"])
    assert res.exit_code == 0, res.output
    (tmp / "specs").mkdir()
    (tmp / "training").mkdir()
    for name, site in (("a", "site-a"), ("b", "site-b")):
        (tmp / "specs" / f"{name}.yaml").write_text(SPEC.format(name=name, site=site))
    (tmp / "training" / "tiny.yaml").write_text(TRAIN)
    return tmp


def _resources(fleet) -> dict:
    return {
        "catalog": {"config": {"root": str(fleet / "state")}},
        "specs": {"config": {"curation_dir": str(fleet / "specs"), "training_dir": str(fleet / "training")}},
        "manifest_io_manager": {"config": {"root": str(fleet / "state")}},
    }


def _curate(instance, fleet, spec: str) -> None:
    res = (
        loaded()
        .resolve_implicit_global_asset_job_def()
        .execute_in_process(
            instance=instance,
            partition_key=spec,
            asset_selection=[dg.AssetKey("manifest")],
            run_config={"resources": _resources(fleet)},
        )
    )
    assert res.success


def _train(instance, fleet, tmp_path, spec: str) -> dict:
    res = job("training").execute_in_process(
        instance=instance,
        partition_key=training_key(spec, "tiny"),
        run_config={
            "resources": _resources(fleet),
            "ops": {"training_run": {"config": {"run_dir": str(tmp_path / "train")}}},
        },
    )
    assert res.success
    return {k: v.value for k, v in res.asset_materializations_for_node("training_run")[0].metadata.items()}


def test_training_depends_on_its_spec_partition_by_the_partitions_definitions():
    graph = loaded().resolve_asset_graph()
    mapping = graph.get_partition_mapping(dg.AssetKey("training_run"), dg.AssetKey("manifest"))
    assert isinstance(mapping, dg.MultiToSingleDimensionPartitionMapping)
    assert graph.get(dg.AssetKey("training_run")).partitions_def == TRAINING
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("curation_spec", ["a", "b"])
        instance.add_dynamic_partitions("train_config", ["tiny"])
        upstream = mapping.get_upstream_mapped_partitions_result_for_partitions(
            TRAINING.subset_with_partition_keys([training_key("b", "tiny")]),
            TRAINING,
            graph.get(dg.AssetKey("manifest")).partitions_def,
            dynamic_partitions_store=instance,
        )
    assert set(upstream.partitions_subset.get_partition_keys()) == {"b"}


@pytest.mark.parametrize("order", [("b", "a"), ("a", "b")])
def test_two_specs_curated_in_any_order_train_on_their_own_data(fleet, tmp_path, order):
    (tmp_path / "dh").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dh")) as instance:
        added = register(instance, SpecDirs(curation_dir=str(fleet / "specs"), training_dir=str(fleet / "training")))
        assert added.added == {"curation_spec": ["a", "b"], "train_config": ["tiny"]} and added.refused == {}
        for spec in order:  # both manifests exist before either training runs
            _curate(instance, fleet, spec)
        refs = {s: manifest_record(instance, s).ref for s in ("a", "b")}
        assert refs["a"].content_hash != refs["b"].content_hash
        trained = {}
        for spec in order:
            trained[spec] = _train(instance, fleet, tmp_path, spec)
            ref = refs[spec]
            md = trained[spec]
            assert (md["manifest_partition"], md["manifest_hash"]) == (spec, ref.content_hash)
            assert md["manifest_run_id"] == ref.run_id and md["manifest"] == ref.path
            assert md["manifest_ref"] == {**ref.__dict__}  # the typed input, as loaded
            assert (md["catalog_version"], md["spec_hash"]) == (ref.catalog_version, ref.spec_hash)
            assert f"/tiny/{spec}/{ref.content_hash[:16]}/" in md["checkpoint"]  # its own run folder

        # lineage of the newest checkpoint, from the event log alone
        newest = order[-1]
        lin = newest_checkpoint_lineage(instance)
        assert lin["training_partition"] == f"{newest}|tiny" and lin["manifest_partition"] == newest
        assert lin["manifest_hash"] == refs[newest].content_hash and lin["consistent"] is True
        assert (
            lin["catalog_version"] == refs[newest].catalog_version
            and lin["checkpoint"] == trained[newest]["checkpoint"]
        )

    # the exact episodes behind that checkpoint: its manifest's rows, with their byte ranges
    out = CliRunner().invoke(app, ["lineage", trained[newest]["checkpoint"], "--episodes"])
    assert out.exit_code == 0, out.output
    header, *rows = out.stdout.strip().splitlines()
    assert header.split("\t") == ["episode_id", "split", "uri", "object_bytes", "footer_bytes"]
    assert "not all of these bytes" in out.stderr  # says what the ranges are
    manifest = pl.read_parquet(refs[newest].path)
    listed = [r.split("\t") for r in rows]
    assert sorted(r[0] for r in listed) == sorted(manifest["episode_id"].to_list())
    assert len(listed) == (2 if newest == "a" else 3)
    sizes = dict(zip(manifest["episode_id"], manifest["size_bytes"], strict=True))
    assert all(r[3] == f"0-{sizes[r[0]] - 1}" for r in listed)
