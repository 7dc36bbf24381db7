import json
from pathlib import Path

import av
import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest
from mcap.reader import make_reader
from typer.testing import CliRunner

from robodata.catalog.table import Catalog
from robodata.container import EpisodeMeta, EpisodeReader, EpisodeWriter, StreamSpec
from robodata.curate.run import curate
from robodata.curate.spec import spec_from_dict
from robodata.errors import ContainerError
from robodata.export.episodes import ExportError
from robodata.export.run import export
from tests.core.helpers_container import CAMS, small_layout

FPS, H, W, SECONDS = 10.0, 48, 64, 2.5


def _write(path: Path, episode_id: str, task: str, seed: int) -> dict:
    streams = {c: StreamSpec(c, "video", FPS, (H, W, 3)) for c in CAMS}
    streams["joint_pos"] = StreamSpec("joint_pos", "array", 50.0, (7,), units="rad")
    streams["cmd"] = StreamSpec("cmd", "array", 25.0, (7,), units="rad")
    streams["events"] = StreamSpec("events", "events")
    meta = EpisodeMeta(episode_id, "r1", "sfo-1", task, 1_700_000_000_000_000_000 + seed * 10**9, streams)
    rng = np.random.default_rng(seed)
    n = int(SECONDS * FPS)
    with EpisodeWriter(path, meta, small_layout()) as w:
        for i in range(n):
            for c in CAMS:
                img = np.full((H, W, 3), (i * 9 + seed * 40) % 255, np.uint8)
                w.write_frame(c, img, int(i * 1e9 / FPS))
        tj = (np.arange(int(SECONDS * 50)) * 2e7).astype(np.int64)
        w.write_array("joint_pos", tj, rng.normal(size=(len(tj), 7)).astype(np.float32))
        tc = (np.arange(int(SECONDS * 25)) * 4e7).astype(np.int64)
        w.write_array("cmd", tc, rng.normal(size=(len(tc), 7)).astype(np.float32))
        w.write_events("events", np.array([0, int(1e9)], dtype=np.int64), ["start", "grasp"])
    r = EpisodeReader.open(path)
    return {
        "episode_id": episode_id,
        "uri": str(path),
        "site": "sfo-1",
        "robot": "r1",
        "task": task,
        "start_time": meta.start_time_ns // 1000,
        "duration_s": r.meta.duration_s,
        "num_frames": n,
        "num_state_steps": len(tj),
        "cameras": list(CAMS),
        "stream_rates_json": "{}",
        "success": True,
        "quality_score": 0.95,
        "qc_status": "pass",
        "layout_version": r.layout_version,
        "ingest_batch": "b0",
        "size_bytes": r.source.size(),
        "footer_offset": r.footer_offset,
        "footer_length": r.footer_length,
    }


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    root = tmp_path_factory.mktemp("export")
    rows = [_write(root / f"ep{i}.rdep", f"ep-{i}", ["fold", "pick"][i % 2], i) for i in range(3)]
    df = pl.DataFrame(rows).with_columns(pl.from_epoch("start_time", time_unit="us").dt.replace_time_zone("UTC"))
    cat = Catalog(str(root / "catalog"))
    cat.merge(df)
    info, _ = curate(spec_from_dict({"version": 1, "name": "exp", "split": {"val_fraction": 0.0}}), cat, root / "m")
    return info.path


def test_lerobot_v3_layout(manifest, tmp_path):
    out = tmp_path / "lr"
    res = export(manifest, out, "lerobot")
    assert res["episodes"] == 3
    info = json.loads((out / "meta/info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["fps"] == FPS
    assert info["total_episodes"] == 3 and info["total_tasks"] == 2
    data = pq.read_table(out / "data/chunk-000/file-000.parquet")
    assert data.num_rows == info["total_frames"] == 3 * int(SECONDS * FPS)
    assert data.column("index").to_pylist() == list(range(data.num_rows))
    assert data.schema.field("observation.state").type.list_size == 7
    eps = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [e["length"] for e in eps] == [25, 25, 25]
    assert eps[1]["dataset_from_index"] == 25 and eps[1]["dataset_to_index"] == 50
    key = "observation.images.cam_left"
    assert eps[2][f"videos/{key}/from_timestamp"] == pytest.approx(5.0)
    tasks = pq.read_table(out / "meta/tasks.parquet")
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["task"]
    assert sorted(tasks.column("task").to_pylist()) == ["fold", "pick"]
    stats = json.loads((out / "meta/stats.json").read_text())
    assert np.array(stats[key]["mean"]).shape == (3, 1, 1)
    assert len(stats["observation.state"]["mean"]) == 7
    with av.open(str(out / f"videos/{key}/chunk-000/file-000.mp4")) as c:
        frames = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    assert len(frames) == 75
    # episode 2 starts at frame 50: its first frame has the value written for (i=0, seed=2)
    assert abs(int(frames[50].mean()) - 80) <= 3
    with pytest.raises(ExportError, match="already holds"):
        export(manifest, out, "lerobot")


def test_lerobot_splits_name_the_val_episodes(manifest, tmp_path):
    """The manifest's val episodes are LeRobot's `val` split (index ranges: train first, then val)."""
    cat = Catalog(str(Path(manifest).parent.parent / "catalog"))
    spec = {"version": 1, "name": "exp-val", "split": {"val_fraction": 0.1, "salt": "d"}}  # ep-0 is val
    info, _ = curate(spec_from_dict(spec), cat, tmp_path / "m")
    out = tmp_path / "lr"
    export(info.path, out, "lerobot")
    assert json.loads((out / "meta/info.json").read_text())["splits"] == {"train": "0:2", "val": "2:3"}
    eps = pq.read_table(out / "meta/episodes/chunk-000/file-000.parquet").to_pylist()
    assert [(e["robodata/episode_id"], e["robodata/split"]) for e in eps] == [
        ("ep-1", "train"),
        ("ep-2", "train"),
        ("ep-0", "val"),
    ]


def test_mcap_export_opens_and_decodes(manifest, tmp_path):
    res = export(manifest, tmp_path / "mc", "mcap", limit=1)
    assert res["episodes"] == 1
    with open(res["files"][0], "rb") as f:
        reader = make_reader(f)
        topics: dict[str, list] = {}
        for schema, channel, message in reader.iter_messages():
            topics.setdefault(channel.topic, []).append((schema.name, json.loads(message.data)))
    assert {"/camera/cam_left", "/joint_pos", "/cmd", "/events"} <= set(topics)
    assert topics["/camera/cam_left"][0][0] == "foxglove.CompressedVideo"
    assert len(topics["/joint_pos"]) == int(SECONDS * 50)
    assert [m["label"] for _, m in topics["/events"]] == ["start", "grasp"]
    codec = av.CodecContext.create("h264", "r")
    decoded = 0
    for _, m in topics["/camera/cam_left"]:
        import base64

        decoded += len(codec.decode(av.Packet(base64.b64decode(m["data"]))))
    decoded += len(codec.decode(None))
    assert decoded == int(SECONDS * FPS)


def test_export_cli_and_errors(manifest, tmp_path):
    from robodata.cli import app

    res = CliRunner().invoke(app, ["export", "--format", "mcap", str(manifest), str(tmp_path / "o"), "--limit", "1"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout.strip().splitlines()[-1])["episodes"] == 1
    res = CliRunner().invoke(app, ["export", "--format", "zip", str(manifest), str(tmp_path / "o")])
    assert res.exit_code == 2 and "unknown export format" in res.output


# --- hostile names: every exporter write stays inside its output folder (issue 16) -----------------


def _tree(p: Path) -> set[str]:
    return {str(f.relative_to(p)) for f in p.rglob("*")}


def test_exporters_refuse_unsafe_ids_and_stream_names_writing_nothing_outside(tmp_path):
    from robodata.export.lerobot import export_lerobot
    from robodata.export.mcap_export import export_mcap
    from robodata.names import UnsafeNameError
    from tests.core.helpers_hostile import container_with

    (tmp_path / "sentinel").mkdir()
    bad_cam = container_with(tmp_path / "c1.rdep", "ep-1", "a/../../sentinel/wrist")
    good = container_with(tmp_path / "c2.rdep", "ep-2", "wrist")
    before = _tree(tmp_path)
    # the reader refuses the footer before the exporter's own check is reached
    with pytest.raises(ContainerError, match=r"'a/\.\./\.\./sentinel/wrist'\]: stream names"):
        export_lerobot([bad_cam], tmp_path / "out" / "lr")
    for eid in ("a/b", "../../sentinel/x", "/abs", ""):
        with pytest.raises(UnsafeNameError, match="episode_id"):
            export_mcap([good, dict(good, episode_id=eid)], tmp_path / "out" / "mc")
    with pytest.raises(ExportError, match="twice"):
        export_mcap([good, good], tmp_path / "out" / "mc")
    assert not (tmp_path / "out" / "mc").exists()  # refused before anything was written
    assert {p for p in _tree(tmp_path) - before if not p.startswith("out")} == set()
    assert not list((tmp_path / "sentinel").iterdir())
    assert not [f for f in (tmp_path / "out").rglob("*") if f.is_file()]


def test_a_symlink_in_the_output_folder_cannot_redirect_a_write(tmp_path):
    from robodata.export.lerobot import export_lerobot
    from robodata.names import UnsafeNameError
    from tests.core.helpers_hostile import container_with

    good = container_with(tmp_path / "c.rdep", "ep-1", "wrist")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "videos").symlink_to(elsewhere)
    # refused up front (a folder with anything in it); the export is written into a fresh temporary
    # folder and renamed, so no symlink of the destination is ever followed
    with pytest.raises((UnsafeNameError, ExportError), match="outside|not an empty directory"):
        export_lerobot([good], out)
    assert not list(elsewhere.iterdir())


def test_export_cli_reports_an_unsafe_stream_name_without_traceback(tmp_path):
    from robodata.cli import app
    from tests.core.helpers_hostile import container_with

    row = container_with(tmp_path / "c.rdep", "ep-1", "a/../../x/wrist")
    rec = {k: v for k, v in _write(tmp_path / "g.rdep", "ep-0", "fold", 0).items()}
    r = EpisodeReader.open(tmp_path / "g.rdep")
    rec.update(episode_id="ep-1", uri=row["uri"], cameras=["a/../../x/wrist"], layout_version=r.layout_version)
    rec.update(size_bytes=(tmp_path / "c.rdep").stat().st_size)
    rec.update(footer_offset=row["footer_offset"], footer_length=row["footer_length"])
    df = pl.DataFrame([rec]).with_columns(pl.from_epoch("start_time", time_unit="us").dt.replace_time_zone("UTC"))
    cat = Catalog(str(tmp_path / "catalog"))
    cat.merge(df)
    info, _ = curate(spec_from_dict({"version": 1, "name": "bad", "split": {"val_fraction": 0.0}}), cat, tmp_path / "m")
    res = CliRunner().invoke(app, ["export", "--format", "lerobot", str(info.path), str(tmp_path / "o" / "lr")])
    said = " ".join(res.output.split())  # rich wraps lines
    assert res.exit_code == 2 and "ContainerError" in said and "'a/../../x/wrist']: stream names" in said
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert not (tmp_path / "x").exists() and not (tmp_path / "o" / "x").exists()


def test_export_holds_the_state_sample_a_frame_lands_on_despite_timestamp_rounding():
    from robodata.export.episodes import sample_at

    t_state = np.arange(10) / 30.0
    values = np.arange(10, dtype=np.float32)[:, None]
    frames = t_state - 2e-6  # the video's pts a hair before the state's (float32) timestamps
    np.testing.assert_array_equal(sample_at(t_state, values, frames)[:, 0], values[:, 0])
    # between samples it is still the latest one before, never the next
    np.testing.assert_array_equal(sample_at(t_state, values, t_state[:-1] + 0.5 / 30)[:, 0], values[:-1, 0])
    assert sample_at(t_state[:1], values[:1], np.array([5.0]))[0, 0] == 0.0
