"""Flip catalog pointers: one Delta merge per batch sets uri/layout_version/size/footer of
re-laid episodes, keyed by (day, episode_id) so delta-rs prunes to the batch's partitions.

A row is only updated while it still points at the object that was re-laid
(`t.uri = s.old_uri`): if ingestion replaced the episode meanwhile, its newer row wins.
Concurrent commits (CommitFailedError) re-run the merge with jittered backoff.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError

from robodata.errors import RobodataError

PREDICATE = "t.day = s.day AND t.episode_id = s.episode_id"
UPDATE_IF = "t.uri = s.old_uri"


@dataclass(frozen=True)
class PointerUpdate:
    episode_id: str
    day: str
    old_uri: str
    uri: str
    layout_version: str
    size_bytes: int
    footer_offset: int
    footer_length: int


def flip_pointers(
    table_uri: str,
    updates: list[PointerUpdate],
    storage_options: dict[str, str] | None = None,
    max_attempts: int = 30,
    backoff_s: float = 0.05,
) -> int:
    """Apply the updates in one merge; returns the number of catalog rows updated."""
    if not updates:
        return 0
    src = pa.table(
        {
            "episode_id": pa.array([u.episode_id for u in updates], pa.string()),
            "day": pa.array([u.day for u in updates], pa.string()),
            "old_uri": pa.array([u.old_uri for u in updates], pa.string()),
            "uri": pa.array([u.uri for u in updates], pa.string()),
            "layout_version": pa.array([u.layout_version for u in updates], pa.string()),
            "size_bytes": pa.array([u.size_bytes for u in updates], pa.int64()),
            "footer_offset": pa.array([u.footer_offset for u in updates], pa.int64()),
            "footer_length": pa.array([u.footer_length for u in updates], pa.int64()),
        }
    )
    cols = ("uri", "layout_version", "size_bytes", "footer_offset", "footer_length")
    delay = backoff_s
    for attempt in range(1, max_attempts + 1):
        dt = DeltaTable(table_uri, storage_options=storage_options or None)
        try:
            metrics: dict[str, Any] = (
                dt.merge(src, PREDICATE, source_alias="s", target_alias="t")
                .when_matched_update({c: f"s.{c}" for c in cols}, predicate=UPDATE_IF)
                .execute()
            )
            return int(metrics.get("num_target_rows_updated", 0))
        except CommitFailedError as exc:
            if attempt == max_attempts:
                raise RobodataError(
                    f"catalog {table_uri}: pointer merge kept conflicting after {attempt} attempts: {exc}"
                ) from exc
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 2.0)
    return 0
