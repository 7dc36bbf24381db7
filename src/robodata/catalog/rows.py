"""Validate and conform incoming catalog rows to CATALOG_SCHEMA before any write.

Bad input fails here, before a single byte reaches the Delta table: a missing or
duplicate episode id, a row without a start time, an unknown QC status, a uri no row may
name (http://, ...), or a `stream_rates_json` that is not an object of stream -> rate
(which every loader parses).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from robodata.catalog.schema import CATALOG_SCHEMA, stream_rates, type_kind
from robodata.errors import RobodataError
from robodata.storage.location import SCHEMES, uri_refusal

QC_STATUSES = ("pass", "quarantined")
UNKNOWN_DAY = "unknown"  # partition of quarantined rows whose start time is unknown (no container)


class CatalogError(RobodataError):
    """A catalog write or read failed (bad rows, unreachable table, exhausted retries)."""


class CatalogTypeError(CatalogError):
    """Catalog rows hold a column of the wrong kind (the message names the column)."""


def conform(rows: pa.Table | pa.RecordBatch | Iterable[Mapping[str, Any]]) -> pa.Table:
    """Return `rows` as a pa.Table with exactly CATALOG_SCHEMA, validated.

    `day` is derived from `start_time` (UTC) when missing or null, so writers cannot
    put an episode into the wrong partition. Only quarantined rows may lack a start
    time (nothing usable was converted); they go to the `unknown` day.
    """
    table = _to_table(rows)
    missing = [f.name for f in CATALOG_SCHEMA if f.name not in table.column_names and f.name != "day"]
    required = {"episode_id", "uri"}
    if missing_required := sorted(required.intersection(missing)):
        raise CatalogError(f"catalog rows lack required column(s) {missing_required}")
    extra = sorted(set(table.column_names) - set(CATALOG_SCHEMA.names))
    if extra:
        raise CatalogError(f"catalog rows have unknown column(s) {extra}; known: {CATALOG_SCHEMA.names}")
    n = table.num_rows
    cols = []
    for field in CATALOG_SCHEMA:
        if field.name in table.column_names:
            _check_type(field, table.column(field.name).type)
            try:
                col = table.column(field.name).cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise CatalogError(f"catalog column {field.name!r}: cannot cast to {field.type}: {exc}") from exc
        else:
            col = pa.nulls(n, field.type)
        cols.append(col)
    out = pa.Table.from_arrays(cols, schema=CATALOG_SCHEMA)
    out = _fill_day(out)
    _check(out)
    return out


_WIDENS = {("int", "float"), ("null", "string"), ("list<null>", "list<string>")}


def _check_type(field: pa.Field, given: pa.DataType) -> None:
    """Refuse a column whose type is not the schema's kind (a number for a string, text for a
    number, ...); widths (int8 -> int32, string -> large_string) and nulls are conformed."""
    want, got = type_kind(field.type), type_kind(given)
    if got in (want, "null") or (got, want) in _WIDENS:
        return
    raise CatalogTypeError(f"catalog column {field.name!r}: rows hold {given}, the catalog holds {field.type}")


def _to_table(rows: Any) -> pa.Table:
    if isinstance(rows, pa.Table):
        return rows
    if isinstance(rows, pa.RecordBatch):
        return pa.Table.from_batches([rows])
    if hasattr(rows, "to_arrow"):  # polars DataFrame
        return rows.to_arrow()
    rows = list(rows)
    if not rows:
        return CATALOG_SCHEMA.empty_table()
    return pa.Table.from_pylist(rows)


def _fill_day(table: pa.Table) -> pa.Table:
    day = table.column("day")
    start = table.column("start_time")
    no_start = pc.is_null(start)
    if pc.any(no_start).as_py():
        qc = table.column("qc_status")
        bad = pc.and_(no_start, pc.invert(pc.fill_null(pc.equal(qc, "quarantined"), False)))
        if pc.any(bad).as_py():
            ids = pc.filter(table.column("episode_id"), bad).to_pylist()[:5]
            raise CatalogError(f"rows without start_time must be quarantined, e.g. {ids}")
    derived = pc.fill_null(pc.strftime(start, format="%Y-%m-%d"), UNKNOWN_DAY)
    given = pc.if_else(pc.equal(pc.fill_null(day, ""), ""), derived, day)
    mismatch = pc.sum(pc.cast(pc.not_equal(given, derived), pa.int64())).as_py() or 0
    if mismatch:
        raise CatalogError(f"{mismatch} row(s) have a `day` that is not the UTC date of `start_time`")
    return table.set_column(table.schema.get_field_index("day"), "day", derived)


def _check(table: pa.Table) -> None:
    for name in ("episode_id", "uri"):
        nulls = table.column(name).null_count
        if nulls:
            raise CatalogError(f"{nulls} catalog row(s) have a null {name!r}")
    ids = table.column("episode_id")
    if pc.count_distinct(ids).as_py() != table.num_rows:
        counts = pc.value_counts(ids)
        dup = [c["values"].as_py() for c in counts if c["counts"].as_py() > 1][:5]
        raise CatalogError(f"duplicate episode_id(s) in one batch, e.g. {dup}")
    qc = table.column("qc_status")
    bad = pc.invert(pc.is_in(qc, value_set=pa.array(QC_STATUSES)))
    bad = pc.and_kleene(bad, pc.is_valid(qc))
    if pc.any(bad).as_py():
        values = sorted(set(pc.filter(qc, bad).to_pylist()))[:5]
        raise CatalogError(f"unknown qc_status value(s) {values}; expected one of {list(QC_STATUSES)}")
    _check_uris(table)
    _check_rates(table)


def _check_uris(table: pa.Table) -> None:
    """Every uri is a local path, file:// or s3:// (robodata.storage.location.uri_refusal)."""
    uri = table.column("uri")
    allowed = functools.reduce(pc.or_, [pc.starts_with(uri, scheme) for scheme in SCHEMES])
    foreign = pc.and_(pc.match_substring(uri, "://"), pc.invert(allowed))
    if pc.any(foreign).as_py():
        bad = pc.filter(uri, foreign)[0].as_py()
        raise CatalogError(f"uri {bad[:120]!r}: {uri_refusal(bad)}")


def _check_rates(table: pa.Table) -> None:
    """Every distinct stream_rates_json parses (robodata.catalog.schema.stream_rates): a few
    distinct values per batch, however many rows."""
    col = table.column("stream_rates_json")
    for raw in pc.unique(col).to_pylist():
        try:
            stream_rates(raw)
        except ValueError as exc:
            ids = pc.filter(table.column("episode_id"), pc.equal(col, raw)).to_pylist()[:5]
            shown = raw if len(raw) <= 80 else raw[:77] + "..."
            raise CatalogError(f"row(s) {ids}: stream_rates_json {shown!r} is invalid: {exc}") from None
