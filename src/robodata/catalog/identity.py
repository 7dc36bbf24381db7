"""episode_id stays unique in the catalog: where a batch's episodes already are, and the merge lock.

The catalog is partitioned by `day`, and an episode's day can change between two ingests of it
(a failed conversion left it in `unknown`; a corrected clock moved its start by any amount; a
re-ingest that now fails has no start time and goes to `unknown`). A merge keyed by
(day, episode_id) would then leave two rows. So every merge:

1. **looks the batch's ids up in every day** (`current_days`): one lazy Polars scan of the
   `episode_id` and `day` columns with an `is_in` filter, so the Delta log's per-file and
   Parquet's per-row-group min/max statistics skip files that cannot hold them; it reads the id
   column of the remaining files, never video or the other columns;
2. adds a **tombstone** source row per copy in another day (`with_tombstones`), which the
   merge deletes in the same commit that writes the new row (last writer wins: the row that
   stays is the latest merge's, whatever its day), except that a row **without a container**
   (uri "": the re-ingest failed before conversion) never replaces a row that has one
   (`without_demotions`): the earlier container stays in the catalog, and the failure stays on
   record in its batch's ingest tables (aligned_tracks / conversions / qc_results);
3. **commits under one lock**: every merge carries the Delta app transaction `MERGE_APP_ID`.
   delta-rs fails a commit whose app transaction a concurrent winning commit also carries
   (CommitConflictError::ConcurrentTransaction -> `CommitFailedError`), so two merges never
   both commit from the same table version: the loser re-runs steps 1-3 on the new version.
   Merges are serialized (optimistic, retried with backoff), and the lookup of step 1 is
   always of the version the commit lands on. Readers (curation) are never blocked.

Cost: step 1 reads, in the worst case (ids with no order, e.g. random UUIDs), the id column of
the whole catalog: measured ~0.25 s for 5M rows on 2 cores, so a few seconds at 50M per merged
batch; ids that follow time (most fleets name episodes by robot and time) prune to a few files.
"""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction

MERGE_APP_ID = "robodata.catalog.merge"  # the app transaction every merge carries (the lock)
DROP = "_robodata_drop"  # source-only column: true on tombstones of rows that moved to another day
_ID_DAY = pa.schema([("episode_id", pa.string()), ("day", pa.string()), ("has_container", pa.bool_())])


def current_days(dt: DeltaTable, ids: list[str]) -> pa.Table:
    """(episode_id, day, has_container) of every catalog row, at `dt`'s version, whose id is in `ids`."""
    if not ids or not dt.file_uris():
        return _ID_DAY.empty_table()
    found = (
        pl.scan_delta(dt)
        .select("episode_id", "day", (pl.col("uri") != "").alias("has_container"))
        .filter(pl.col("episode_id").is_in(ids))
        .collect(engine="streaming")
    )
    return found.unique(maintain_order=True).to_arrow().cast(_ID_DAY)


def without_demotions(source: pa.Table, found: pa.Table) -> tuple[pa.Table, int]:
    """`source` less its rows without a container whose episode has a row with one; and how many."""
    with_container = {
        e
        for e, has in zip(
            found.column("episode_id").to_pylist(), found.column("has_container").to_pylist(), strict=True
        )
        if has
    }
    if not with_container:
        return source, 0
    keep = [
        not (u == "" and e in with_container)
        for e, u in zip(source.column("episode_id").to_pylist(), source.column("uri").to_pylist(), strict=True)
    ]
    kept = source.filter(pa.array(keep, pa.bool_()))
    return kept, source.num_rows - kept.num_rows


def stale_copies(found: pa.Table, source: pa.Table) -> pa.Table:
    """(episode_id, day) of rows (in `found`, from current_days) of `source`'s episodes that sit
    in a day other than their new one."""
    ids = source.column("episode_id").to_pylist()
    found = found.filter(pc.is_in(found.column("episode_id"), pa.array(ids, pa.string()))).select(["episode_id", "day"])
    if found.num_rows == 0:
        return found
    new_day = dict(zip(ids, source.column("day").to_pylist(), strict=True))
    keep = [
        new_day[e] != d
        for e, d in zip(found.column("episode_id").to_pylist(), found.column("day").to_pylist(), strict=True)
    ]
    return found.filter(pa.array(keep, pa.bool_()))


def with_tombstones(source: pa.Table, stale: pa.Table) -> pa.Table:
    """`source` plus, per stale copy, the episode's row under the old day flagged DROP."""
    out = source.append_column(DROP, pa.array([False] * source.num_rows, pa.bool_()))
    if stale.num_rows == 0:
        return out
    at = {e: i for i, e in enumerate(source.column("episode_id").to_pylist())}
    dead = source.take(pa.array([at[e] for e in stale.column("episode_id").to_pylist()], pa.int64()))
    dead = dead.set_column(dead.schema.get_field_index("day"), "day", stale.column("day"))
    return pa.concat_tables([out, dead.append_column(DROP, pa.array([True] * dead.num_rows, pa.bool_()))])


def superseded(found: pa.Table, ids: list[str], source: pa.Table) -> pa.Table:
    """Tombstones (as `with_tombstones` builds them) for the rows of `ids` in `found` that have no
    container and are not in `source`: quarantine rows that a good row of another id replaces
    (the same landing item, ingested whole this time)."""
    keep_out = set(source.column("episode_id").to_pylist())
    rows = [
        (e, d)
        for e, d, has in zip(
            *(found.column(c).to_pylist() for c in ("episode_id", "day", "has_container")), strict=True
        )
        if e in set(ids) and not has and e not in keep_out
    ]
    if not rows or source.num_rows == 0:
        return source.schema.append(pa.field(DROP, pa.bool_())).empty_table()
    dead = source.take(pa.array([0] * len(rows), pa.int64()))
    dead = dead.set_column(dead.schema.get_field_index("episode_id"), "episode_id", pa.array([e for e, _ in rows]))
    dead = dead.set_column(dead.schema.get_field_index("day"), "day", pa.array([d for _, d in rows]))
    return dead.append_column(DROP, pa.array([True] * len(rows), pa.bool_()))


def locked_commit(read_version: int, max_commit_retries: int = 100) -> CommitProperties:
    """Commit properties of a merge from `read_version`: the merge lock's app transaction.

    delta-rs still retries internally past concurrent commits that do not conflict (an
    `optimize` of other files, a `backfill`); a concurrent merge always conflicts.
    """
    return CommitProperties(
        max_commit_retries=max_commit_retries,
        app_transactions=[Transaction(app_id=MERGE_APP_ID, version=read_version + 1)],
    )
