"""Property tests: random catalogs x random specs always round-trip through read_manifest, and random
hostile specs give a ConfigError or a valid manifest (hypothesis, CI profile: fixed seeds)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from robodata.catalog.rows import conform
from robodata.catalog.table import Catalog
from robodata.curate.manifest import read_manifest, write_manifest
from robodata.curate.run import curate
from robodata.curate.select import Selection, evaluate
from robodata.curate.spec import spec_from_dict
from robodata.errors import ConfigError

CAMS = ["cam_left", "cam_right", "wrist", "top"]
TASKS = ["fold", "pick", "wipe"]
T0 = datetime(2024, 1, 1, tzinfo=UTC)


@st.composite
def catalogs(draw, max_rows: int = 8) -> pa.Table:
    n = draw(st.integers(1, max_rows))
    rows = []
    for i in range(n):
        quarantined = draw(st.booleans())
        start = None if quarantined and draw(st.booleans()) else T0 + timedelta(hours=draw(st.integers(0, 24 * 5)))
        rows.append(
            {
                "episode_id": f"ep-{draw(st.integers(0, 3))}{i}",
                "uri": f"s3://b/{i}",
                "site": draw(st.sampled_from(["sfo-1", "aus-1"])),
                "robot": draw(st.sampled_from(["r1", "r2", "r3"])),
                "task": draw(st.sampled_from(TASKS)),
                "start_time": start,
                "duration_s": draw(st.floats(0, 500, allow_nan=False)),
                "num_frames": draw(st.integers(0, 10_000)),
                "cameras": draw(st.none() | st.lists(st.sampled_from(CAMS), max_size=4)),
                "success": draw(st.none() | st.booleans()),
                "quality_score": draw(st.floats(0, 1, width=32)),
                "qc_status": "quarantined" if quarantined else "pass",
                "ingest_batch": draw(st.sampled_from(["b0", "b1"])),
                "size_bytes": draw(st.integers(0, 2**40)),
            }
        )
    return conform(rows)


def _filters(ids: list[str]):
    return st.lists(
        st.one_of(
            st.builds(lambda v: {"column": "cameras", "op": "contains", "value": v}, st.sampled_from(CAMS)),
            st.builds(
                lambda v: {"column": "task", "op": "in", "value": v}, st.lists(st.sampled_from(TASKS), min_size=1)
            ),
            st.builds(lambda v: {"column": "quality_score", "op": ">=", "value": v}, st.floats(0, 1)),
            st.builds(lambda v: {"column": "duration_s", "op": "<", "value": v}, st.floats(0, 600)),
            st.just({"column": "qc_status", "op": "==", "value": "pass"}),
            st.just({"column": "success", "op": "==", "value": True}),
            st.just({"column": "cameras", "op": "not_null"}),
            st.builds(
                lambda d: {"column": "day", "op": "between", "value": ["2024-01-02", d]},
                st.sampled_from(["2024-01-03", "2024-01-06"]),
            ),
            st.builds(
                lambda v: {"column": "episode_id", "op": "not_in", "value": v},
                st.lists(st.sampled_from(ids), min_size=1),
            ),
        ),
        max_size=3,
    )


@st.composite
def specs(draw, ids: list[str]) -> dict:
    doc: dict = {"version": 1, "name": "prop", "filters": draw(_filters(ids))}
    doc["exclude"] = {"episode_ids": draw(st.lists(st.sampled_from(ids), max_size=3))}
    if draw(st.booleans()):
        doc["mix"] = {
            "by": draw(st.sampled_from(["task", "site"])),
            "weights": draw(st.dictionaries(st.sampled_from(TASKS + ["sfo-1"]), st.floats(0, 5), max_size=3)),
            "default_weight": draw(st.sampled_from([0.0, 1.0])),
        }
        if draw(st.booleans()):
            doc["budget"] = {"per_group_hours": {draw(st.sampled_from(TASKS)): draw(st.floats(0.01, 1))}}
    if draw(st.booleans()):
        doc.setdefault("budget", {})["total_hours"] = draw(st.floats(0.01, 2))
    doc["split"] = {"val_fraction": draw(st.floats(0, 0.9)), "salt": draw(st.text(max_size=4))}
    mix, total = doc.get("mix"), doc.get("budget", {}).get("total_hours")
    if draw(st.booleans()) and not (mix and total is not None and sum(mix["weights"].values()) <= 0):
        doc["version"] = 2
    return doc


def _round_trip(rows: pa.Table, doc: dict, out) -> None:
    spec = spec_from_dict(doc)
    df, groups = evaluate(spec, pl.from_arrow(rows).lazy())
    info = write_manifest(Selection(df, 3, spec.spec_hash(), groups), out, spec.name)
    back = read_manifest(info.path)  # verifies the content hash
    assert back.column("episode_id").to_pylist() == df["episode_id"].to_list()
    assert not set(spec.exclude.episode_ids) & set(df["episode_id"].to_list())


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_catalogs_x_random_specs_round_trip(tmp_path_factory, data):
    rows = data.draw(catalogs())
    doc = data.draw(specs(rows.column("episode_id").to_pylist()))
    _round_trip(rows, doc, tmp_path_factory.mktemp("m"))


@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_delta_catalogs_x_random_specs_round_trip(tmp_path_factory, data):
    """The same through a real Delta catalog and `curate` (the path the bug was found on)."""
    rows = data.draw(catalogs(max_rows=5))
    doc = data.draw(specs(rows.column("episode_id").to_pylist()))
    root = tmp_path_factory.mktemp("c")
    cat = Catalog(str(root / "cat"))
    cat.merge(rows)
    info, selection = curate(spec_from_dict(doc), cat, root / "m")
    assert read_manifest(info.path).num_rows == selection.rows.height == info.episodes


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(),
    st.text(max_size=8),
    st.sampled_from(["pass", "cameras", "task", "==", "in", "contains", "2024-01-02", "a\x00b", "x" * 400, "../x"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6) | st.integers(), inner, max_size=3),
    max_leaves=12,
)
KEYS = ["version", "name", "filters", "mix", "budget", "exclude", "split", "catalog_version"]


@st.composite
def hostile_specs(draw, ids: list[str]) -> dict:
    """A valid spec with some fields replaced by arbitrary values, or extra keys, or filters mutated."""
    doc = draw(specs(ids))
    for key in draw(st.lists(st.sampled_from(KEYS + ["extra"]), max_size=3)):
        doc[key] = draw(VALUES)
    if isinstance(doc.get("filters"), list) and doc["filters"] and draw(st.booleans()):
        f = dict(doc["filters"][0]) if isinstance(doc["filters"][0], dict) else {}
        f[draw(st.sampled_from(["column", "op", "value"]))] = draw(
            VALUES | st.sampled_from(["cameras", "site", "contains", "between"])
        )
        doc["filters"] = [f, *doc["filters"][1:]]
    return doc


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hostile_specs_give_config_error_or_a_valid_manifest(tmp_path_factory, data):
    rows = data.draw(catalogs())
    doc = data.draw(hostile_specs(rows.column("episode_id").to_pylist()))
    try:
        spec_from_dict(doc)
    except ConfigError:
        return
    _round_trip(rows, doc, tmp_path_factory.mktemp("m"))


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_optimized_catalogs_select_the_plain_scans_rows(tmp_path_factory, data):
    """Over catalogs in the budget order of the spec's salt or of another: the rows of the plain scan
    with ids hashed, whether the budget order, the stored hashes or the ids decided."""
    from robodata.catalog.maintenance import OptimizeConfig, optimize
    from robodata.curate.select import select

    rows = data.draw(catalogs(max_rows=40))
    doc = data.draw(specs(rows.column("episode_id").to_pylist()))
    salt = doc["split"]["salt"] if data.draw(st.booleans()) else "other"
    cat = Catalog(str(tmp_path_factory.mktemp("c") / "cat"))
    cat.merge(rows)
    optimize(cat, None, OptimizeConfig(row_group_rows=256, split_salt=salt))
    spec = spec_from_dict(doc)
    want, _ = evaluate(spec, pl.scan_delta(cat.table()))
    assert select(spec, cat).rows.equals(want)
