"""Curation through the optimized catalog's sidecars (robodata.catalog.sidecar, robodata.curate.keyscan)
selects exactly the rows the plain scan selects: after `optimize`, after merges that leave files
without sidecars, and when a sidecar is stale or altered (it is then not used)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robodata.catalog import sidecar, synthetic
from robodata.catalog.maintenance import OptimizeConfig, optimize, write_sidecars
from robodata.catalog.table import Catalog
from robodata.curate.select import evaluate, select
from robodata.curate.spec import spec_from_dict
from tests.core.test_curate_golden import SPECS, golden_catalog

NAMES = ["fold_days", "fold_full", "quality_only", "sites_budget", "only_listed"]


def _plain(catalog: Catalog, name: str) -> pl.DataFrame:
    """The reference: the same spec over `pl.scan_delta` of the same version (no addresses, no sidecars)."""
    rows, _ = evaluate(spec_from_dict(SPECS[name]), pl.scan_delta(catalog.table()))
    return rows


@pytest.fixture(scope="module")
def optimized(tmp_path_factory) -> Catalog:
    cat = golden_catalog(tmp_path_factory.mktemp("sidecar") / "catalog")
    metrics = optimize(cat, None, OptimizeConfig(row_group_rows=1024, split_salt="bench"))  # the fold specs' salt
    assert metrics["sidecarsWritten"] == metrics["numFilesAdded"] > 0
    return cat


@pytest.fixture
def counted_takes(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = sidecar.take_many

    def take_many(picks, order=None, footers=None):
        calls.extend(len(positions) for _, positions in picks)
        return real(picks, order, footers)

    monkeypatch.setattr(sidecar, "take_many", take_many)
    return calls


@pytest.mark.parametrize("name", NAMES)
def test_sidecars_give_the_rows_of_the_plain_scan(optimized, counted_takes, passes, name):
    got = select(spec_from_dict(SPECS[name]), optimized).rows
    budgeted = "budget" in SPECS[name]
    assert passes == ([True] if budgeted else [])  # ids from the sidecars, checked, in one pass
    assert got.equals(_plain(optimized, name))
    assert (sum(counted_takes) == got.height) if budgeted else not counted_takes


def test_files_a_merge_wrote_after_optimize_are_read_from_parquet(tmp_path, counted_takes):
    cat = golden_catalog(tmp_path / "catalog")
    optimize(cat)
    shape = synthetic.FleetShape(rows_per_day=500, batch_size=700)
    changed = pl.DataFrame(synthetic.rows(shape, 5800, 400)).with_columns(quality_score=pl.lit(0.99, pl.Float32))
    cat.merge(changed.to_arrow())  # rewrites the last day's file (no sidecar) and adds a new day
    for name in NAMES:
        assert select(spec_from_dict(SPECS[name]), cat).rows.equals(_plain(cat, name)), name
    assert counted_takes  # the days optimize wrote still come from their sidecars


def test_an_altered_or_stale_sidecar_is_not_used(tmp_path):
    cat = golden_catalog(tmp_path / "catalog")
    optimize(cat)
    folder = Path(cat.uri) / sidecar.SIDECAR_DIR
    cars = sorted(folder.glob("*" + sidecar.SUFFIX))
    assert len(cars) >= 3
    shutil.copyfile(cars[1], cars[0])  # another file's rows under this file's name
    cars[2].rename(cars[2].with_name(cars[2].name.replace("~", "~1", 1)))  # a size that is not the file's
    for name in NAMES:
        assert select(spec_from_dict(SPECS[name]), cat).rows.equals(_plain(cat, name)), name


def test_sidecar_facts_follow_the_rows(tmp_path):
    shape = synthetic.FleetShape(rows_per_day=50, batch_size=50)
    rows = pl.DataFrame(synthetic.rows(shape, 0, 100))
    i = pl.int_range(pl.len())
    rows = rows.with_columns(  # day 1: one row without a container; day 2: one failed check
        uri=pl.when(i == 3).then(pl.lit("")).otherwise(pl.col("uri")),
        qc_failed=pl.when(i == 60).then(pl.lit(["clock"])).otherwise(pl.col("qc_failed")),
    )
    cat = Catalog(str(tmp_path / "catalog"))
    cat.backfill(rows.to_arrow())
    optimize(cat)
    facts = {car.path.name.split("%2F")[0]: (car.loadable, car.no_failed_checks) for car in _all(cat)}
    assert facts == {"day%3D2024-01-01": (False, True), "day%3D2024-01-02": (True, False)}
    spec = spec_from_dict({"version": 1, "name": "all", "budget": {"total_hours": 1000}})
    got = select(spec, cat).rows
    assert got.height == 98 and "ep-0000000003" not in got["episode_id"] and "ep-0000000060" not in got["episode_id"]


def _all(cat: Catalog) -> list[sidecar.Sidecar]:
    actions = cat.table().get_add_actions(flatten=True)
    files = list(
        zip(
            actions.column("path").to_pylist(),
            actions.column("size_bytes").to_pylist(),
            actions.column("num_records").to_pylist(),
            strict=True,
        )
    )
    return list(sidecar.find(cat.uri, files).values())


def test_sidecars_of_vacuumed_files_are_removed_and_live_files_keep_theirs(tmp_path):
    cat = Catalog(str(tmp_path / "catalog"))
    cat.backfill(synthetic.rows(synthetic.FleetShape(rows_per_day=50, batch_size=50), 0, 100))
    optimize(cat)
    optimize(cat)  # rewrites both days: the first run's files leave the table, still on disk
    folder = Path(cat.uri) / sidecar.SIDECAR_DIR
    assert len(list(folder.glob("*" + sidecar.SUFFIX))) == 4
    assert write_sidecars(cat.table()) == (0, 0)  # older versions still read those files: kept
    cat.table().vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    assert write_sidecars(cat.table()) == (0, 4)  # two sidecars and their heads
    assert len(_all(cat)) == len(list(folder.glob("*" + sidecar.SUFFIX))) == 2
    assert sorted(p.name for p in folder.glob("*" + sidecar.HEAD_SUFFIX)) == sorted(
        c.head.name for c in _all(cat) if c.head is not None
    )
    assert all(c.head is not None for c in _all(cat))


def test_ids_set_aside_come_only_from_a_sidecar_that_checks(tmp_path, passes):
    """The key scan leaves the ids of files with a sidecar to it; a sidecar whose ids were altered
    (checksum), or any failure reading them, makes curation read every id from Parquet instead.
    A spec of the sidecars' salt takes its hashes as stored, not from the ids: its kept rows'
    checksums then refuse them and they are read from Parquet."""
    cat = golden_catalog(tmp_path / "catalog")
    optimize(cat)
    cars = sorted((Path(cat.uri) / sidecar.SIDECAR_DIR).glob("*" + sidecar.SUFFIX))
    for car in cars:  # every id of every file altered: without the check, the manifest would name them
        car.write_bytes(car.read_bytes().replace(b"ep-", b"xp-"))
    for name in NAMES:
        passes.clear()
        got = select(spec_from_dict(SPECS[name]), cat).rows
        stored = SPECS[name].get("split", {}).get("salt", "") == ""  # optimize's default split_salt
        redone = [True] if stored else [True, False]  # checked, refused, redone
        assert passes == (redone if "budget" in SPECS[name] else []), name
        assert got.equals(_plain(cat, name)), name
        assert not got["episode_id"].str.starts_with("xp-").any()


def test_unreadable_sidecars_of_the_specs_salt_are_not_used(tmp_path):
    """Every sidecar's magic altered (the salt check opens one before any other read): the rows of
    the plain scan, for specs of the sidecars' salt and of others."""
    cat = golden_catalog(tmp_path / "catalog")
    optimize(cat, None, OptimizeConfig(split_salt="bench"))
    for car in (Path(cat.uri) / sidecar.SIDECAR_DIR).glob("*" + sidecar.SUFFIX):
        body = car.read_bytes()
        car.write_bytes(bytes([body[0] ^ 1]) + body[1:])
    for name in [*NAMES, "fold_full_clean"]:
        assert select(spec_from_dict(SPECS[name]), cat).rows.equals(_plain(cat, name)), name


def test_a_failure_hashing_set_aside_ids_reads_them_from_parquet(optimized, monkeypatch):
    from robodata.curate import keyscan

    calls: list[int] = []

    def failing(self, rows, ids, salt, stop=None):
        calls.append(len(rows))
        raise OSError("gone")

    monkeypatch.setattr(keyscan.CatalogSource, "hashes", failing)
    for name in NAMES:
        assert select(spec_from_dict(SPECS[name]), optimized).rows.equals(_plain(optimized, name)), name
    assert calls  # the budgeted specs tried the sidecars first


def test_a_spec_of_the_sidecars_salt_reads_only_their_prefixes(optimized, monkeypatch, passes):
    """fold_full_clean's salt is the one the sidecars are ordered by (and its durations let the
    linear rule decide): its budget reads the records under its thresholds (a fraction of its
    candidates) and hashes no candidate; a failure reading them redoes the evaluation with ids
    from Parquet. (Heads out of the way: with them, such a spec is decided on their prefixes,
    tests/core/test_curate_prefix.py.)"""
    from robodata.curate import keyscan, prefix

    def no_heads(spec, source):
        raise prefix.Unproven("heads out of the way")

    monkeypatch.setattr(prefix, "needs", no_heads)

    hashed: list[int] = []
    read: list[tuple[int, int]] = []  # (candidates, rows returned under the thresholds)
    real_hashes, real_under = keyscan.CatalogSource.hashes, keyscan.CatalogSource.under

    def hashes(self, rows, ids, salt, stop=None):
        hashed.append(len(rows))
        return real_hashes(self, rows, ids, salt, stop)

    def under(self, rows, salt, last, codes):
        got = real_under(self, rows, salt, last, codes)
        read.append((len(rows), len(got[0])))
        return got

    monkeypatch.setattr(keyscan.CatalogSource, "hashes", hashes)
    monkeypatch.setattr(keyscan.CatalogSource, "under", under)
    want = _plain(optimized, "fold_full_clean")
    passes.clear()  # the plain scan's pass
    got = select(spec_from_dict(SPECS["fold_full_clean"]), optimized).rows
    assert got.equals(want) and passes == [True] and not hashed
    assert read and all(0 < found < candidates for candidates, found in read)
    read.clear()
    assert select(spec_from_dict(SPECS["sites_budget"]), optimized).rows.equals(_PLAIN_ROWS["sites_budget"])
    assert hashed and not read  # another salt: its candidates' ids are hashed

    def failing(self, rows, salt, last, codes):
        raise OSError("gone")

    monkeypatch.setattr(keyscan.CatalogSource, "under", failing)
    passes.clear()
    assert select(spec_from_dict(SPECS["fold_full_clean"]), optimized).rows.equals(want)
    assert passes == [True, False]


def test_exclusions_proven_by_file_statistics_leave_that_file_scan(tmp_path, monkeypatch):
    """A file whose min/max put no excluded value in range (and has no null) is scanned without
    that term; one holding the value, or a null, keeps it. Rows as the plain scan's."""
    from robodata.curate import select as select_module

    shape = synthetic.FleetShape(rows_per_day=40, batch_size=40)
    rows = pl.DataFrame(synthetic.rows(shape, 0, 120))  # three days, one file each
    i = pl.int_range(pl.len())
    rows = rows.with_columns(  # day 1 holds the excluded batch; day 2 a null batch; day 3 neither
        ingest_batch=pl.when(i < 40).then(pl.lit("b-x")).when(i == 50).then(None).otherwise(pl.lit("b-y"))
    )
    cat = Catalog(str(tmp_path / "catalog"))
    cat.backfill(rows.to_arrow())
    seen: list[frozenset[int]] = []
    real = select_module._predicate

    def spy(spec, base_dir, loadable=False, no_failed=False, proven=frozenset()):
        seen.append(proven)
        return real(spec, base_dir, loadable, no_failed, proven)

    monkeypatch.setattr(select_module, "_predicate", spy)
    spec = spec_from_dict({"version": 1, "name": "x", "exclude": {"batches": ["b-x"]}})  # keeps every candidate
    got = select(spec, cat).rows
    assert sorted(seen, key=sorted) == [frozenset(), frozenset({0})]  # days 1 and 2 together, day 3 alone
    monkeypatch.setattr(select_module, "_predicate", real)
    want, _ = evaluate(spec, pl.scan_delta(cat.table()))
    assert got.equals(want) and got.height > 0
    assert not got["episode_id"].is_in(rows.filter(i.lt(40) | i.eq(50))["episode_id"].implode()).any()


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    which=st.integers(0, 10**6),
    at=st.floats(0, 1, exclude_max=True),
    flip=st.integers(1, 255),
    target=st.sampled_from(["anywhere", "a kept row's record", "a kept row's uri", "a kept row's slot or hash"]),
)
def test_a_byte_altered_anywhere_in_a_sidecar_never_reaches_a_manifest(optimized, which, at, flip, target):
    """Fuzz (fixed seed): one byte of one sidecar changed (header, records, offsets, strings, slots,
    hashes or padding; or, aimed, in a row the spec keeps); every budgeted spec still selects
    exactly the plain scan's rows (fold_full_clean reads the sidecars' prefixes, fold_full their
    stored hashes, sites_budget hashes ids)."""
    cars = sorted((Path(optimized.uri) / sidecar.SIDECAR_DIR).glob("*" + sidecar.SUFFIX))
    if target == "anywhere":
        car = cars[which % len(cars)]
        pos = int(at * car.stat().st_size)
    else:
        car, pos = _kept_row_byte(cars, which, at, target.split("'s ")[1])
    good = car.read_bytes()
    car.write_bytes(good[:pos] + bytes([good[pos] ^ flip]) + good[pos + 1 :])
    try:
        for name in _FUZZED:
            got = select(spec_from_dict(SPECS[name]), optimized).rows
            assert got.equals(_PLAIN_ROWS[name]), (name, car.name, pos)
    finally:
        car.write_bytes(good)


def _kept_row_byte(cars: list[Path], which: int, at: float, part: str) -> tuple[Path, int]:
    """A byte of the record (uri; slot, hash or row number) of a row fold_full_clean keeps: (its
    sidecar, its position)."""
    import json
    import struct

    from robodata.catalog import rowpack

    kept = set(_PLAIN_ROWS["fold_full_clean"]["episode_id"].to_list())
    rows = []
    for car in cars:
        body = car.read_bytes()
        (_, head_len) = struct.unpack_from("<8sQ", body)
        sections = json.loads(body[16 : 16 + head_len])["sections"]
        starts = [16 + head_len + sum(sections[:k]) for k in range(8)]
        n = json.loads(body[16 : 16 + head_len])["rows"]
        offs = [np.frombuffer(body, np.int64, n + 1, starts[k]) for k in (1, 3)]
        row_of = np.frombuffer(body, np.uint32, n, starts[7])  # record i is row row_of[i]
        for i in range(n):
            if body[starts[2] + offs[0][i] : starts[2] + offs[0][i + 1]].decode() in kept:
                uri = (starts[4] + int(offs[1][i]), int(offs[1][i + 1] - offs[1][i]))
                order = (starts[5] + 4 * int(row_of[i]) + 1, starts[6] + 8 * i + 7, starts[7] + 4 * i)  # slot hash row
                rows.append((car, starts[0] + i * rowpack.RECORD.itemsize, uri, order))
    car, record_at, (uri_at, uri_len), order = rows[which % len(rows)]
    if part == "uri" and uri_len:
        return car, uri_at + int(at * uri_len)
    if part == "slot or hash":
        return car, order[int(at * 3)]
    return car, record_at + int(at * rowpack.RECORD.itemsize)


_PLAIN_ROWS: dict[str, pl.DataFrame] = {}
_FUZZED = ("fold_full_clean", "fold_full", "sites_budget")


@pytest.fixture(scope="module", autouse=True)
def _plain_rows(optimized):
    """The plain scan's rows of the fuzzed specs, once (the catalog's data files never change)."""
    for name in _FUZZED:
        _PLAIN_ROWS[name] = _plain(optimized, name)
