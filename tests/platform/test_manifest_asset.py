from datetime import UTC

import dagster as dg
import polars as pl

from robodata.catalog import order
from robodata.catalog.table import Catalog
from robodata_dagster.assets.curation import manifest, site_acceptance
from robodata_dagster.resources.catalog import CatalogResource, SpecsResource
from robodata_dagster.resources.manifests import ManifestRefIOManager
from robodata_testing import synthetic_catalog as synthetic

SPEC = """
version: 1
name: asset-test  # the partition key: specs/asset-test.yaml
filters:
  - {column: qc_status, op: "==", value: pass}
mix: {by: site, weights: {sfo-1: 2}}
split: {val_fraction: 0.1, salt: a}
"""
ACCEPT = """
version: 1
default: {criteria: {min_quality: 0.8}, target_passes_per_shift: 2}
sites:
  sfo-1: {timezone: America/Los_Angeles, target_passes_per_shift: 1}
"""


def _run(tmp_path, resource, instance):
    resources = {
        "catalog": resource,
        "specs": SpecsResource(curation_dir=str(tmp_path / "specs")),
        "manifest_io_manager": ManifestRefIOManager(root=str(tmp_path / "state")),
    }
    res = dg.materialize(
        [manifest], resources=resources, instance=instance, partition_key="asset-test", selection=[manifest]
    )
    acc = dg.materialize(
        [site_acceptance],
        resources=resources,
        instance=instance,
        run_config={"ops": {"site_acceptance": {"config": {"config": str(tmp_path / "accept.yaml")}}}},
    )
    assert res.success and acc.success
    return res, acc


def test_manifest_asset_records_provenance_and_data_version(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "asset-test.yaml").write_text(SPEC)
    (tmp_path / "accept.yaml").write_text(ACCEPT)
    shape = synthetic.FleetShape(rows_per_day=150, robots_per_site=2)
    cat = Catalog(str(tmp_path / "catalog"))
    cat.merge(synthetic.rows(shape, 0, 450))
    resource = CatalogResource(
        uri=cat.uri, manifests_dir=str(tmp_path / "manifests"), acceptance_uri=str(tmp_path / "acceptance")
    )
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("curation_spec", ["asset-test"])
        res, acc_res = _run(tmp_path, resource, instance)
        mat = res.asset_materializations_for_node("manifest")[0]
        md = mat.metadata
        content_hash = md["content_hash"].value
        assert content_hash[:16] in md["path"].value
        assert md["catalog_version"].value == cat.version()
        assert md["episodes"].value == pl.read_parquet(md["path"].value).height > 0
        assert md["evaluated_by"].value.startswith("plain scan")  # a version-1 spec
        mixture = md["mixture"].value  # per corpus (the synthetic fleet names none: "unknown")
        assert sum(c["episodes"] for c in mixture.values()) == md["episodes"].value
        assert mat.tags["dagster/data_version"] == content_hash
        assert mat.partition == "asset-test" and md["spec"].value == str(tmp_path / "specs" / "asset-test.yaml")

        acc = acc_res.asset_materializations_for_node("site_acceptance")[0].metadata
        assert acc["episodes_evaluated"].value == 450
        assert acc["yield_plot"].value.startswith("![yield vs target](data:image/png;base64,")
        table = pl.read_delta(str(tmp_path / "acceptance"))
        assert table["episodes"].sum() == 450
        assert (table["passes"] <= table["episodes"]).all()

        # unchanged catalog: same manifest, same data version; acceptance has nothing new
        res2, acc2 = _run(tmp_path, resource, instance)
        mat2 = res2.asset_materializations_for_node("manifest")[0]
        assert mat2.tags["dagster/data_version"] == content_hash
        assert acc2.asset_materializations_for_node("site_acceptance")[0].metadata["episodes_evaluated"].value == 0

        # new episodes: new manifest version; acceptance evaluates only the new day's shifts
        cat.merge(synthetic.rows(shape, 450, 150))
        res3, acc3_res = _run(tmp_path, resource, instance)
        assert res3.asset_materializations_for_node("manifest")[0].tags["dagster/data_version"] != content_hash
        acc3 = acc3_res.asset_materializations_for_node("site_acceptance")[0].metadata
        assert acc3["days_evaluated"].value == ["2024-01-04"]
        assert pl.read_delta(str(tmp_path / "acceptance"))["episodes"].sum() == 600


def test_a_spec_whose_name_is_not_its_partition_fails_clearly_without_retry(tmp_path):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "other.yaml").write_text(SPEC)  # name: asset-test
    cat = Catalog(str(tmp_path / "catalog"))
    cat.merge(synthetic.rows(synthetic.FleetShape(rows_per_day=20), 0, 20))
    resources = {
        "catalog": CatalogResource(uri=cat.uri, manifests_dir=str(tmp_path / "m")),
        "specs": SpecsResource(curation_dir=str(tmp_path / "specs")),
        "manifest_io_manager": ManifestRefIOManager(root=str(tmp_path / "state")),
    }
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("curation_spec", ["other", "missing"])
        for key, why in (("other", "must match the file name"), ("missing", "no file")):
            res = dg.materialize(
                [manifest], resources=resources, instance=instance, partition_key=key, raise_on_error=False
            )
            (failure,) = [e for e in res.all_events if e.event_type_value == "STEP_FAILURE"]
            assert why in str(failure.event_specific_data.error)


def test_catalog_compaction_job(tmp_path):
    from datetime import datetime

    from robodata_dagster.jobs.maintenance import catalog_compaction

    cat = Catalog(str(tmp_path / "catalog"))
    today = datetime.now(UTC).date().isoformat()
    shape = synthetic.FleetShape(rows_per_day=1000, start_day=today)
    for start in range(0, 150, 50):
        cat.merge(synthetic.rows(shape, start, 50))  # 3 merges into today's partition
    before = len(cat.table().file_uris())
    config = {"ops": {"compact_recent_days": {"config": {"split_salt": "s1"}}}}
    res = catalog_compaction.execute_in_process(resources={"catalog": CatalogResource(uri=cat.uri)}, run_config=config)
    assert res.success
    assert len(cat.table().file_uris()) < before
    assert pl.read_delta(cat.uri).height == 150
    assert order.ordered_salt(cat.table()) == "s1"  # the job's split_salt: the table's budget order


MIX_SPEC = """
version: 1
name: mix-test
mix: {by: source_dataset, weights: {aloha_sim: 2}}
cameras: {front: [image, image_0]}   # the corpora whose camera names say no role
split: {val_fraction: 0}
"""


def test_manifest_asset_shows_the_mixture_per_corpus_with_the_roles_found(tmp_path):
    from bench.mixing_data import build

    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "mix-test.yaml").write_text(MIX_SPEC)
    cat = Catalog(str(tmp_path / "catalog"))
    cat.backfill(build(tmp_path / "eps", 2, 3.0))  # four corpora: aloha_sim, bridge, pusht, go2
    resources = {
        "catalog": CatalogResource(uri=cat.uri, manifests_dir=str(tmp_path / "manifests")),
        "specs": SpecsResource(curation_dir=str(tmp_path / "specs")),
        "manifest_io_manager": ManifestRefIOManager(root=str(tmp_path / "state")),
    }
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("curation_spec", ["mix-test"])
        res = dg.materialize([manifest], resources=resources, instance=instance, partition_key="mix-test")
        assert res.success
        mixture = res.asset_materializations_for_node("manifest")[0].metadata["mixture"].value
    assert sorted(mixture) == ["aloha_sim", "bridge", "go2", "pusht"]
    for corpus in mixture.values():
        assert corpus["episodes"] == 2 and abs(corpus["hours"] - 2 * 3.0 / 3600) < 1e-3
    assert mixture["aloha_sim"]["camera_roles"] == ["front", "wrist"]  # from the names
    assert mixture["bridge"]["camera_roles"] == ["front"] and "cameras_without_role" not in mixture["bridge"]  # alias
    assert mixture["go2"]["state_streams"] == ["joint_pos"] and "camera_roles" not in mixture["go2"]
    assert mixture["bridge"]["robot_types"] == ["widowx"] and mixture["pusht"]["formats"] == ["zarr"]
