"""Relayout of a catalog partition: verified new versions beside the old, one pointer merge,
old objects still readable, bad episodes skipped, re-runs idempotent."""

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from robodata.catalog.schema import CATALOG_SCHEMA
from robodata.container import EpisodeReader, Layout, TopicGroup, VideoSettings
from robodata.container.plan import LayoutPlan
from robodata.errors import ConfigError, ContainerError
from robodata.layout.pointer import PointerUpdate, flip_pointers
from robodata.layout.relayout import RelayoutConfig, RelayoutReport, relayout_episode, relayout_partition
from robodata.layout.rewrite import rewrite, verify
from tests.core.helpers_container import CAMS, first_part, footer_doc, small_layout, write_small

DAY = "2023-11-14"
NEW = Layout(
    groups=(
        TopicGroup("cameras", CAMS, 0.5, VideoSettings(gop=5, crf=20, bframes=0)),
        TopicGroup("proprio", ("joint_pos", "cmd"), 1.0),
        TopicGroup("cold", ("events",), 60.0),
    )
)


def _row(path: str, ep: str) -> dict:
    r = EpisodeReader.open(path)
    m = r.meta
    row = {
        "episode_id": ep,
        "uri": path,
        "site": m.site,
        "robot": m.robot,
        "task": m.task,
        "vendor": m.vendor,
        "start_time": datetime.fromtimestamp(m.start_time_ns / 1e9, tz=UTC),
        "day": DAY,
        "duration_s": m.duration_s,
        "num_frames": 0,
        "num_state_steps": 0,
        "cameras": list(CAMS),
        "stream_rates_json": json.dumps({s: sp.rate_hz for s, sp in m.streams.items()}),
        "success": True,
        "quality_score": 1.0,
        "qc_status": "pass",
        "layout_version": r.layout_version,
        "ingest_batch": "b0",
        "size_bytes": r.source.size(),
        "footer_offset": r.footer_offset,
        "footer_length": r.footer_length,
    }
    r.close()
    return row


@pytest.fixture()
def catalog(tmp_path):
    eps = tmp_path / "eps"
    eps.mkdir()
    rows = []
    for i in range(3):
        p = eps / f"ep{i}.rdep"
        write_small(p, duration_s=2.0, fps=10.0, layout=small_layout(gop=10, camera_span_s=1.0))
        rows.append(_row(str(p), "ep-test" if i == 0 else f"ep-other{i}"))
    uri = str(tmp_path / "catalog")
    write_deltalake(uri, pa.Table.from_pylist(rows, schema=CATALOG_SCHEMA), partition_by=["day"])
    plan = tmp_path / "plan.json"
    LayoutPlan(pattern={"name": "t"}, layout=NEW, page_size=1 << 20).save(plan)
    return uri, str(plan), rows


def _rows(uri):
    return {r["episode_id"]: r for r in DeltaTable(uri).to_pyarrow_table().to_pylist()}


def test_relayout_partition_flips_verified_pointers_and_keeps_old_objects(catalog, tmp_path):
    uri, plan, rows = catalog
    # ep2's object is corrupted: it must be reported and keep its pointer
    bad = rows[2]["uri"]
    raw = bytearray(Path(bad).read_bytes())
    raw[200:260] = b"\x00" * 60
    Path(bad).write_bytes(bytes(raw))
    rep = relayout_partition(DAY, RelayoutConfig(catalog_uri=uri, plan_path=plan))
    assert rep.relaid == 2 and rep.pointers_flipped == 2 and len(rep.failed) == 1, rep.as_dict()
    assert "ep-other2" in rep.failed[0]
    after = _rows(uri)
    assert after["ep-other2"]["uri"] == bad and after["ep-other2"]["layout_version"] == rows[2]["layout_version"]
    for r in rows[:2]:
        new = after[r["episode_id"]]
        assert new["uri"] != r["uri"] and new["uri"].endswith(f".{new['layout_version']}.rdep")
        nr = EpisodeReader.open(new["uri"], new["footer_offset"], new["footer_length"])
        assert nr.layout_version == new["layout_version"] and new["size_bytes"] == nr.source.size()
        assert nr.layout.group_of("cam_left").video.gop == 5
        old = EpisodeReader.open(r["uri"])  # the old layout stays readable
        a, b = old.read_window(0, 5), nr.read_window(0, 5)
        for s in a:
            assert np.array_equal(a[s].t, b[s].t), s
        assert np.array_equal(a["joint_pos"].data, b["joint_pos"].data)
        assert list(a["events"].data) == list(b["events"].data)
    assert not list((tmp_path / "eps").glob("*.partial*"))
    # a second run finds everything done
    again = relayout_partition(DAY, RelayoutConfig(catalog_uri=uri, plan_path=plan))
    assert again.relaid == 0 and again.pointers_flipped == 0 and again.skipped == 2


def test_interrupted_run_reuses_a_verified_copy(catalog):
    uri, plan, rows = catalog
    src = EpisodeReader.open(rows[0]["uri"])
    lay = LayoutPlan.load(plan).layout_for(src.meta)
    dst = rows[0]["uri"].rsplit("/", 1)[0] + f"/{rows[0]['episode_id']}.{lay.version}.rdep"
    rewrite(src, lay, dst)  # written, but the pointer was never flipped (crash)
    rep = relayout_partition(DAY, RelayoutConfig(catalog_uri=uri, plan_path=plan, max_episodes=1))
    assert rep.reused == 1 and rep.relaid == 0 and rep.pointers_flipped == 1
    assert _rows(uri)[rows[0]["episode_id"]]["uri"] == dst


def test_pointer_merge_only_moves_rows_still_on_the_old_object(catalog):
    uri, _, rows = catalog
    r = rows[0]
    stale = PointerUpdate(r["episode_id"], DAY, "/somewhere/else.rdep", "/new.rdep", "v1-x", 1, 2, 3)
    assert flip_pointers(uri, [stale]) == 0
    assert _rows(uri)[r["episode_id"]]["uri"] == r["uri"]


def test_verify_rejects_a_different_episode(tmp_path):
    a, b = tmp_path / "a.rdep", tmp_path / "b.rdep"
    write_small(a, duration_s=2.0, fps=10.0)
    write_small(b, duration_s=1.5, fps=10.0)
    with pytest.raises(ContainerError, match="frames"):
        verify(EpisodeReader.open(a), EpisodeReader.open(b))


def test_failed_verification_publishes_nothing(tmp_path, monkeypatch):
    import robodata.layout.rewrite as rw

    src_path = tmp_path / "a.rdep"
    write_small(src_path, duration_s=1.0, fps=10.0)
    src = EpisodeReader.open(src_path)

    def broken(*a, **k):
        raise ContainerError("ep-test", "simulated mismatch")

    monkeypatch.setattr(rw, "verify", broken)
    dst = tmp_path / "out" / "a.v1-new.rdep"
    with pytest.raises(ContainerError, match="simulated"):
        rw.rewrite(src, NEW, str(dst))
    assert not dst.exists() and not list((tmp_path / "out").iterdir())


@pytest.mark.parametrize("tamper", ["bomb", "count"])
def test_a_tampered_source_part_is_refused_and_nothing_is_published(tmp_path, tamper):
    # relayout reads whole low-dim streams itself: a part with valid CRCs that lies (a zstd bomb,
    # a sample count its entry contradicts) is a ContainerError before anything is written out
    from bench.robustness_container import BytesSource, with_footer
    from bench.robustness_container_payload import BOMB_ROWS, rebuild, zstd_bomb
    from robodata.errors import ContainerLimitError

    src_path = tmp_path / "a.rdep"
    write_small(src_path, duration_s=1.0, fps=10.0)
    raw, doc, off, _ = footer_doc(src_path)
    ci, pi = first_part(doc, "joint_pos")
    part = doc["chunks"][ci]["parts"][pi]
    if tamper == "bomb":
        bad = rebuild(
            raw, doc, {(ci, pi): zstd_bomb(BOMB_ROWS, 7, "joint_pos")}, {(ci, pi): (part[4], part[4], BOMB_ROWS)}
        )
        err, why = ContainerLimitError, "max_decode_bytes"
    else:
        part[6] -= 1
        bad, err, why = with_footer(raw, off, doc), ContainerError, "index entry says"
    dst = tmp_path / "out" / "a.v1-new.rdep"
    with pytest.raises(err, match=why):
        rewrite(EpisodeReader.open(BytesSource(bad, "a.rdep")), NEW, str(dst))
    assert not dst.exists() and not list((tmp_path / "out").iterdir())


def test_rewrite_to_s3_appears_whole(tmp_path):
    import boto3
    import fsspec

    from tests.core.s3_server import moto_s3

    src_path = tmp_path / "a.rdep"
    write_small(src_path, duration_s=1.0, fps=10.0)
    with moto_s3() as s3:
        so = s3["storage_options"]
        boto3.client(
            "s3",
            endpoint_url=s3["endpoint_url"],
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket="bucket")
        fs = fsspec.filesystem("s3", **so)
        res = rewrite(EpisodeReader.open(src_path), NEW, "s3://bucket/eps/a.v1-new.rdep", **so)
        assert fs.ls("bucket/eps") == ["bucket/eps/a.v1-new.rdep"]
        r = EpisodeReader.open(res.uri, res.footer_offset, res.footer_length, **so)
        assert r.layout_version == NEW.version and len(r.read_window(0, 2, ["cam_left"])["cam_left"].t) == 10


def test_cli_relayout(catalog):
    from typer.testing import CliRunner

    from robodata.cli import app

    uri, plan, rows = catalog
    res = CliRunner().invoke(app, ["relayout", "--catalog", uri, "--plan", plan, "--day", DAY, "--max-episodes", "1"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.strip().splitlines()[-1])["pointers_flipped"] == 1
    res = CliRunner().invoke(app, ["relayout", "--catalog", uri, "--plan", plan + ".missing", "--day", DAY])
    assert res.exit_code == 2 and "not found" in res.output


def test_encoder_threads_are_not_part_of_a_layout(tmp_path):
    """Ingestion encodes on one thread per camera; a plan that leaves threads to the codec names
    the same layout, so relayout skips the container instead of re-encoding it."""
    one = Layout(groups=(TopicGroup("cameras", CAMS, 0.5, VideoSettings(gop=5, crf=20, threads=1)), *NEW.groups[1:]))
    assert one.version == NEW.version
    assert (
        Layout(
            groups=(TopicGroup("cameras", CAMS, 0.5, VideoSettings(gop=6, crf=20, threads=1)), *NEW.groups[1:])
        ).version
        != NEW.version
    )  # what is stored still counts
    p = tmp_path / "ep0.rdep"
    write_small(p, duration_s=1.0, fps=10.0, layout=one)
    r = EpisodeReader.open(p)
    assert r.layout_version == NEW.version and r.layout.groups[0].video.threads == 1
    plan = LayoutPlan(pattern={"name": "t"}, layout=NEW, page_size=1 << 20)
    report = RelayoutReport(DAY)
    assert (
        relayout_episode({"uri": str(p), "episode_id": "ep-test"}, plan, RelayoutConfig("unused", "unused"), report)
        is None
    )
    assert report.skipped == 1 and report.relaid == 0
    with pytest.raises(ConfigError, match="threads"):
        VideoSettings(threads=-1)


@pytest.mark.parametrize("name", ["check", "footer_offset", "min_psnr_db", "decode_threads"])
def test_a_storage_option_named_like_a_parameter_is_refused_up_front(name):
    with pytest.raises(ConfigError, match=name):
        RelayoutConfig(catalog_uri="c", plan_path="p", storage_options={name: "false"})
    RelayoutConfig(catalog_uri="c", plan_path="p", storage_options={"anon": "true"})  # fsspec's own: fine
