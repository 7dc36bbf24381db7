"""Issue 24: QC outcomes are catalog facts (qc_failed, qc_reason, streams); older tables are
migrated when opened for merge; rows of the wrong type are refused; specs exclude failed checks."""

from datetime import UTC, datetime

import polars as pl
import pyarrow as pa
import pytest
from deltalake import write_deltalake

from robodata.catalog.rows import CatalogTypeError
from robodata.catalog.schema import CATALOG_SCHEMA
from robodata.catalog.table import Catalog
from robodata.curate.select import select
from robodata.curate.spec import spec_from_dict

NEW = ("qc_failed", "qc_reason", "streams", "source_digest")


def _row(i: int, **kw) -> dict:
    row = {
        "episode_id": f"e{i}",
        "uri": f"/data/e{i}.rbd",
        "site": "s",
        "task": "t",
        "start_time": datetime(2024, 1, 1, tzinfo=UTC),
        "duration_s": 2.0,
        "qc_status": "pass",
    }
    return {**row, **kw}


def test_an_older_table_gains_the_new_columns_when_opened_for_merge(tmp_path):
    uri = str(tmp_path / "cat")
    old = pa.schema([f for f in CATALOG_SCHEMA if f.name not in NEW])
    rows = [{**_row(0), "day": "2024-01-01"}]
    write_deltalake(uri, pa.Table.from_pylist(rows, schema=old), partition_by=["day"])
    cat = Catalog(uri)
    assert cat.missing_columns() == list(NEW)
    # curation over the not yet migrated table reads nulls for the new columns
    spec = spec_from_dict({"version": 1, "name": "x"})
    assert select(spec, cat).rows["episode_id"].to_list() == ["e0"]
    cat.merge([_row(1, qc_failed=["no_frame_gaps"], qc_reason="no_frame_gaps: gap", streams=["cam"])])
    assert cat.missing_columns() == []
    df = pl.read_delta(uri).sort("episode_id")
    assert df["qc_failed"].to_list() == [None, ["no_frame_gaps"]]
    assert df["streams"].to_list() == [None, ["cam"]]
    assert select(spec, cat).rows["episode_id"].to_list() == ["e0"]  # e1 failed a check


@pytest.mark.parametrize(
    "column, value",
    [("duration_s", "2.5"), ("num_frames", "7"), ("site", 3), ("qc_failed", "no_frame_gaps"), ("success", 1)],
)
def test_rows_of_the_wrong_type_are_refused_naming_the_column(tmp_path, column, value):
    cat = Catalog(str(tmp_path / "cat"))
    cat.merge([_row(0)])
    version = cat.version()
    with pytest.raises(CatalogTypeError, match=repr(column)):
        cat.merge([_row(1, **{column: value})])
    assert cat.version() == version


def test_default_spec_excludes_failed_checks_and_rows_without_a_container(tmp_path):
    cat = Catalog(str(tmp_path / "cat"))
    cat.merge(
        [
            _row(0, qc_failed=[]),
            _row(1, qc_failed=["no_frame_gaps"], qc_reason="no_frame_gaps: 30% dropped"),
            _row(2, qc_failed=["rate_within_tolerance", "no_frame_gaps"]),
            _row(3, uri="", qc_status="quarantined", start_time=None, qc_failed=["readable"]),
        ]
    )
    pick = {"version": 1, "name": "x"}
    assert select(spec_from_dict(pick), cat).rows["episode_id"].to_list() == ["e0"]
    gaps = spec_from_dict({**pick, "allow_failed_checks": ["no_frame_gaps"]})
    assert select(gaps, cat).rows["episode_id"].to_list() == ["e0", "e1"]
    anything = spec_from_dict({**pick, "allow_failed_checks": ["*"]})
    assert select(anything, cat).rows["episode_id"].to_list() == ["e0", "e1", "e2"]  # never e3: no container
    by_filter = spec_from_dict({**pick, "allow_failed_checks": ["*"], "filters": [
        {"column": "qc_failed", "op": "contains", "value": "rate_within_tolerance"}]})  # fmt: skip
    assert select(by_filter, cat).rows["episode_id"].to_list() == ["e2"]


def test_the_spec_hash_of_a_spec_without_the_new_field_is_unchanged():
    import dataclasses
    import hashlib
    import json

    spec = spec_from_dict({"version": 1, "name": "x", "filters": [{"column": "task", "op": "==", "value": "t"}]})
    doc = dataclasses.asdict(spec)
    del doc["allow_failed_checks"], doc["cameras"]  # fields added later: absent from a spec that omits them
    doc["exclude"]["episode_ids_file"] = None
    want = hashlib.sha256(json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()
    assert spec.spec_hash() == want
    assert spec_from_dict({"version": 1, "name": "x", "allow_failed_checks": ["*"]}).spec_hash() != spec.spec_hash()
