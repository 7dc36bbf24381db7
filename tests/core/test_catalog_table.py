import multiprocessing as mp

import polars as pl
import pytest

from robodata.catalog.maintenance import optimize
from robodata.catalog.rows import CatalogError
from robodata.catalog.table import Catalog
from robodata_testing import synthetic_catalog as synthetic

SHAPE = synthetic.FleetShape(rows_per_day=100)


def _merge_worker(uri: str, ranges: list[tuple[int, int]]) -> None:
    cat = Catalog(uri)
    for start, count in ranges:
        cat.merge(synthetic.rows(SHAPE, start, count))


def test_merge_is_idempotent_and_updates(tmp_path):
    cat = Catalog(str(tmp_path / "cat"))
    rows = synthetic.rows(SHAPE, 0, 250)
    r1 = cat.merge(rows)
    assert (r1.inserted, r1.updated) == (250, 0)
    r2 = cat.merge(rows)
    assert (r2.inserted, r2.updated) == (0, 250)
    changed = pl.from_arrow(rows.slice(0, 10)).with_columns(qc_status=pl.lit("quarantined"))
    cat.merge(changed)
    df = pl.read_delta(cat.uri)
    assert df.height == 250 and df["episode_id"].n_unique() == 250
    assert df.filter(pl.col("qc_status") == "quarantined")["episode_id"].sort().to_list()[:10] == sorted(
        changed["episode_id"].to_list()
    )
    assert cat.table().metadata().partition_columns == ["day"]
    assert sorted(df["day"].unique()) == ["2024-01-01", "2024-01-02", "2024-01-03"]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda df: pl.concat([df, df.head(1)]), "duplicate episode_id"),
        (lambda df: df.with_columns(qc_status=pl.lit("maybe")), "unknown qc_status"),
        (lambda df: df.with_columns(day=pl.lit("1999-01-01")), "not the UTC date"),
        (lambda df: df.drop("uri"), "lack required"),
        (lambda df: df.with_columns(color=pl.lit(1)), "unknown column"),
        (lambda df: df.with_columns(episode_id=pl.lit(None, dtype=pl.String)), "null 'episode_id'"),
    ],
)
def test_bad_rows_are_rejected_and_nothing_is_written(tmp_path, mutate, message):
    cat = Catalog(str(tmp_path / "cat"))
    good = pl.from_arrow(synthetic.rows(SHAPE, 0, 20))
    cat.merge(good)
    version = cat.version()
    with pytest.raises(CatalogError, match=message):
        cat.merge(mutate(pl.from_arrow(synthetic.rows(SHAPE, 20, 20))))
    assert cat.version() == version
    assert pl.read_delta(cat.uri).height == 20


def test_day_is_derived_from_start_time(tmp_path):
    cat = Catalog(str(tmp_path / "cat"))
    rows = pl.from_arrow(synthetic.rows(SHAPE, 0, 150)).with_columns(day=pl.lit(None, dtype=pl.String))
    cat.merge(rows)
    df = pl.read_delta(cat.uri)
    assert (df["day"] == df["start_time"].dt.strftime("%Y-%m-%d")).all()


def test_concurrent_writers_lose_and_duplicate_nothing(tmp_path):
    uri = str(tmp_path / "cat")
    # Disjoint ranges per writer plus ranges every writer also merges (overlap), several
    # batches each, hitting the same days: commits conflict and must be retried.
    plans = [
        [(0, 40), (300, 30), (120, 40)],
        [(40, 40), (300, 30), (160, 40)],
        [(80, 40), (330, 30), (120, 40)],
    ]
    ctx = mp.get_context("spawn")  # delta-rs runtime threads must not be forked
    procs = [ctx.Process(target=_merge_worker, args=(uri, plan)) for plan in plans]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    df = pl.read_delta(uri)
    expected = {f"ep-{i:010d}" for i in list(range(0, 200)) + list(range(300, 360))}
    assert df.height == len(expected)
    assert set(df["episode_id"]) == expected
    history = Catalog(uri).table().history()
    assert sum(1 for h in history if h["operation"] == "MERGE") == 9


def test_optimize_compacts_and_keeps_rows(tmp_path):
    cat = Catalog(str(tmp_path / "cat"))
    for start in range(0, 200, 50):
        cat.merge(synthetic.rows(SHAPE, start, 50))
    before = pl.read_delta(cat.uri).sort("episode_id")
    files_before = len(cat.table().file_uris())
    metrics = optimize(cat)
    assert metrics["numFilesAdded"] >= 1
    assert len(cat.table().file_uris()) < files_before
    after = pl.read_delta(cat.uri).sort("episode_id")
    assert after.equals(before)


def test_missing_catalog_is_a_clear_error(tmp_path):
    with pytest.raises(CatalogError, match="no catalog table"):
        Catalog(str(tmp_path / "nope")).scan()


def test_quarantined_rows_without_start_time_go_to_unknown_day(tmp_path):
    from robodata.catalog.table import merge_episodes

    uri = str(tmp_path / "cat")
    row = {"episode_id": "broken-1", "uri": "", "start_time": None, "day": "", "qc_status": "quarantined"}
    assert merge_episodes(uri, [row])["inserted"] == 1
    assert merge_episodes(uri, [row])["updated"] == 1  # still keyed: re-merge does not duplicate
    df = pl.read_delta(uri)
    assert df.height == 1 and df["day"][0] == "unknown"
    with pytest.raises(CatalogError, match="must be quarantined"):
        merge_episodes(uri, [{**row, "episode_id": "x", "qc_status": "pass"}])


def test_an_episode_whose_day_changes_keeps_one_row(tmp_path):
    """Re-executing a batch after a failed conversion moves the episode out of `unknown`; a
    re-ingest with a corrected clock moves it across midnight. Either way: one row, the new one,
    and re-merging the same rows changes nothing."""
    cat = Catalog(str(tmp_path / "cat"))
    rows = pl.from_arrow(synthetic.rows(SHAPE, 0, 20))
    failed = rows.head(3).with_columns(
        start_time=None, day=pl.lit(None, dtype=pl.String), qc_status=pl.lit("quarantined"), uri=pl.lit("")
    )
    cat.merge(failed)
    first = cat.merge(rows)
    assert (first.inserted, first.moved) == (20, 3)
    shifted = rows.slice(3, 2).with_columns(
        start_time=pl.col("start_time") + pl.duration(hours=24), day=pl.lit(None, dtype=pl.String)
    )
    assert cat.merge(shifted).moved == 2
    again = cat.merge(shifted)
    assert (again.inserted, again.updated, again.moved) == (0, 2, 0)
    df = pl.read_delta(cat.uri)
    assert df.height == 20 and df["episode_id"].n_unique() == 20
    assert "unknown" not in set(df["day"])
    latest = df.join(rows.select("episode_id", pl.col("qc_status").alias("want")), on="episode_id")
    assert (latest["qc_status"] == latest["want"]).all()  # the converted rows won over the failed ones
    new_day = df.filter(pl.col("episode_id").is_in(shifted["episode_id"].to_list()))
    assert (new_day["day"] == shifted["start_time"].dt.strftime("%Y-%m-%d")).all()
