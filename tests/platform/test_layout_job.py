"""The layout_plan asset and the relayout job on a real Delta catalog (in-process Dagster)."""

import dagster as dg
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from robodata.catalog.schema import CATALOG_SCHEMA
from robodata.container import EpisodeReader
from robodata.container.plan import LayoutPlan
from tests.core.helpers_container import small_layout, write_small
from tests.core.test_layout_relayout import DAY, _row


def test_plan_asset_then_relayout_job_flips_the_catalog(tmp_path):
    from robodata_dagster.assets.layout import layout_plan
    from robodata_dagster.jobs.layout import relayout_job
    from robodata_dagster.relayout import catalog_days

    eps = tmp_path / "eps"
    eps.mkdir()
    p = eps / "ep0.rdep"
    write_small(p, duration_s=3.0, fps=20.0, layout=small_layout(gop=20, camera_span_s=1.0), h=48, w=64)
    uri = str(tmp_path / "catalog")
    write_deltalake(uri, pa.Table.from_pylist([_row(str(p), "ep0")], schema=CATALOG_SCHEMA), partition_by=["day"])
    adv = tmp_path / "adv.yaml"
    adv.write_text(
        "gops: [2, 20]\ncrfs: [23]\ncamera_spans_s: [1.0]\narray_spans_s: [2.0]\nsamples: 4\n"
        "rounds: 1\nverify_top: 1\nmin_psnr_db: 20.0\n"
    )
    plan_path = str(tmp_path / "plan.json")
    res = dg.materialize(
        [layout_plan],
        run_config={
            "ops": {
                "layout_plan": {
                    "config": {
                        "pattern": "vla",
                        "catalog_uri": uri,
                        "sample": 1,
                        "advisor_yaml": str(adv),
                        "plan_path": plan_path,
                    }
                }
            }
        },
    )
    assert res.success
    plan = LayoutPlan.load(plan_path)
    md = res.get_asset_materialization_events()[0].materialization.metadata
    assert md["layout_version"].value == plan.version

    instance = dg.DagsterInstance.ephemeral()
    assert catalog_days(uri) == [DAY]
    instance.add_dynamic_partitions("relayout_day", [DAY])
    from robodata_dagster.definitions import loaded

    job = loaded().resolve_job_def(relayout_job.name)
    cfg = {"ops": {"relaid_containers": {"config": {"catalog_uri": uri, "plan_path": plan_path}}}}
    out = job.execute_in_process(instance=instance, run_config=cfg, partition_key=DAY)
    assert out.success
    md = out.get_asset_materialization_events()[0].materialization.metadata
    assert md["relaid"].value == 1 and md["pointers_flipped"].value == 1
    row = DeltaTable(uri).to_pyarrow_table().to_pylist()[0]
    r = EpisodeReader.open(row["uri"], row["footer_offset"], row["footer_length"])
    old = EpisodeReader.open(str(p))  # the old object is still there, in its old layout
    assert row["layout_version"] == r.layout_version == plan.layout_for(r.meta).version != old.layout_version
    assert row["uri"] != str(p)
