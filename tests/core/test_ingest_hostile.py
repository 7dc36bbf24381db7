"""Irregular and hostile landing items: each is quarantined with its reason, never fails its batch,
never reads or writes outside its root (issue 16, points 4 and 5)."""

from __future__ import annotations

import json
import random
import shutil

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from robodata.container import EpisodeReader
from robodata.errors import RobodataError
from robodata.ingest.importers import open_raw
from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.pipeline import run_batch
from robodata.ingest.settings import IngestSettings
from robodata.ingest.steps.aligned_tracks import refuse_duplicate_ids
from robodata.ingest.synth import SynthConfig, synthesize
from robodata.ingest.tables import IngestPaths
from robodata.names import UnsafeNameError, is_safe_name
from tests.core.helpers_hostile import TINY, TOPICS, build, item_name, sentinel_listing


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    land = build(root)
    before = sentinel_listing(land.sentinel)
    items = new_items(str(land.landing), LandingCursor())
    paths = IngestPaths(str(root / "state"))
    s = IngestSettings(workers=1, topics=TOPICS)
    write_manifest(paths, "b1", items)
    out = run_batch(paths, "b1", s, derived=False)
    qc = DeltaTable(paths.table("qc_results")).to_pyarrow_table().to_pylist()
    return root, land, s, out, qc, before


def test_every_hostile_item_is_quarantined_with_its_reason_and_good_items_convert(hostile):
    root, land, s, out, qc, _ = hostile
    summary = {item_name(r["uri"]): r for r in qc if r["stage"] == "summary"}
    assert len(land.cases) >= 60 and len(summary) == len(land.cases) + len(land.good)
    for g in land.good:  # two camera sets, MCAP and LeRobot side by side
        assert summary[g]["passed"], summary[g]
    wrong = {c.name: summary[c.name]["reason"] for c in land.cases if summary[c.name]["passed"]}
    assert not wrong
    unclear = {c.name: summary[c.name]["reason"] for c in land.cases if c.expect not in summary[c.name]["reason"]}
    assert not unclear
    assert out["episodes"]["converted"] == len(land.good)
    assert out["aligned_tracks"]["duplicate_ids"] == 2  # the same id, and the same id in capitals


def test_names_and_paths_never_leave_their_roots(hostile):
    root, land, s, out, qc, before = hostile
    assert sentinel_listing(land.sentinel) == before  # nothing written there
    assert {p.name for p in root.iterdir()} == {"landing", "sentinel", "base", "state"}
    assert not list((root / "state").rglob("escaped*")) and not (root / "escaped").exists()
    for c in (root / "state" / "containers" / "b1").iterdir():
        assert is_safe_name(c.name.removesuffix(".rdep"))


def test_failed_identity_checks_name_file_and_field_and_always_block(hostile):
    _, _, _, _, qc, _ = hostile
    pre = {item_name(r["uri"]): r for r in qc if r["stage"] == "pre" and not r["passed"]}
    r = pre["lg-cam-escape"]
    assert r["check"] == "names_safe" and r["blocking"]
    assert "lg-cam-escape/meta.json" in r["reason"] and "cameras key" in r["reason"]
    r = pre["lr-data-escape"]
    assert r["check"] == "names_safe" and "info.json" in r["reason"] and "data_path" in r["reason"]
    r = pre["zz-dup-" + _good_legacy(hostile)]
    assert r["check"] == "episode_id_unique" and r["blocking"] and r["episode_id"] == _good_legacy(hostile)


def _good_legacy(hostile) -> str:
    return hostile[1].good[0]


def test_duplicate_id_keeps_the_first_by_uri_and_never_overwrites(hostile):
    root, land, s, out, qc, _ = hostile
    eid = _good_legacy(hostile)
    paths = IngestPaths(str(root / "state"))
    r = EpisodeReader.open(paths.container("b1", eid))
    assert r.meta.extra["raw_uri"].endswith("/" + eid)  # the good one (first by uri), not zz-dup-...
    cat = DeltaTable(paths.catalog).to_pyarrow_table()
    ids = cat.column("episode_id").to_pylist()
    assert len(ids) == len(set(ids)) == len(land.good) + len(land.cases)
    row = cat.filter(pc.equal(cat.column("episode_id"), eid)).to_pylist()[0]
    assert row["qc_status"] == "pass"


def test_duplicate_winner_does_not_depend_on_completion_order():
    rows: list[dict] = [{"uri": f"/l/{n}", "episode_id": "same", "ok": True} for n in "dbca"]
    rows.append({"uri": "/l/e", "episode_id": "other", "ok": True})
    for seed in range(5):
        shuffled = [dict(r) for r in rows]
        random.Random(seed).shuffle(shuffled)
        assert refuse_duplicate_ids(shuffled, "b") == 3
        kept = sorted(r["uri"] for r in shuffled if r["ok"])
        assert kept == ["/l/a", "/l/e"]
        assert all("/l/a has it too" in r["error"] for r in shuffled if not r["ok"])


def test_ids_that_differ_only_in_case_are_one_id():
    rows = [{"uri": "/l/b", "episode_id": "Ep-1", "ok": True}, {"uri": "/l/a", "episode_id": "ep-1", "ok": True}]
    assert refuse_duplicate_ids(rows, "b") == 1
    assert rows[1]["ok"] and not rows[0]["ok"] and rows[0]["failed_check"] == "episode_id_unique"
    assert "/l/a has 'ep-1', which differs only in case" in rows[0]["error"]


def test_cli_ingest_refuses_a_bad_batch_key_and_ingests_a_hostile_zone_without_traceback(hostile, tmp_path):
    from robodata.cli import app

    root, land, *_ = hostile
    state = tmp_path / "s"
    res = CliRunner().invoke(app, ["ingest", str(land.landing), "--root", str(state), "--batch", "../b"])
    assert res.exit_code == 2 and "batch key" in res.output
    assert not (tmp_path / "b.json").exists() and not state.exists()
    res = CliRunner().invoke(app, ["ingest", str(land.landing), "--root", str(state), "--batch", "cli-1"])
    assert res.exit_code == 0 and res.exception is None, res.output
    counts = json.loads(res.output.strip().splitlines()[-1])["qc_results"]
    assert counts["passed"] >= len(land.good) and counts["quarantined"] >= len(land.cases) - 1


# --- property tests: any meta.json / template ends in a RobodataError or a safe episode -------------


@pytest.fixture(scope="module")
def legacy_base(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    return synthesize(SynthConfig(episodes=1, **TINY), d / "land")[0]  # type: ignore[arg-type]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
FIELDS = ("episode_id", "cameras", "state", "start_time", "success", "robot", "task")


@settings(max_examples=120, deadline=None)
@given(
    field=st.sampled_from(FIELDS),
    value=JSON,
    camera=st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["..", "a/b", "/x", "wrist/../.."])),
)
def test_fuzzed_meta_json_is_refused_or_safe(legacy_base, tmp_path_factory, field, value, camera):
    d = tmp_path_factory.mktemp("ep") / legacy_base.name
    shutil.copytree(legacy_base, d)
    meta = json.loads((d / "meta.json").read_text())
    meta[field] = value
    if camera is not None and isinstance(meta.get("cameras"), dict) and "wrist" in meta["cameras"]:
        meta["cameras"][camera] = meta["cameras"].pop("wrist")
    (d / "meta.json").write_text(json.dumps(meta))
    try:
        raw = open_raw(str(d), "legacy-jpeg", decode_threads=0)
    except RobodataError:
        return
    assert is_safe_name(raw.episode_id) and all(is_safe_name(c) for c in raw.cameras)
    assert all((d / c).resolve().parent == d.resolve() for c in raw.cameras)


SEGMENTS = ["..", ".", "", "data", "chunk-000", "file-000.parquet", "{chunk_index:03d}", "{file_index:03d}", "~", "x"]


@pytest.fixture(scope="module")
def lerobot_with_decoy(tmp_path_factory):
    """A v3.0 dataset at base/land/ds and, one level above the landing zone, a decoy where
    `../../data/chunk-000/file-000.parquet` would reach: reading it fails, naming it."""
    from robodata.ingest.synth.lerobot import write_lerobot

    base = tmp_path_factory.mktemp("lr")
    ds = write_lerobot(base / "land" / "ds", "v3.0", episodes=1, frames_per_episode=6, cameras=("top",))
    decoy = base / "data" / "chunk-000" / "file-000.parquet"
    decoy.parent.mkdir(parents=True)
    decoy.write_bytes(b"decoy")
    return ds, decoy, json.loads((ds / "meta" / "info.json").read_text())


@settings(max_examples=80, deadline=None)
@given(parts=st.lists(st.sampled_from(SEGMENTS), min_size=1, max_size=6), absolute=st.booleans())
def test_fuzzed_lerobot_templates_never_read_outside_the_dataset(lerobot_with_decoy, parts, absolute):
    ds, decoy, info = lerobot_with_decoy
    template = ("/" if absolute else "") + "/".join(parts)
    (ds / "meta" / "info.json").write_text(json.dumps({**info, "data_path": template}))
    try:
        raw = open_raw(f"{ds}#0", "lerobot-v3.0")
    except UnsafeNameError:
        return
    except RobodataError as exc:
        assert str(decoy) not in str(exc) and "decoy" not in str(exc)
        return
    filled = template.replace("{chunk_index:03d}", "000").replace("{file_index:03d}", "000")
    assert filled == "data/chunk-000/file-000.parquet" and raw.episode_id == "ds-000000"
