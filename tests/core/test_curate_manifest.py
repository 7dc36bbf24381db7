import dataclasses
import hashlib
import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from robodata.catalog import synthetic
from robodata.catalog.schema import (
    MANIFEST_META_CATALOG_VERSION,
    MANIFEST_META_CONTENT_HASH,
    MANIFEST_META_SPEC_HASH,
    MANIFEST_SCHEMA,
)
from robodata.catalog.table import Catalog
from robodata.curate.manifest import ManifestError, read_manifest
from robodata.curate.run import curate
from robodata.curate.spec import spec_from_dict

SHAPE = synthetic.FleetShape(rows_per_day=200, batch_size=500)
BASE = {
    "version": 1,
    "name": "t",
    "filters": [
        {"column": "day", "op": "between", "value": ["2024-01-02", "2024-01-06"]},
        {"column": "quality_score", "op": ">=", "value": 0.6},
        {"column": "cameras", "op": "contains", "value": "wrist"},
    ],
    "split": {"val_fraction": 0.2, "salt": "t"},
}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    cat = Catalog(str(tmp_path_factory.mktemp("cat") / "catalog"))
    cat.merge(synthetic.rows(SHAPE, 0, 2000))
    return cat


def _all(cat):
    return pl.read_delta(cat.uri)


def test_filters_and_exclusions_match_reference(catalog, tmp_path):
    doc = {
        **BASE,
        "exclude": {
            "robots": ["sfo-1-r003", "aus-1-r001"],
            "batches": ["batch-0"],
            "episode_ids": ["ep-0000000500", "ep-0000000501"],
        },
    }
    doc["filters"] = doc["filters"] + [{"column": "start_time", "op": "<", "value": "2024-01-05T12:00:00"}]
    info, sel = curate(spec_from_dict(doc), catalog, tmp_path)
    ref = _all(catalog).filter(
        pl.col("day").is_between(pl.lit("2024-01-02"), pl.lit("2024-01-06")),
        pl.col("quality_score") >= 0.6,
        ~pl.col("robot").is_in(["sfo-1-r003", "aus-1-r001"]),
        pl.col("ingest_batch") != "batch-0",
        ~pl.col("episode_id").is_in(["ep-0000000500", "ep-0000000501"]),
        pl.col("start_time") < pl.datetime(2024, 1, 5, 12, time_zone="UTC"),
    )
    assert 0 < ref.height < 2000
    assert sel.rows["episode_id"].to_list() == sorted(ref["episode_id"].to_list())
    assert info.episodes == ref.height
    assert abs(sel.rows["weight"].sum() - 1.0) < 1e-9


def test_mixing_weights_and_budgets(catalog, tmp_path):
    doc = {
        **BASE,
        "mix": {"by": "task", "weights": {"fold_towel": 3, "fold_shirt": 1, "pick_place": 0}, "default_weight": 0},
        "budget": {"per_group_hours": {"fold_towel": 2.0}, "total_hours": 100},
    }
    _, sel = curate(spec_from_dict(doc), catalog, tmp_path)
    rows = sel.rows
    assert set(rows["task"]) == {"fold_towel", "fold_shirt"}
    share = rows.group_by("task").agg(pl.col("weight").sum(), (pl.col("duration_s").sum() / 3600).alias("h"))
    share = {r["task"]: r for r in share.to_dicts()}
    assert share["fold_towel"]["weight"] == pytest.approx(0.75)
    assert share["fold_shirt"]["weight"] == pytest.approx(0.25)
    assert 1.8 < share["fold_towel"]["h"] <= 2.0  # capped close to, never over, the budget
    unlimited = curate(spec_from_dict({**doc, "budget": {}}), catalog, tmp_path / "u")[1].rows
    assert unlimited.filter(pl.col("task") == "fold_towel")["duration_s"].sum() / 3600 > 2.0
    # a budgeted subset is a subset of the unbudgeted selection, and stable
    assert set(rows["episode_id"]) <= set(unlimited["episode_id"])
    assert sel.groups["fold_towel"]["hours"] == pytest.approx(share["fold_towel"]["h"])


def test_split_is_stable_as_the_catalog_grows(tmp_path):
    cat = Catalog(str(tmp_path / "c"))
    cat.merge(synthetic.rows(SHAPE, 0, 1000))
    spec = spec_from_dict({**BASE, "filters": []})
    _, first = curate(spec, cat, tmp_path / "m")
    cat.merge(synthetic.rows(SHAPE, 1000, 1000))
    _, second = curate(spec, cat, tmp_path / "m")
    a = dict(zip(first.rows["episode_id"], first.rows["split"], strict=True))
    b = dict(zip(second.rows["episode_id"], second.rows["split"], strict=True))
    assert all(b[k] == v for k, v in a.items())
    assert 0.15 < (second.rows["split"] == "val").mean() < 0.25


def test_manifest_is_content_addressed_and_byte_identical(catalog, tmp_path):
    spec = spec_from_dict(BASE)
    i1, _ = curate(spec, catalog, tmp_path / "a")
    i2, _ = curate(spec, catalog, tmp_path / "b")
    assert isinstance(i1.path, str)  # a path or an object-store URI
    i1, i2 = (dataclasses.replace(i, path=Path(i.path)) for i in (i1, i2))
    assert i1.path.name == i2.path.name and i1.content_hash[:16] in i1.path.name
    assert hashlib.sha256(i1.path.read_bytes()).digest() == hashlib.sha256(i2.path.read_bytes()).digest()
    md = pq.read_schema(i1.path).metadata
    assert md[MANIFEST_META_CATALOG_VERSION] == str(catalog.version()).encode()
    assert md[MANIFEST_META_SPEC_HASH] == spec.spec_hash().encode()
    assert md[MANIFEST_META_CONTENT_HASH] == i1.content_hash.encode()
    table = read_manifest(i1.path)
    assert table.schema.remove_metadata() == MANIFEST_SCHEMA
    # same rows at another catalog version -> another manifest (provenance is content)
    other, _ = curate(spec_from_dict({**BASE, "catalog_version": 0}), catalog, tmp_path / "a")
    assert other.catalog_version == 0 and Path(other.path) != i1.path


def test_altered_manifest_is_detected(catalog, tmp_path):
    info, _ = curate(spec_from_dict(BASE), catalog, tmp_path)
    table = pq.read_table(info.path)
    tampered = table.set_column(
        table.schema.get_field_index("weight"), "weight", pl.Series([1.0] * table.num_rows).to_arrow()
    )
    pq.write_table(tampered, info.path)
    with pytest.raises(ManifestError, match="content hash mismatch"):
        read_manifest(info.path)
    with pytest.raises(ManifestError, match="different content"):
        curate(spec_from_dict(BASE), catalog, tmp_path)


def test_pinned_missing_version_is_clear(catalog, tmp_path):
    from robodata.catalog.rows import CatalogError

    with pytest.raises(CatalogError, match="version 999"):
        curate(spec_from_dict({**BASE, "catalog_version": 999}), catalog, tmp_path)


def test_cli_curate(catalog, tmp_path):
    from robodata.cli import app

    spec = tmp_path / "spec.yaml"
    spec.write_text(json.dumps(BASE))  # JSON is YAML
    res = CliRunner().invoke(
        app, ["curate", str(spec), "--catalog", catalog.uri, "--out", str(tmp_path / "m"), "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["episodes"] == pl.read_parquet(out["manifest"]).height > 0
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: x\nfilters: [{column: nope, op: '==', value: 1}]\n")
    res = CliRunner().invoke(app, ["curate", str(bad), "--catalog", catalog.uri])
    assert res.exit_code == 2 and "not a catalog column" in res.output
