"""The node-health Delta table: one row per node per preflight, partitioned by day.

Excluded nodes are the rows with assignable == False; `exclusion_reasons` says why.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError

from robodata.health.preflight import PreflightResult

HEALTH_SCHEMA = pa.schema(
    [
        ("day", pa.string()),
        ("checked_at", pa.timestamp("us", tz="UTC")),
        ("run_id", pa.string()),
        ("node", pa.string()),
        ("healthy", pa.bool_()),
        ("assignable", pa.bool_()),
        ("reasons", pa.list_(pa.string())),
        ("exclusion_reasons", pa.list_(pa.string())),
        ("gpu_count", pa.int32()),
        ("backend", pa.string()),
        ("seconds", pa.float64()),
        ("findings_json", pa.string()),
        ("gpus_json", pa.string()),
    ]
)


def write_results(uri: str, results: list[PreflightResult], storage_options: dict[str, str] | None = None) -> int:
    """Append results (one commit for the batch); returns rows written."""
    if not results:
        return 0
    rows = []
    for r in results:
        row = r.to_row()
        row["day"] = row["checked_at"].strftime("%Y-%m-%d")
        rows.append(row)
    table = pa.Table.from_pylist(rows, schema=HEALTH_SCHEMA)
    write_deltalake(uri, table, mode="append", partition_by=["day"], storage_options=storage_options)
    return len(rows)


def latest_by_node(
    uri: str,
    max_age: timedelta | None = None,
    now: datetime | None = None,
    storage_options: dict[str, str] | None = None,
) -> dict[str, dict[str, Any]]:
    """Newest row per node (within max_age if given). Missing table -> {}."""
    try:
        dt = DeltaTable(uri, storage_options=storage_options)
    except TableNotFoundError:
        return {}
    now = now or datetime.now(UTC)
    filters = None
    if max_age is not None:
        since = now - max_age
        filters = [("day", ">=", since.strftime("%Y-%m-%d"))]
    cols = ["node", "checked_at", "healthy", "assignable", "reasons", "exclusion_reasons", "run_id"]
    table = dt.to_pyarrow_table(columns=cols, filters=filters)
    latest: dict[str, dict[str, Any]] = {}
    for row in table.to_pylist():
        if max_age is not None and row["checked_at"] < now - max_age:
            continue
        prev = latest.get(row["node"])
        if prev is None or row["checked_at"] > prev["checked_at"]:
            latest[row["node"]] = row
    return latest


def split_assignable(
    uri: str,
    nodes: list[str],
    max_age: timedelta,
    now: datetime | None = None,
    storage_options: dict[str, str] | None = None,
) -> tuple[list[str], dict[str, list[str]]]:
    """Candidate nodes -> (assignable, {excluded node: reasons}); no fresh record excludes."""
    latest = latest_by_node(uri, max_age=max_age, now=now, storage_options=storage_options)
    ok: list[str] = []
    excluded: dict[str, list[str]] = {}
    for node in nodes:
        row = latest.get(node)
        if row is None:
            excluded[node] = [f"no preflight record newer than {max_age}"]
        elif not row["assignable"]:
            excluded[node] = list(row["exclusion_reasons"] or ["not assignable"])
        else:
            ok.append(node)
    return ok, excluded


def findings_of(row: dict[str, Any]) -> list[dict[str, Any]]:
    return json.loads(row["findings_json"])
