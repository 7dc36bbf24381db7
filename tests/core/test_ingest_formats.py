"""Every public format in, none skipped in silence (issue 23): ROS 1 bags, ROS 2 bags of vendor
types with `--msgs`, HDF5 (ALOHA raw + compressed, robomimic), unknown entries as rows."""

from __future__ import annotations

import json
import shutil

import pytest
from deltalake import DeltaTable
from typer.testing import CliRunner

from robodata.ingest.importers import ImportOptions, open_raw
from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.scan import LandingCursor, new_items, scan
from robodata.ingest.pipeline import run_batch
from robodata.ingest.raw import RawEpisodeError
from robodata.ingest.settings import IngestSettings
from robodata.ingest.tables import IngestPaths
from tests.core.helpers_formats import UNKNOWN, hdf5_hostile, rlds_hostile, write_formats, write_unknown, zarr_hostile
from tests.core.helpers_hostile import item_name


@pytest.fixture(scope="module")
def zone(tmp_path_factory):
    root = tmp_path_factory.mktemp("formats")
    land, msgs, counts = write_formats(root)
    write_unknown(land)
    hostile = hdf5_hostile(land, land / "episode_0.hdf5") | zarr_hostile(land) | rlds_hostile(land)
    paths = IngestPaths(str(root / "state"))
    s = IngestSettings(msgs=str(msgs))
    items = new_items(str(land), LandingCursor())
    write_manifest(paths, "b1", items)
    out = run_batch(paths, "b1", s, derived=False)
    qc = DeltaTable(paths.table("qc_results")).to_pyarrow_table().to_pylist()
    return land, msgs, counts, hostile, items, out, qc


def test_every_entry_is_an_item_and_unknown_ones_are_rows_with_their_kind(zone):
    land, _, counts, hostile, items, out, qc = zone
    listed = {item_name(i.uri) for i in items}
    assert listed == {p.name for p in land.iterdir()}  # nothing dropped
    kinds = {i.kind for i in items}
    assert {"ros1-bag", "ros2-bag", "hdf5", "zarr", "rlds", "unrecognized"} <= kinds
    summary = {i["uri"].split("#")[0].rsplit("/", 1)[-1]: i for i in qc if i["stage"] == "summary"}
    for name, what in UNKNOWN.items():
        r = summary[name]
        assert not r["passed"] and what in r["reason"] and "unrecognized" in r["reason"], r
    assert out["unrecognized"]["unrecognized"] == len(UNKNOWN)
    pre = [r for r in qc if r["stage"] == "pre" and r["check"] == "recognized"]
    assert len(pre) == len(UNKNOWN) and all(r["blocking"] for r in pre)


def test_good_items_of_every_format_convert_and_hostile_ones_are_quarantined(zone):
    land, _, counts, hostile, items, out, qc = zone
    summary = {_key(r["uri"]): r for r in qc if r["stage"] == "summary"}
    intact = ("short.zarr#0", "rlds_cut#" + _first_rlds(summary))  # hostile items' good episodes
    good = [k for k in summary if k not in hostile and k.split("#")[0] not in UNKNOWN and k not in intact]
    assert len(good) == sum(counts.values()), " ".join(good)
    assert all(summary[k]["passed"] for k in good), {k: summary[k]["reason"] for k in good}
    for name, expect in hostile.items():
        assert not summary[name]["passed"] and expect in summary[name]["reason"], summary[name]
    assert out["episodes"]["converted"] == len(good) + 2  # + short.zarr#0, rlds_cut's first: both intact
    sources = {r["source"] for r in qc if r["stage"] == "summary" and r["passed"]}
    assert {"ros1-bag", "ros2-bag", "hdf5", "zarr", "rlds"} <= sources


def _key(uri: str) -> str:
    """dataset#episode without the RLDS record offset."""
    name, frag = item_name(uri), uri.partition("#")[2]
    if name.startswith("rlds"):
        frag = frag.rsplit(":", 1)[0]
    return f"{name}#{frag}" if frag else name


def _first_rlds(summary: dict) -> str:
    return next(k for k in summary if k.startswith("rlds_ds#") and k.endswith(":0")).split("#", 1)[1]


def test_vendor_types_without_msgs_name_the_type_and_the_option(zone):
    land, msgs, *_ = zone
    bag = next(p for p in land.iterdir() if (p / "metadata.yaml").exists())
    with pytest.raises(RawEpisodeError, match=r"robodata_vendor/msg/ArmState.*--msgs"):
        open_raw(str(bag), "ros2-bag")
    raw = open_raw(str(bag), "ros2-bag", options=ImportOptions(msgs=str(msgs)))
    assert raw.arrays["joint_pos"].values.shape[1] == 7


def test_robomimic_demos_are_one_item_each_with_language(zone):
    land, *_ = zone
    uris = sorted(i.uri for i in scan(str(land)) if "demo.hdf5" in i.uri)
    assert [u.rsplit("#", 1)[1] for u in uris] == ["data/demo_0", "data/demo_1"]
    raw = open_raw(uris[1], "hdf5")
    assert raw.task == "pick up the cube" and raw.episode_id == "demo-demo_1"
    assert set(raw.cameras) == {"cam_left_image", "wrist_image"} and raw.cameras["wrist_image"].fps == 10.0


def test_cli_ingest_prints_unrecognized_and_takes_msgs(zone, tmp_path):
    from robodata.cli import app

    land, msgs, *_ = zone
    small = tmp_path / "land"
    small.mkdir()
    for name in ("flight.ulg", "euroc"):
        (shutil.copytree if (land / name).is_dir() else shutil.copy)(land / name, small / name)
    bag = next(p for p in land.iterdir() if (p / "metadata.yaml").exists())
    shutil.copytree(bag, small / bag.name)
    args = ["ingest", str(small), "--root", str(tmp_path / "s"), "--batch", "c1", "--msgs", str(msgs)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output.strip().splitlines()[-1])
    assert doc["unrecognized"]["unrecognized"] == 2 and doc["qc_results"]["passed"] == 1
    res = CliRunner().invoke(app, [*args[:-2], "--msgs", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "--msgs" in res.output


def test_catalog_rows_carry_the_facts_for_mixing_corpora_and_specs_filter_on_them(zone):
    import polars as pl

    from robodata.curate.filters import Filter

    land, *_ = zone
    cat = pl.from_arrow(DeltaTable(str(land.parent / "state" / "catalog" / "episodes")).to_pyarrow_table())
    ok = cat.filter(pl.col("qc_status") == "pass")
    aloha = ok.filter(pl.col("episode_id") == "episode_0").row(0, named=True)
    assert aloha["robot_type"] == "aloha" and aloha["source_format"] == "hdf5" and aloha["language"] == ""
    assert aloha["state_dim"] == 7 and aloha["action_dim"] == 7 and aloha["control_hz"] == 10.0
    demo = ok.filter(pl.col("episode_id") == "demo-demo_1").row(0, named=True)
    assert demo["language"] == "pick up the cube" and demo["source_dataset"] == "demo.hdf5"
    bag = ok.filter(pl.col("source_format") == "ros1-bag").row(0, named=True)
    assert bag["state_names"] == [f"j{i}" for i in range(7)] or len(bag["state_names"]) == 7
    bad = cat.filter(pl.col("qc_status") == "quarantined").filter(pl.col("source_format") == "unrecognized")
    assert bad.height == 3 and bad["state_dim"].null_count() == 3
    for f, n in (
        (Filter("language", "!=", ""), 2 + ok.filter(pl.col("source_format") == "rlds").height),
        (Filter("robot_type", "==", "aloha"), 2),
        # RLDS declares no control rate (TFDS records none, the built-in key map invents none): null
        (Filter("control_hz", ">=", 10.0), ok.height - ok.filter(pl.col("source_format") == "rlds").height),
        (Filter("state_names", "not_null"), ok.height),
    ):
        assert ok.filter(f.expr()).height == n, f
    rlds = ok.filter(pl.col("source_format") == "rlds")
    assert rlds.height and rlds["control_hz"].null_count() == rlds.height
    assert all("rate_declared" in q for q in rlds["qc_failed"].to_list())  # flagged, not blocking


@pytest.mark.parametrize("version", ["v2.1", "v3.0"])
def test_lerobot_image_features_are_cameras_read_from_the_parquet(tmp_path, version):
    from robodata.ingest.align import aligned_tracks
    from robodata.ingest.convert import convert
    from robodata.ingest.synth.lerobot import write_lerobot

    ds = write_lerobot(
        tmp_path / "ds", version, episodes=2, frames_per_episode=6, cameras=("top",), image_cameras=("side",)
    )
    raw = open_raw(f"{ds}#1", f"lerobot-{version}")
    assert set(raw.cameras) == {"top", "side"} and raw.cameras["side"].height == 48
    res = convert(raw, aligned_tracks(raw), tmp_path / "ep.rdep")
    assert res.frames == {"top": 6, "side": 6}


@pytest.mark.parametrize("chunk", [1, 3, 40])
def test_zarr_frames_are_the_episodes_own_whatever_the_chunking(tmp_path, chunk):
    """Frames are read a few whole chunks at a time; an episode range that starts and ends inside a
    chunk still yields exactly its own frames, in order."""
    import numpy as np
    import zarr

    frames = np.arange(23, dtype=np.uint8)[:, None, None, None] * np.ones((1, 4, 6, 3), np.uint8)
    g = zarr.open_group(str(tmp_path / "buf.zarr"), mode="w")
    g.create_array("data/cam_rgb", data=frames, chunks=(chunk, 4, 6, 3), config={"write_empty_chunks": True})
    g.create_array("data/robot0_eef_pos", data=np.zeros((23, 3), np.float32), config={"write_empty_chunks": True})
    g.create_array("data/action", data=np.zeros((23, 2), np.float32), config={"write_empty_chunks": True})
    g.create_array("meta/episode_ends", data=np.array([5, 23], np.int64), config={"write_empty_chunks": True})
    for index, want in ((0, range(0, 5)), (1, range(5, 23))):
        raw = open_raw(f"{tmp_path / 'buf.zarr'}#{index}", "zarr", None, 0, ImportOptions())
        assert [int(img[0, 0, 0]) for _, _, img in raw.frames()] == list(want)
