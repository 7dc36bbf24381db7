"""episode_id is unique in the catalog under concurrent writers and any change of an episode's day."""

import multiprocessing as mp

import polars as pl
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError

from robodata.catalog.identity import MERGE_APP_ID, locked_commit
from robodata.catalog.rows import conform
from robodata.catalog.table import MERGE_PREDICATE, Catalog, writer_properties
from robodata_testing import synthetic_catalog as synthetic

SHAPE = synthetic.FleetShape(rows_per_day=100)


def _shifted(start: int, count: int, days: int) -> pl.DataFrame:
    rows = pl.from_arrow(synthetic.rows(SHAPE, start, count))
    return rows.with_columns(start_time=pl.col("start_time") + pl.duration(days=days), day=pl.lit(None, pl.String))


def _days_of(uri: str) -> dict[str, list[str]]:
    df = pl.read_delta(uri).group_by("episode_id").agg(pl.col("day").sort())
    return dict(zip(df["episode_id"], df["day"].to_list(), strict=True))


def _shift_worker(uri: str, days: int, rounds: int) -> None:
    cat = Catalog(uri)
    for r in range(rounds):
        cat.merge(_shifted(0, 60, days + r))  # the same ids as every other writer, in other days


@pytest.mark.parametrize("shift_days", [2, -3, 400])
def test_a_start_moved_by_any_number_of_days_keeps_one_row(tmp_path, shift_days):
    cat = Catalog(str(tmp_path / "cat"))
    cat.merge(synthetic.rows(SHAPE, 0, 50))
    result = cat.merge(_shifted(10, 5, shift_days))
    assert result.moved == 5
    days = _days_of(cat.uri)
    assert len(days) == 50 and all(len(d) == 1 for d in days.values())
    moved = _shifted(10, 5, shift_days)
    for e, start in zip(moved["episode_id"], moved["start_time"], strict=True):
        assert days[e] == [start.strftime("%Y-%m-%d")]


def test_a_failed_reingest_never_demotes_a_row_with_a_container(tmp_path):
    """A re-ingest that failed before conversion (no container, no start time) keeps the earlier
    good row, in its day, as the only row; a QC verdict on a container does replace it."""
    cat = Catalog(str(tmp_path / "cat"))
    good = pl.from_arrow(synthetic.rows(SHAPE, 0, 10))
    cat.merge(good)
    failed = good.head(3).with_columns(
        start_time=None, day=pl.lit(None, pl.String), qc_status=pl.lit("quarantined"), uri=pl.lit("")
    )
    new_failure = pl.from_arrow(synthetic.rows(SHAPE, 50, 1)).with_columns(
        start_time=None, day=pl.lit(None, pl.String), qc_status=pl.lit("quarantined"), uri=pl.lit("")
    )
    result = cat.merge(pl.concat([failed, new_failure]))
    assert (result.not_demoted, result.inserted, result.moved) == (3, 1, 0)
    df = pl.read_delta(cat.uri)
    assert df.height == 11 and df["episode_id"].n_unique() == 11
    kept = df.filter(pl.col("episode_id").is_in(failed["episode_id"].to_list()))
    assert set(kept["qc_status"]) == {"pass"} and "unknown" not in set(kept["day"]) and "" not in set(kept["uri"])
    assert df.filter(pl.col("episode_id") == new_failure["episode_id"][0])["day"].to_list() == ["unknown"]

    verdict = good.head(2).with_columns(qc_status=pl.lit("quarantined"))  # relabel: same containers
    assert cat.merge(verdict).updated == 2
    df = pl.read_delta(cat.uri)
    assert df.height == 11
    assert set(df.filter(pl.col("episode_id").is_in(verdict["episode_id"].to_list()))["qc_status"]) == {"quarantined"}

    moved = good.slice(5, 1).with_columns(
        start_time=pl.col("start_time") + pl.duration(days=5), day=pl.lit(None, pl.String), uri=pl.lit("s3://b/n.rdep")
    )
    assert cat.merge(moved).moved == 1  # a row with a container moves to its new day, still one row
    df = pl.read_delta(cat.uri)
    new_day = moved["start_time"][0].strftime("%Y-%m-%d")
    assert df.height == 11 and df.filter(pl.col("episode_id") == moved["episode_id"][0])["day"].to_list() == [new_day]


def test_two_merges_from_one_version_conflict_through_the_lock(tmp_path):
    """Two merges of one new id into different days, both planned at one table version: without
    the lock delta-rs commits both (disjoint partitions); with it the second fails and must re-run."""
    cat = Catalog(str(tmp_path / "cat"))
    cat.merge(synthetic.rows(SHAPE, 0, 5))

    def merge(dt: DeltaTable, index: int, days: int, locked: bool) -> None:
        src = conform(_shifted(index, 1, days)).append_column("_robodata_drop", pl.Series([False]).to_arrow())
        dt.merge(
            src, MERGE_PREDICATE, source_alias="s", target_alias="t", writer_properties=writer_properties(),
            streamed_exec=False, commit_properties=locked_commit(dt.version()) if locked else None,
        ).when_not_matched_insert_all(except_cols=["_robodata_drop"]).execute()  # fmt: skip

    for index, locked in ((100, False), (101, True)):
        v = cat.version()
        a, b = DeltaTable(cat.uri, version=v), DeltaTable(cat.uri, version=v)
        merge(a, index, 1, locked)
        if locked:
            with pytest.raises(CommitFailedError, match="Concurrent transaction"):
                merge(b, index, 5, locked)
            assert DeltaTable(cat.uri).transaction_version(MERGE_APP_ID) == v + 1
        else:
            merge(b, index, 5, locked)  # the duplicate the lock exists for
    days = _days_of(cat.uri)
    assert len(days["ep-0000000100"]) == 2 and len(days["ep-0000000101"]) == 1


def test_concurrent_writers_merging_the_same_ids_into_different_days_leave_one_row_each(tmp_path):
    uri = str(tmp_path / "cat")
    Catalog(uri).create_if_missing()
    ctx = mp.get_context("spawn")  # delta-rs runtime threads must not be forked
    procs = [ctx.Process(target=_shift_worker, args=(uri, 3 * k, 2)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0
    days = _days_of(uri)
    assert len(days) == 60
    assert all(len(d) == 1 for d in days.values()), {e: d for e, d in days.items() if len(d) > 1}
    history = Catalog(uri).table().history()
    assert sum(1 for h in history if h["operation"] == "MERGE") == 6
