"""Budgeted specs decided on the prefixes of the data files' heads (robodata.curate.prefix,
robodata.catalog.headpack) select exactly the rows of the plain scan; where the prefixes cannot
prove that (a head missing, stale or altered, a bad duration the spec admits, an uncapped group,
another salt), curation takes the key scan and still selects them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robodata.catalog import headpack, sidecar, synthetic
from robodata.catalog.maintenance import OptimizeConfig, optimize, write_sidecars
from robodata.catalog.table import Catalog
from robodata.curate import prefix
from robodata.curate.select import evaluate, select
from robodata.curate.spec import spec_from_dict

SALT = "p"  # the split salt the catalogs are optimized for
SPEC = {
    "version": 1,
    "name": "prefix",
    "filters": [
        {"column": "quality_score", "op": ">=", "value": 0.3},
        {"column": "task", "op": "in", "value": ["fold_towel", "fold_shirt", "hang_cloth", "box_pack"]},
    ],
    "mix": {"by": "task", "weights": {"fold_towel": 3, "fold_shirt": 2, "hang_cloth": 1, "box_pack": 1}},
    "budget": {"total_hours": 20, "per_group_hours": {"box_pack": 2}},
    "exclude": {"robots": ["sfo-1-r003"]},
    "split": {"val_fraction": 0.1, "salt": SALT},
}


def _catalog(path: Path, rows: int = 6000, per_day: int = 1000, salt: str = SALT) -> Catalog:
    cat = Catalog(str(path))
    cat.backfill(synthetic.rows(synthetic.FleetShape(rows_per_day=per_day, batch_size=per_day), 0, rows))
    optimize(cat, None, OptimizeConfig(row_group_rows=1024, split_salt=salt))
    return cat


def _plain(spec_doc: dict, cat: Catalog) -> pl.DataFrame:
    rows, _ = evaluate(spec_from_dict(spec_doc), pl.scan_delta(cat.table()))
    return rows


@pytest.fixture(scope="module")
def cat(tmp_path_factory) -> Catalog:
    return _catalog(tmp_path_factory.mktemp("prefix") / "catalog")


@pytest.fixture
def decided(monkeypatch) -> list[tuple[int, int]]:
    """(candidates read, rows kept) of each evaluation `prefix.decide` decided; scans: `_capped` calls."""
    calls: list[tuple[int, int]] = []
    real = prefix.decide

    def decide(*args):
        got = real(*args)  # raises Unproven where the prefixes cannot decide
        calls.append((got.first.height, len(got.decided.keep)))
        return got

    monkeypatch.setattr(prefix, "decide", decide)
    return calls


def test_a_budgeted_spec_of_the_heads_salt_reads_only_their_prefixes(cat, decided, passes):
    want = _plain(SPEC, cat)
    passes.clear()  # the plain scan's
    selection = select(spec_from_dict(SPEC), cat)
    got = selection.rows
    assert not passes and selection.evaluated_by == "prefixes"  # no key scan
    assert got.equals(want) and got.height > 100
    ((read, kept),) = decided
    candidates = pl.scan_delta(cat.table()).filter(pl.col("quality_score") >= 0.3).collect().height
    assert kept == got.height and read < candidates  # a prefix of the candidates, not all


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"split": {"val_fraction": 0.1, "salt": "other"}}, "key scan: heads in the order of salt 'p/budget'"),
        ({"budget": {"per_group_hours": {"box_pack": 2}}}, "key scan: a group without a cap"),
        ({"budget": {}}, "key scan"),  # no caps: every candidate is kept, the prefixes are not tried
        ({"exclude": {"episode_ids": ["ep-0000000007"]}}, "key scan: it excludes episode ids"),
        ({"filters": [{"column": "stream_rates_json", "op": "==", "value": "{}"}]}, "key scan: heads do not hold"),
    ],
)
def test_specs_the_prefixes_cannot_serve_take_the_key_scan(cat, decided, change, why):
    doc = {**SPEC, **change}
    got = select(spec_from_dict(doc), cat)
    assert got.rows.equals(_plain(doc, cat))
    assert not decided and got.evaluated_by.startswith(why), got.evaluated_by


def test_a_group_absent_from_the_prefixes_is_not_assumed_absent(tmp_path, decided):
    """One episode of a rare task, last in the hash order: the caps are shares of the groups
    present among all candidates, so its group's threshold widens to the whole order (and the
    others' do not) before the prefixes decide."""
    shape = synthetic.FleetShape(rows_per_day=1000, batch_size=1000)
    df = pl.DataFrame(synthetic.rows(shape, 0, 3000))
    from robodata.curate.stablehash import stable_hash64

    far = int(np.argmax(stable_hash64(df["episode_id"], SALT + "/budget")))
    df = df.with_columns(task=pl.when(pl.int_range(pl.len()) == far).then(pl.lit("rare")).otherwise(pl.col("task")))
    cat = Catalog(str(tmp_path / "catalog"))
    cat.backfill(df.to_arrow())
    optimize(cat, None, OptimizeConfig(split_salt=SALT))
    doc = {**SPEC, "filters": [], "mix": {"by": "task", "weights": {"rare": 1}, "default_weight": 1}}
    got = select(spec_from_dict(doc), cat).rows
    assert got.equals(_plain(doc, cat)) and "rare" in got["task"].to_list()
    ((read, _),) = decided
    assert read < df.height  # the other groups' rows only up to their thresholds


def test_a_bad_duration_the_spec_admits_takes_the_key_scan(tmp_path, decided):
    shape = synthetic.FleetShape(rows_per_day=1000, batch_size=1000)
    df = pl.DataFrame(synthetic.rows(shape, 0, 3000))
    i = pl.int_range(pl.len())
    df = df.with_columns(duration_s=pl.when(i == 5).then(-30.0).when(i == 6).then(float("nan")).otherwise("duration_s"))
    cat = Catalog(str(tmp_path / "catalog"))
    cat.backfill(df.to_arrow())
    optimize(cat, None, OptimizeConfig(split_salt=SALT))
    doc = {**SPEC, "filters": [], "exclude": {}}
    assert select(spec_from_dict(doc), cat).rows.equals(_plain(doc, cat))
    assert not decided  # a candidate's duration is negative: the linear rule does not hold
    clean = {**doc, "filters": [{"column": "duration_s", "op": "between", "value": [0, 1e6]}]}  # NaN > 1e6
    assert select(spec_from_dict(clean), cat).rows.equals(_plain(clean, cat))
    assert len(decided) == 1  # the spec leaves them out: the prefixes decide


def test_altered_stale_or_missing_heads_are_not_used(tmp_path, decided):
    cat = _catalog(tmp_path / "catalog")
    want = _plain(SPEC, cat)
    heads = sorted((Path(cat.uri) / sidecar.SIDECAR_DIR).glob("*" + sidecar.HEAD_SUFFIX))
    assert len(heads) == 6
    saved = {h: h.read_bytes() for h in heads}

    def check(expect_decided: bool) -> None:
        decided.clear()
        assert select(spec_from_dict(SPEC), cat).rows.equals(want)
        assert bool(decided) == expect_decided
        for h, body in saved.items():
            h.write_bytes(body)

    check(True)
    body = bytearray(saved[heads[0]])
    body[-100] ^= 1  # a byte of its last section (the values of a column read last)
    heads[0].write_bytes(bytes(body))
    decided.clear()
    assert select(spec_from_dict(SPEC), cat).rows.equals(want)  # refused by its checksum, if read
    for h, b in saved.items():
        h.write_bytes(b)
    shutil.copyfile(heads[1], heads[0])  # another file's head under this file's name
    check(False)
    heads[2].unlink()  # a file without a head
    check(False)
    heads[3].write_bytes(saved[heads[3]][:-64])  # cut short
    check(False)
    body = bytearray(saved[heads[4]])
    body[20] ^= 1  # its header
    heads[4].write_bytes(bytes(body))
    check(False)


def test_every_read_of_a_head_is_checked(tmp_path):
    cat = _catalog(tmp_path / "catalog", rows=9000, per_day=9000)
    (path,) = (Path(cat.uri) / sidecar.SIDECAR_DIR).glob("*" + sidecar.HEAD_SUFFIX)
    good = headpack.HeadFile(path, 9000)
    assert good.end(2**64 - 1) == 9000 and good.end(0) == 0
    keys = good.read(headpack.KEYS, 0, 9000).values
    assert bool((keys["hash"][1:] >= keys["hash"][:-1]).all()) and sorted(keys["row"].tolist()) == list(range(9000))
    good.close()
    raw = bytearray(path.read_bytes())
    raw[-8] ^= 0x10  # the last block of the last section
    path.write_bytes(bytes(raw))
    bad = headpack.HeadFile(path, 9000)
    last = list(headpack.COLUMNS)[-1]
    assert bad.read(last, 0, 4096).values is not None  # the first block is intact
    with pytest.raises(ValueError, match="checksum"):
        bad.read(last, 8990, 9000)
    bad.close()
    with pytest.raises(ValueError, match="other rows"):
        headpack.HeadFile(path, 9001)


def test_a_head_holds_its_files_columns_in_hash_order(tmp_path):
    """Nulls and every kind of column, as Parquet holds them."""
    shape = synthetic.FleetShape(rows_per_day=500, batch_size=500)
    df = pl.DataFrame(synthetic.rows(shape, 0, 500))
    i = pl.int_range(pl.len())
    df = df.with_columns(
        task=pl.when(i % 7 == 0).then(None).otherwise("task"),
        quality_score=pl.when(i % 5 == 0).then(None).otherwise("quality_score"),
        success=pl.when(i % 3 == 0).then(None).otherwise("success"),
        start_time=pl.when(i % 11 == 0).then(None).otherwise("start_time"),
        qc_failed=pl.when(i % 13 == 0).then(pl.lit(["clock", "frames"])).otherwise("qc_failed"),
        uri=pl.when(i % 17 == 0).then(pl.lit("")).otherwise("uri"),
        duration_s=pl.when(i % 19 == 0).then(-1.0).when(i % 23 == 0).then(float("nan")).otherwise("duration_s"),
    )
    table = df.to_arrow()
    from robodata.curate.stablehash import stable_hash64

    image = headpack.encode(table, 1234, "s")
    path = tmp_path / "h"
    path.write_bytes(image)
    h = headpack.HeadFile(path, 500)
    assert h.footer_crc == 1234 and h.order_salt == "s"
    order = np.argsort(stable_hash64(table.column("episode_id"), "s"), kind="stable")
    keys = h.read(headpack.KEYS, 0, 500).values
    assert np.array_equal(keys["row"], order)
    assert np.array_equal(keys["loadable"] != 0, (df["uri"].fill_null("") != "").to_numpy()[order])
    for c in headpack.COLUMNS:
        got = prefix._column(c, [h.read(c, 0, 200), h.read(c, 200, 500)])
        assert got.equals(df[c].gather(order), check_names=False), c
    bad = df.with_row_index("r").filter((i % 19 == 0) | (i % 23 == 0))  # durations < 0 or NaN
    assert h.bad_durations == bad.height
    again = h.read(headpack.KEYS + headpack.BAD, 0, bad.height).values  # those rows, on their own
    assert sorted(again["row"].tolist()) == bad["r"].to_list()
    at = again["row"].astype(np.int64)
    for c in headpack.COLUMNS:
        got = prefix._column(c, [h.read(c + headpack.BAD, 0, bad.height)])
        assert got.equals(df[c].gather(at), check_names=False), c
    good = df["duration_s"].filter(df["duration_s"].is_finite() & (df["duration_s"] >= 0)).sum()
    assert good <= h.duration_sum <= good * (1 + 1e-12)
    h.close()


def test_heads_are_written_for_sidecars_written_before_them(tmp_path):
    cat = _catalog(tmp_path / "catalog", rows=2000)
    folder = Path(cat.uri) / sidecar.SIDECAR_DIR
    for h in folder.glob("*" + sidecar.HEAD_SUFFIX):
        h.unlink()
    assert write_sidecars(cat.table(), SALT) == (2, 0)  # the heads, in their sidecars' order
    assert len(list(folder.glob("*" + sidecar.HEAD_SUFFIX))) == 2
    assert select(spec_from_dict(SPEC), cat).rows.equals(_plain(SPEC, cat))
    head = next(folder.glob("*" + sidecar.HEAD_SUFFIX))
    car = head.with_name(head.name.removesuffix(sidecar.HEAD_SUFFIX) + sidecar.SUFFIX)
    head.unlink()
    car.write_bytes(b"not a sidecar" + car.read_bytes()[13:])  # unreadable: rewritten with its head
    assert write_sidecars(cat.table(), SALT) == (1, 0)
    rf = sidecar.rowpack.RowFile(car, 1000)
    assert head.exists() and rf.order_salt == SALT + "/budget"
    rf.close()


@st.composite
def _tables(draw) -> pa.Table:
    days, per_day = draw(st.integers(1, 4)), draw(st.integers(1, 400))
    df = pl.DataFrame(synthetic.rows(synthetic.FleetShape(rows_per_day=per_day, batch_size=per_day), 0, days * per_day))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = df.height

    def some(p: float) -> pl.Series:
        return pl.Series(rng.random(n) < p)

    hostile = draw(st.sampled_from([0.0, 0.01, 0.2]))
    undated = some(draw(st.sampled_from([0.0, 0.02])))
    odd = pl.Series(rng.choice([-5.0, float("nan"), float("inf"), 0.0], n))
    return df.with_columns(
        duration_s=pl.when(some(hostile)).then(odd).when(some(0.05)).then(None).otherwise("duration_s"),
        task=pl.when(some(0.05)).then(None).otherwise("task"),
        site=pl.when(some(0.05)).then(None).otherwise("site"),
        quality_score=pl.when(some(0.05)).then(None).otherwise("quality_score"),
        uri=pl.when(some(0.05)).then(pl.lit("")).otherwise("uri"),
        qc_failed=pl.when(some(0.05)).then(pl.lit(["clock"])).otherwise("qc_failed"),
        start_time=pl.when(undated).then(None).otherwise("start_time"),  # quarantined, day unknown
        day=pl.when(undated).then(None).otherwise("day"),
        qc_status=pl.when(undated).then(pl.lit("quarantined")).otherwise("qc_status"),
    ).to_arrow()


@st.composite
def _budgeted(draw) -> dict:
    tasks = ["fold_towel", "fold_shirt", "hang_cloth", "box_pack", "bin_sort"]
    filters = draw(
        st.lists(
            st.one_of(
                st.builds(lambda v: {"column": "quality_score", "op": ">=", "value": v}, st.floats(0, 1)),
                st.builds(
                    lambda v: {"column": "task", "op": "in", "value": v}, st.lists(st.sampled_from(tasks), min_size=1)
                ),
                st.builds(lambda v: {"column": "duration_s", "op": "<", "value": v}, st.floats(0, 300)),
                st.just({"column": "duration_s", "op": ">=", "value": 0}),
                st.just({"column": "success", "op": "==", "value": True}),
                st.just({"column": "cameras", "op": "contains", "value": "wrist"}),
                st.just({"column": "day", "op": ">=", "value": "2024-01-02"}),
                st.just({"column": "day", "op": "<", "value": "2024-01-03"}),
                st.just({"column": "start_time", "op": "not_null"}),
            ),
            max_size=3,
        )
    )
    doc: dict = {"version": 1, "name": "prop", "filters": filters, "split": {"val_fraction": 0.2, "salt": SALT}}
    if draw(st.booleans()):
        by = draw(st.sampled_from(["task", "site"]))
        weights = draw(st.dictionaries(st.sampled_from(tasks + ["sfo-1", ""]), st.floats(0, 5), max_size=3))
        doc["mix"] = {"by": by, "weights": weights, "default_weight": draw(st.sampled_from([0.0, 1.0]))}
        if draw(st.booleans()):
            doc["budget"] = {"per_group_hours": {draw(st.sampled_from(tasks + [""])): draw(st.floats(0.01, 2))}}
    doc.setdefault("budget", {})["total_hours"] = draw(st.floats(0.01, 30))
    if draw(st.booleans()):
        doc["exclude"] = {"robots": ["sfo-1-r003"], "batches": ["batch-1"]}
    return doc


@settings(
    max_examples=int(os.environ.get("PREFIX_EXAMPLES", "60")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(table=_tables(), doc=_budgeted())
def test_random_catalogs_x_budgeted_specs_select_the_plain_scans_rows(tmp_path_factory, table, doc):
    cat = Catalog(str(tmp_path_factory.mktemp("c") / "cat"))
    cat.backfill(table)
    optimize(cat, None, OptimizeConfig(row_group_rows=1024, split_salt=SALT))
    spec = spec_from_dict(doc)
    want, _ = evaluate(spec, pl.scan_delta(cat.table()))
    assert select(spec, cat).rows.equals(want)


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> tuple[Catalog, pl.DataFrame]:
    """The golden catalog (hostile rows) optimized for fold_full_clean's salt, and that spec's rows
    by the plain scan."""
    from tests.core.test_curate_golden import SPECS, golden_catalog

    cat = golden_catalog(tmp_path_factory.mktemp("golden") / "catalog")
    optimize(cat, None, OptimizeConfig(row_group_rows=1024, split_salt="bench"))
    return cat, _plain(SPECS["fold_full_clean"], cat)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 10**6), at=st.floats(0, 1, exclude_max=True), flip=st.integers(1, 255))
def test_a_byte_altered_anywhere_in_a_head_never_reaches_a_manifest(golden, which, at, flip):
    """Fuzz (fixed seed): one byte of one head changed (its header, its keys, any column, the
    padding); fold_full_clean, decided on the prefixes when they check, still selects exactly
    the plain scan's rows."""
    from tests.core.test_curate_golden import SPECS

    cat, want = golden
    heads = sorted((Path(cat.uri) / sidecar.SIDECAR_DIR).glob("*" + sidecar.HEAD_SUFFIX))
    head = heads[which % len(heads)]
    good = head.read_bytes()
    pos = int(at * len(good))
    head.write_bytes(good[:pos] + bytes([good[pos] ^ flip]) + good[pos + 1 :])
    try:
        assert select(spec_from_dict(SPECS["fold_full_clean"]), cat).rows.equals(want), (head.name, pos)
    finally:
        head.write_bytes(good)


def test_the_golden_fold_clean_spec_is_decided_on_the_prefixes(golden, decided):
    from tests.core.test_curate_golden import SPECS

    cat, want = golden
    assert select(spec_from_dict(SPECS["fold_full_clean"]), cat).rows.equals(want)
    assert decided  # so the fuzz above alters what the prefixes read


def test_heads_are_open_one_at_a_time(cat, decided, monkeypatch):
    """A catalog of thousands of days must not hold a descriptor per head."""
    import os as os_module

    opened: set[int] = set()
    most = [0]
    real_open, real_close = os_module.open, os_module.close

    def counting_open(path, *args, **kwargs):
        fd = real_open(path, *args, **kwargs)
        if str(path).endswith(sidecar.HEAD_SUFFIX):
            opened.add(fd)
            most[0] = max(most[0], len(opened))
        return fd

    def counting_close(fd):
        opened.discard(fd)
        return real_close(fd)

    monkeypatch.setattr(headpack.os, "open", counting_open)
    monkeypatch.setattr(headpack.os, "close", counting_close)
    assert select(spec_from_dict(SPEC), cat).rows.height > 0
    assert decided and most[0] == 1 and not opened
