"""Manifests keep their content hashes: golden hashes computed with the eager evaluation (main before
issue 28) over a fixed synthetic catalog with hostile rows (null, zero, negative and NaN durations, null
groups), for specs whose budgets bind; the key-first evaluation must reproduce each one exactly.
The golden hashes are of scheme v2 (the one they were written with): the manifest's rows are hashed
with it again, and its own (v3) hash must be that of the same rows."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import polars as pl
import pytest

from bench.curate_full import SPECS as BENCH_SPECS
from robodata.catalog.schema import MANIFEST_SCHEMA
from robodata.catalog.table import Catalog
from robodata.curate.manifest import HASH_SCHEMES, content_hash, read_manifest
from robodata.curate.run import curate
from robodata.curate.spec import spec_from_dict
from robodata_testing import synthetic_catalog as synthetic

SHAPE = synthetic.FleetShape(rows_per_day=500, batch_size=700)
ROWS = 6000

FOLD = {  # the bench's full-table spec with budgets and an excluded batch that bind on ROWS rows
    **BENCH_SPECS["full_v1"],
    "name": "golden-fold",
    "budget": {"total_hours": 25, "per_group_hours": {"box_pack": 2}},
    "exclude": {"robots": ["sfo-1-r003", "aus-1-r017"], "batches": ["batch-2"]},
}
SPECS: dict[str, dict] = {
    "fold_days": {
        **FOLD,
        "name": "golden-fold-days",
        "filters": [{"column": "day", "op": "between", "value": ["2024-01-03", "2024-01-09"]}, *FOLD["filters"]],
    },
    "fold_full": FOLD,
    "quality_only": {**{k: v for k, v in BENCH_SPECS["quality"].items() if k != "split"}, "name": "golden-quality"},
    "sites_budget": {
        "version": 1,
        "name": "golden-sites",
        "filters": [{"column": "cameras", "op": "contains", "value": "wrist"}],
        "mix": {"by": "site", "weights": {"sfo-1": 2, "aus-1": 0, "bos-1": 1}, "default_weight": 0.5},
        "budget": {"per_group_hours": {"sfo-1": 4, "": 0.01}},
        "exclude": {"episode_ids": ["ep-0000000010", "ep-0000000011", "ep-0000005999"]},
        "split": {"val_fraction": 0.2, "salt": "s"},
    },
    "total_no_mix": {
        "version": 1,
        "name": "golden-total",
        "filters": [{"column": "duration_s", "op": "<", "value": 150}],
        "budget": {"total_hours": 30},
        "split": {"val_fraction": 0.1, "salt": "t"},
    },
    "fold_full_clean": {
        **FOLD,
        "name": "golden-fold-clean",
        "filters": [{"column": "duration_s", "op": "between", "value": [0, 1000]}, *FOLD["filters"]],
    },
    "sites_clean": {
        "version": 1,
        "name": "golden-sites-clean",
        "filters": [
            {"column": "duration_s", "op": ">=", "value": 0},
            {"column": "duration_s", "op": "<=", "value": 500},
        ],
        "mix": {"by": "site", "weights": {"sfo-1": 2, "bos-1": 1, "nyc-1": 0.25}},
        "budget": {"total_hours": 60, "per_group_hours": {"sfo-1": 5, "chi-1": 100}},
        "split": {"val_fraction": 0.3, "salt": "sc"},
    },
    "only_listed": {
        "version": 1,
        "name": "golden-listed",
        "mix": {"by": "task", "weights": {"pick_place": 1, "bin_sort": 4}, "default_weight": 0},
        "budget": {"total_hours": 12},
    },
}
# (content hash (v2), episodes, sha256[:16] of the groups' JSON): from the eager evaluation of main 6d94797
GOLDEN: dict[str, tuple[str, int, str]] = {
    "fold_days": ("bb5c0b28b9564e3e2968a24169aff7b9bac57ab9bd02c093d7daaf4c007fd263", 86, "0df442b3494eec98"),
    "fold_full": ("d2e0cef31f33a9a42d57d1707f703305e21a1002b78d81afb6acbe755b9f751e", 77, "a681d562b81a9b29"),
    "quality_only": ("b259c952a6518e7f9cc9e1a4cb0c5c40cabc9eebfa65f96d011f57d4838071c8", 1184, "fa9a0ada96bcd44e"),
    "sites_budget": ("964d77d817c58fe2b401068dd87cfd689db07ad1ca657feadef8930ca2c38582", 310, "ec0d987325a9dfc2"),
    "total_no_mix": ("79ece850f1748dbec80dbc33fe3fba9e75aebabd6690a9915f669dd55199ee7b", 1304, "a179357a03250eac"),
    "fold_full_clean": ("8cd699a505d1c188a435129382ef5fd4d29c5aaabbf704fd536cf2a5e611cafd", 845, "602687b0a66b4de0"),
    "sites_clean": ("e69748773d85c6e9a5f4cda39783a64d47e6bb72230c1e1cfa96c4950bde2557", 1717, "da363e537e1dc825"),
    "only_listed": ("d8170f0dc20e0e4ae084aee2b6ed04f9581cf3676a936f9fe5ee9953a5dddc7a", 360, "27ba7a8dee9bdb30"),
}


def golden_catalog(path: Path) -> Catalog:
    """ROWS synthetic rows, some made hostile: null/zero/negative/NaN durations, null tasks and sites."""
    df = pl.DataFrame(synthetic.rows(SHAPE, 0, ROWS))
    i = pl.int_range(pl.len())
    df = df.with_columns(
        duration_s=pl.when(i % 97 == 5)
        .then(None)
        .when(i % 89 == 3)
        .then(0.0)
        .when(i % 83 == 7)
        .then(-30.0)
        .when(i % 211 == 11)
        .then(float("nan"))
        .otherwise(pl.col("duration_s")),
        task=pl.when(i % 101 == 13).then(None).otherwise(pl.col("task")),
        site=pl.when(i % 103 == 17).then(None).otherwise(pl.col("site")),
    )
    cat = Catalog(str(path))
    for start in range(0, ROWS, 2500):  # several files per day for some days
        cat.backfill(df.slice(start, 2500).to_arrow())
    return cat


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    return golden_catalog(tmp_path_factory.mktemp("golden") / "catalog")


@pytest.mark.parametrize("name", sorted(SPECS))
def test_manifest_keeps_its_golden_content_hash(catalog, tmp_path, name):
    info, selection = curate(spec_from_dict(SPECS[name]), catalog, tmp_path)
    rows = read_manifest(info.path).cast(MANIFEST_SCHEMA)
    v2 = HASH_SCHEMES["v2"](rows, info.spec_hash, info.catalog_version)
    assert (v2, info.episodes, groups_digest(selection.groups)) == GOLDEN[name]
    assert info.content_hash == content_hash(rows, info.spec_hash)


def groups_digest(groups: dict) -> str:
    return hashlib.sha256(json.dumps(groups, sort_keys=True).encode()).hexdigest()[:16]
