"""The repair audit table (Delta): one row per action, with the state before and after."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import TableNotFoundError

from robodata.cluster.actions import Action, Outcome

AUDIT_SCHEMA = pa.schema(
    [
        ("day", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("pass_id", pa.string()),
        ("repair", pa.string()),
        ("action", pa.string()),
        ("node", pa.string()),
        ("target", pa.string()),
        ("dry_run", pa.bool_()),
        ("outcome", pa.string()),
        ("reason", pa.string()),
        ("before_json", pa.string()),
        ("after_json", pa.string()),
        ("error", pa.string()),
    ]
)


def audit_row(pass_id: str, ts: datetime, action: Action, outcome: Outcome, dry_run: bool) -> dict[str, Any]:
    return {
        "day": ts.strftime("%Y-%m-%d"),
        "ts": ts,
        "pass_id": pass_id,
        "repair": action.repair,
        "action": action.action,
        "node": action.node,
        "target": action.target,
        "dry_run": dry_run,
        "outcome": outcome.status,
        "reason": action.reason,
        "before_json": json.dumps(action.before, sort_keys=True, default=str),
        "after_json": json.dumps(outcome.after, sort_keys=True, default=str),
        "error": outcome.error,
    }


def write_audit(uri: str, rows: list[dict[str, Any]], storage_options: dict[str, str] | None = None) -> int:
    if not rows:
        return 0
    write_deltalake(
        uri,
        pa.Table.from_pylist(rows, schema=AUDIT_SCHEMA),
        mode="append",
        partition_by=["day"],
        storage_options=storage_options,
    )
    return len(rows)


def read_audit(uri: str, storage_options: dict[str, str] | None = None) -> list[dict[str, Any]]:
    try:
        table = DeltaTable(uri, storage_options=storage_options).to_pyarrow_table()
    except TableNotFoundError:
        return []
    return sorted(table.to_pylist(), key=lambda r: (r["ts"], r["target"]))
