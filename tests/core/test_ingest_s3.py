"""Ingestion without Dagster against a real S3 API (moto on loopback): landing zone and state root
on S3, objects staged through bounded local scratch."""

import json
import os
import uuid
from pathlib import Path

import boto3
import fsspec
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable

from robodata.ingest.importers.lerobot import episode_files
from robodata.ingest.landing.scan import scan
from robodata.ingest.synth import SynthConfig, synthesize
from robodata.ingest.synth.lerobot import write_lerobot
from robodata.storage import objects

TINY = dict(duration_s=1.0, height=32, width=32, fps=10.0, state_hz=20.0)


@pytest.fixture
def s3(monkeypatch, tmp_path):
    from robodata_testing.services import LoopbackS3

    # moto keeps its buckets in process-global state: a fresh bucket per test
    with LoopbackS3.start(f"ingest-{uuid.uuid4().hex[:12]}") as srv:
        for k, v in srv.env().items():
            monkeypatch.setenv(k, v)
        monkeypatch.setenv("ROBODATA_SCRATCH", str(tmp_path / "scratch"))
        yield srv


def _fs(s3):
    return fsspec.filesystem("s3", **s3.location().fsspec_options())


def test_landing_scan_on_s3_sees_new_arrivals_and_lerobot_episodes(s3, tmp_path):
    fs, land = _fs(s3), f"s3://{s3.bucket}/landing"
    synthesize(SynthConfig(episodes=1, **TINY), tmp_path / "a")
    write_lerobot(tmp_path / "a" / "lr", "v2.1", episodes=2, frames_per_episode=8, height=32, width=32)
    fs.put(f"{tmp_path}/a/", f"{land}/", recursive=True)
    first = sorted((i.kind, i.name) for i in scan(land))
    assert [k for k, _ in first] == ["legacy-jpeg", "lerobot-v2.1", "lerobot-v2.1"]
    (ep,) = synthesize(SynthConfig(episodes=1, site="site-b", **TINY), tmp_path / "b")
    client = boto3.client("s3", **s3.boto_kwargs())  # another uploader, not this process's s3fs
    for f in sorted(p for p in ep.rglob("*") if p.is_file()):
        client.upload_file(str(f), s3.bucket, f"landing/{f.relative_to(tmp_path / 'b')}")
    assert len(list(scan(land))) == 4  # listed again, not served from a stale listing cache
    assert os.listdir(tmp_path / "scratch") == []


def test_lerobot_episode_files_name_only_that_episode(tmp_path):
    root = write_lerobot(tmp_path / "lr", "v2.1", episodes=3, frames_per_episode=8, height=32, width=32)
    files = episode_files(root, 1)
    assert files and all("episode_000001" in f for f in files)
    assert any(f.endswith(".parquet") for f in files) and any(f.endswith(".mp4") for f in files)
    assert episode_files(root, 7) == []


def test_local_output_publishes_only_complete_files(s3, tmp_path):
    opts, uri = s3.location().fsspec_options(), f"s3://{s3.bucket}/out/ep.rdep"
    with pytest.raises(RuntimeError), objects.local_output(uri, opts) as local:
        Path(local).write_bytes(b"half")
        raise RuntimeError("writer failed")
    assert not objects.exists(uri, opts)
    with objects.local_output(uri, opts) as local:
        Path(local).write_bytes(b"x" * 1000)
    assert objects.size(uri, opts) == 1000 and os.listdir(tmp_path / "scratch") == []


def test_cli_ingest_with_s3_landing_and_root(s3, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from robodata.cli import app

    src = tmp_path / "src"
    eps = synthesize(SynthConfig(episodes=2, **TINY), src)
    (eps[1] / "state.parquet").write_bytes(b"not parquet")  # bad input: quarantined, not fatal
    write_lerobot(src / "lr", "v2.1", episodes=2, frames_per_episode=8, height=32, width=32)
    _fs(s3).put(f"{src}/", f"s3://{s3.bucket}/landing/", recursive=True)
    monkeypatch.chdir(tmp_path)
    root = f"s3://{s3.bucket}/state"
    res = CliRunner().invoke(app, ["ingest", f"s3://{s3.bucket}/landing", "--root", root, "--batch", "b1"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output.strip().splitlines()[-1])
    assert out["episode_metadata"]["rows"] == 4 and out["episode_metadata"]["pass"] == 3
    assert out["episodes"]["converted_in_alignment"] == 2  # the LeRobot episodes, staged on S3 and moved
    loc = s3.location("state")
    cat = DeltaTable(f"{root}/catalog/episodes", storage_options=loc.delta_options()).to_pyarrow_table()
    ok = cat.filter(pc.equal(cat.column("qc_status"), "pass")).to_pylist()
    assert sorted(r["episode_id"] for r in ok if r["vendor"] == "lerobot") == ["lr-000000", "lr-000001"]
    assert all(
        r["uri"].startswith(f"{root}/containers/b1/")
        and objects.size(r["uri"], loc.fsspec_options()) == r["size_bytes"]
        for r in ok
    )
    assert not _fs(s3).find(f"{root}/containers/b1/.staged")  # LeRobot converted in its alignment's read, committed
    qc = DeltaTable(f"{root}/ingest/qc_results", storage_options=loc.delta_options()).to_pyarrow_table().to_pylist()
    (bad,) = [r for r in qc if r["stage"] == "summary" and not r["passed"]]
    assert bad["uri"] == f"s3://{s3.bucket}/landing/{eps[1].name}" and "state.parquet" in bad["reason"]
    assert f"s3://{s3.bucket}/landing/{eps[1].name}" in bad["reason"]  # the landing uri, not a scratch path
    assert sorted(os.listdir(tmp_path)) == ["scratch", "src"] and os.listdir(tmp_path / "scratch") == []


def test_item_too_big_for_scratch_fails_that_episode_with_the_reason(s3, tmp_path, monkeypatch):
    import shutil

    from robodata.ingest.settings import IngestSettings
    from robodata.ingest.steps.aligned_tracks import align_one

    (ep,) = synthesize(SynthConfig(episodes=1, **TINY), tmp_path / "src")
    _fs(s3).put(str(ep), f"s3://{s3.bucket}/landing/{ep.name}", recursive=True)
    usage = shutil.disk_usage(str(tmp_path))
    monkeypatch.setattr(objects.shutil, "disk_usage", lambda p: usage._replace(free=1 << 20))  # a full scratch disk
    row = align_one(f"s3://{s3.bucket}/landing/{ep.name}", "legacy-jpeg", IngestSettings())
    assert not row["ok"] and "ROBODATA_SCRATCH" in row["error"] and ep.name in row["error"]
    assert os.listdir(tmp_path / "scratch") == []
