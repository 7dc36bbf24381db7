"""The catalog and curation against a real S3 API (moto on loopback)."""

import polars as pl

from robodata.catalog.maintenance import OptimizeConfig, optimize
from robodata.catalog.table import Catalog, CatalogConfig
from robodata.curate import ordered
from robodata.curate.run import curate
from robodata.curate.select import evaluate, select
from robodata.curate.spec import spec_from_dict
from robodata_testing import synthetic_catalog as synthetic
from tests.core.s3_server import moto_s3
from tests.core.test_curate_ordered import SPEC


def test_merge_and_curate_on_s3(tmp_path):
    with moto_s3() as s3:
        s3["client"].create_bucket(Bucket="cat")
        cat = Catalog(CatalogConfig(uri="s3://cat/episodes", storage_options=s3["delta_options"]))
        shape = synthetic.FleetShape(rows_per_day=100)
        assert cat.merge(synthetic.rows(shape, 0, 150)).inserted == 150
        assert cat.merge(synthetic.rows(shape, 100, 100)).inserted == 50
        spec = spec_from_dict(
            {"version": 1, "name": "s3", "filters": [{"column": "day", "op": "==", "value": "2024-01-02"}]}
        )
        info, sel = curate(spec, cat, tmp_path)
        assert info.episodes == 100 and info.catalog_version == cat.version()
        assert sorted(sel.rows["episode_id"]) == [f"ep-{i:010d}" for i in range(100, 200)]
        assert pl.read_parquet(info.path).height == 100


def test_a_budgeted_spec_reads_a_prefix_of_each_day_on_s3(monkeypatch):
    """The budget order on object storage: optimize there (the salt recorded, every day rewritten),
    then a budgeted version-2 spec reads ranges of the data files (counted by the server) well
    short of the table, with the plain scan's rows."""
    with moto_s3() as s3:
        client = s3["client"]
        client.create_bucket(Bucket="cat")
        cat = Catalog(CatalogConfig(uri="s3://cat/episodes", storage_options=s3["delta_options"]))
        cat.backfill(synthetic.rows(synthetic.FleetShape(rows_per_day=25_000), 0, 50_000))
        optimize(cat, None, OptimizeConfig(row_group_rows=1024, split_salt="s"))
        listed = client.list_objects_v2(Bucket="cat", Prefix="episodes/day=")["Contents"]
        live = {u.rsplit("/", 1)[-1] for u in cat.table().file_uris()}
        data = sum(o["Size"] for o in listed if o["Key"].rsplit("/", 1)[-1] in live)
        doc = {**SPEC, "name": "s3-budget"}  # its caps lie near 7 % of the hash range
        monkeypatch.setattr(ordered, "FIRST_ROWS", 4096)  # two days: no sample places the first threshold
        s3["requests"].reset()
        sel = select(spec_from_dict(doc), cat)
        got, ranged = s3["requests"].get_bytes, s3["requests"].ranged
        assert sel.evaluated_by.startswith("budget order") and sel.rows.height > 500
        assert ranged > 0 and got < 0.3 * data, (got, data)
        want, _ = evaluate(spec_from_dict(doc), pl.scan_delta(cat.table()))
        assert sel.rows.equals(want)
