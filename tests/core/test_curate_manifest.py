import dataclasses
import hashlib
import json
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from robodata.catalog.schema import (
    MANIFEST_BASE_SCHEMA,
    MANIFEST_META_CATALOG_VERSION,
    MANIFEST_META_CONTENT_HASH,
    MANIFEST_META_SPEC_HASH,
    MANIFEST_SCHEMA,
)
from robodata.catalog.table import Catalog
from robodata.curate.manifest import HASH_SCHEMES, ManifestError, read_manifest
from robodata.curate.run import curate
from robodata.curate.spec import spec_from_dict
from robodata_testing import synthetic_catalog as synthetic

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


def test_the_same_rows_at_another_catalog_version_are_the_same_manifest(tmp_path):
    """v3 (rows + spec): the file is kept with the version it names; the curation says which it read."""
    cat = Catalog(str(tmp_path / "c"))
    rows = synthetic.rows(SHAPE, 0, 300)
    cat.merge(rows)
    first = cat.version()
    cat.merge(rows)  # a new version holding the same rows
    spec = spec_from_dict(BASE)
    latest, _ = curate(spec, cat, tmp_path / "m")
    before = Path(latest.path).read_bytes()
    pinned, _ = curate(spec, cat, tmp_path / "m", catalog_version=first)
    assert (pinned.path, pinned.content_hash) == (latest.path, latest.content_hash) and latest.episodes > 0
    assert (latest.catalog_version, latest.read_version) == (cat.version(), cat.version())
    assert (pinned.catalog_version, pinned.read_version) == (cat.version(), first)
    assert Path(latest.path).read_bytes() == before and len(list((tmp_path / "m").iterdir())) == 1


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
    assert out["evaluated_by"] == "plain scan: no hour caps"
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: x\nfilters: [{column: nope, op: '==', value: 1}]\n")
    res = CliRunner().invoke(app, ["curate", str(bad), "--catalog", catalog.uri])
    assert res.exit_code == 2 and "not a catalog column" in res.output


# -- content hash over the canonical logical encoding (scheme v2) -------------------------------

CAMS = [["a"], ["a", "bb"], [], ["wrist", "cam_left", "cam_right"]]


@pytest.mark.parametrize("n, drop", [(n, k) for n in (2, 3, 4) for k in range(n)])
def test_list_columns_of_different_lengths_with_a_dropped_row_round_trip(tmp_path, n, drop):
    """The case that failed on main (7 of these 9): dropped rows' list values left in the buffers."""
    from datetime import UTC, datetime

    rows = [
        {"episode_id": f"e{i}", "uri": f"u{i}", "start_time": datetime(2024, 1, 1, tzinfo=UTC), "qc_status": "pass",
         "duration_s": 1.0 + i, "cameras": CAMS[(i + drop) % 4], "task": "t", "site": "s"}
        for i in range(n)
    ]  # fmt: skip
    cat = Catalog(str(tmp_path / "cat"))
    cat.merge(rows)
    spec = spec_from_dict({"version": 1, "name": "x", "exclude": {"episode_ids": [f"e{drop}"]}})
    info, _ = curate(spec, cat, tmp_path / "m")
    table = read_manifest(info.path)
    assert table.num_rows == n - 1 and f"e{drop}" not in table.column("episode_id").to_pylist()


def _rows(n: int = 5):
    import pyarrow as pa

    table = pa.table(
        {
            "episode_id": [f"e{i}" for i in range(n)],
            "uri": [f"s3://b/e{i}" for i in range(n)],
            "site": ["s"] * n,
            "task": [None if i == 1 else "t" for i in range(n)],
            "duration_s": [float(i) for i in range(n)],
            "num_frames": list(range(n)),
            "num_state_steps": list(range(n)),
            "cameras": [["a"] * (i % 3) if i != 2 else None for i in range(n)],
            "stream_rates_json": ["{}"] * n,
            "layout_version": ["l"] * n,
            "size_bytes": list(range(n)),
            "footer_offset": list(range(n)),
            "footer_length": list(range(n)),
            "split": ["train"] * n,
            "weight": [1.0 / n] * n,
        }
    )
    from robodata.curate.manifest import with_mixing_columns

    return with_mixing_columns(table.cast(MANIFEST_BASE_SCHEMA))  # a manifest of before issue 37: facts null


def test_equal_tables_hash_equal_whatever_their_buffers_and_order():
    import pyarrow as pa
    import pyarrow.compute as pc

    from robodata.curate.manifest import content_hash

    base = _rows()
    digest = content_hash(base, "s", 1)
    padded = pa.concat_tables([_rows(8).slice(5, 3).cast(MANIFEST_SCHEMA), base]).slice(3)  # sliced, offset buffers
    bigger = pa.concat_tables([_rows(7).slice(5), base]).combine_chunks()  # dropped rows' values stay in buffers
    filtered = bigger.filter(pc.invert(pc.is_in(bigger.column("episode_id"), pa.array(["e5", "e6"]))))
    views = pl.from_arrow(base).to_arrow()  # polars: string_view / large types
    shuffled = base.take([3, 0, 4, 2, 1])
    chunked = pa.concat_tables([base.slice(0, 2), base.slice(2)])
    for other in (padded, filtered, views, shuffled, chunked):
        assert content_hash(other, "s", 1) == digest
    # pinned: the v4 and v3 encodings of these rows must never change (training lineage names manifest hashes)
    assert digest == PINNED_V4 and HASH_SCHEMES["v3"](padded, "s", 1) == PINNED_V3
    changed = base.set_column(base.schema.get_field_index("cameras"), "cameras", pa.array([[], [], None, [], []]))
    for other, spec_hash in ((changed, "s"), (base, "t"), (base.slice(1), "s")):
        assert content_hash(other, spec_hash) != digest
    assert content_hash(base, "s", 2) == digest  # the catalog version is metadata, not identity (v3)
    # v2, which hashed the version too, still verifies the files it wrote: pinned as before
    v2 = HASH_SCHEMES["v2"]
    assert v2(padded, "s", 1) == PINNED_V2 and v2(base, "s", 2) != PINNED_V2


PINNED_V2 = "db4e2f58599512b4eedcd5123848868b477897a5c3dfd31741b23721dee1b1ab"
PINNED_V3 = "4cbeb646c76121f910e5b7499b426d6ebf141b6577dce90ace4da4371657e18c"
PINNED_V4 = "a26124a3c096b496d3a4c8718a6aeb772bbe531c5fb4a0393e55d5d32e318bc9"


def _write(path, table, md):
    pq.write_table(table.replace_schema_metadata(md), path)
    return path


def test_v1_manifests_still_verify_with_v1_and_unknown_schemes_are_refused(tmp_path):
    from robodata.catalog.schema import MANIFEST_META_HASH_SCHEME
    from robodata.curate.manifest import content_hash_v1

    rows = _rows()
    base = {MANIFEST_META_SPEC_HASH: b"s", MANIFEST_META_CATALOG_VERSION: b"3"}
    v1 = _write(
        tmp_path / "v1.parquet", rows, {**base, MANIFEST_META_CONTENT_HASH: content_hash_v1(rows, "s", 3).encode()}
    )
    assert read_manifest(v1).num_rows == 5  # written before schemes were recorded: verified as v1
    wrong = _write(tmp_path / "wrong.parquet", rows, {**base, MANIFEST_META_CONTENT_HASH: b"0" * 64})
    with pytest.raises(ManifestError, match="content hash mismatch"):
        read_manifest(wrong)
    future = _write(
        tmp_path / "v9.parquet", rows, {**base, MANIFEST_META_CONTENT_HASH: b"x", MANIFEST_META_HASH_SCHEME: b"v9"}
    )
    with pytest.raises(ManifestError, match="unknown manifest hash scheme 'v9'"):
        read_manifest(future)
    no_spec = _write(tmp_path / "nospec.parquet", rows, {MANIFEST_META_CONTENT_HASH: b"x"})
    with pytest.raises(ManifestError, match="no robodata.spec_hash metadata"):
        read_manifest(no_spec)
    bad_version = _write(
        tmp_path / "badv.parquet", rows, {**base, MANIFEST_META_CATALOG_VERSION: b"x", MANIFEST_META_CONTENT_HASH: b"x"}
    )
    with pytest.raises(ManifestError, match="bad metadata"):
        read_manifest(bad_version)


def test_new_manifests_record_scheme_v4_and_v2_files_still_verify(catalog, tmp_path):
    from robodata.catalog.schema import MANIFEST_META_HASH_SCHEME

    info, _ = curate(spec_from_dict(BASE), catalog, tmp_path)
    assert pq.read_schema(info.path).metadata[MANIFEST_META_HASH_SCHEME] == b"v4"
    rows = _rows()
    md = {MANIFEST_META_SPEC_HASH: b"s", MANIFEST_META_CATALOG_VERSION: b"1", MANIFEST_META_HASH_SCHEME: b"v2"}
    v2 = _write(tmp_path / "v2.parquet", rows, {**md, MANIFEST_META_CONTENT_HASH: PINNED_V2.encode()})
    assert read_manifest(v2).num_rows == 5
    other = {**md, MANIFEST_META_CATALOG_VERSION: b"2", MANIFEST_META_CONTENT_HASH: PINNED_V2.encode()}
    moved = _write(tmp_path / "v2moved.parquet", rows, other)
    with pytest.raises(ManifestError, match="content hash mismatch"):  # v2 hashed the version: it is checked
        read_manifest(moved)
