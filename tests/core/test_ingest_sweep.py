"""Leftovers after kills (issue 44, item 8): `robodata.ingest.sweep` (`robodata gc`) removes container
objects no catalog row references and robodata's scratch folders once past the grace period, on S3
(moto on loopback) as on a local root, and never a referenced container."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import polars as pl
import pytest

from robodata.container import EpisodeReader
from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.pipeline import run_batch
from robodata.ingest.settings import IngestSettings
from robodata.ingest.sweep import SweepConfig, sweep
from robodata.ingest.synth import SynthConfig, synthesize
from robodata.ingest.tables import IngestPaths
from robodata.storage import objects

SMALL = dict(duration_s=1.0, height=32, width=32, fps=10.0, state_hz=50.0, cameras=("cam",))
LATER = 7200.0  # "now" two hours on: everything written by the test is past a 1 h grace


@pytest.fixture(params=["local", "s3"])
def root(request, tmp_path, monkeypatch):
    monkeypatch.setenv("ROBODATA_SCRATCH", str(tmp_path / "scratch"))
    if request.param == "local":
        yield str(tmp_path / "state")
        return
    from robodata_testing.services import LoopbackS3

    with LoopbackS3.start(f"sweep-{uuid.uuid4().hex[:12]}") as srv:
        for k, v in srv.env().items():
            monkeypatch.setenv(k, v)
        yield f"s3://{srv.bucket}/state"


def _ingest(root: str, land: Path, batch: str, seed: int, commit: bool, monkeypatch) -> None:
    synthesize(SynthConfig(episodes=2, format="mcap", seed=seed, **SMALL), land)
    paths = IngestPaths(root)
    settings = IngestSettings()
    write_manifest(IngestPaths(root), batch, new_items(str(land), LandingCursor()))
    if commit:
        run_batch(paths, batch, settings, derived=False)
        return
    import robodata.ingest.steps.episode_metadata as em

    def killed(*a, **k):  # the process dies after the upload, before the catalog merge
        raise KeyboardInterrupt

    with monkeypatch.context() as m, pytest.raises(KeyboardInterrupt):
        m.setattr(em, "merge_episodes", killed)
        run_batch(paths, batch, settings, derived=False)


def _objects(paths: IngestPaths) -> set[str]:
    fs = objects.filesystem(paths.containers, paths.fsspec_options())
    listed = fs.find(fs._strip_protocol(paths.containers))
    return {f"s3://{p}" if objects.is_remote(paths.containers) else p for p in listed}


def test_unreferenced_containers_and_scratch_go_after_the_grace_period_referenced_ones_never(
    root, tmp_path, monkeypatch
):
    paths = IngestPaths(root)
    _ingest(root, tmp_path / "land1", "b1", 1, True, monkeypatch)
    _ingest(root, tmp_path / "land2", "b2", 2, False, monkeypatch)  # killed: containers, no rows
    referenced = set(pl.read_delta(paths.catalog, storage_options=paths.delta_options())["uri"].to_list()) - {""}
    assert len(referenced) == 2
    half = paths.container("b3", "ep-x").removesuffix(".rdep") + ".rdep.partial.4242.7f00.tmp"
    objects.write_bytes(half, b"RDEP half a container", paths.fsspec_options())
    scratch = tmp_path / "scratch"
    (scratch / "robodata-out-abc").mkdir(parents=True)
    (scratch / "robodata-out-abc" / "ep.rdep.partial.99.1a.tmp").write_bytes(b"x" * 100)
    (scratch / "robodata-in-def" / "item").mkdir(parents=True)
    (scratch / "not-ours").mkdir()
    orphans = _objects(paths) - referenced
    assert len(orphans) == 3  # two killed containers and the half-written file: today nothing removes them

    young = sweep(paths, SweepConfig(grace_s=3600))
    assert young.young == 3 and not young.orphans and young.referenced == 2 and not young.scratch

    dry = sweep(paths, SweepConfig(grace_s=3600, dry_run=True), now=time.time() + LATER)
    assert set(dry.orphans) == orphans and len(dry.scratch) == 2 and dry.deleted == 0
    assert _objects(paths) == referenced | orphans and (scratch / "robodata-out-abc").exists()

    done = sweep(paths, SweepConfig(grace_s=3600), now=time.time() + LATER)
    assert set(done.orphans) == orphans and done.deleted == 5 and done.referenced == 2
    assert _objects(paths) == referenced  # orphans_after_gc 0, referenced_deleted 0
    for uri in referenced:
        assert EpisodeReader.open(uri, **paths.fsspec_options()).meta.duration_s > 0
    assert sorted(os.listdir(scratch)) == ["not-ours"]  # nothing but robodata's own folders


def test_no_catalog_no_deletion_and_a_merge_since_the_listing_keeps_its_container(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBODATA_SCRATCH", str(tmp_path / "scratch"))
    paths = IngestPaths(str(tmp_path / "state"))
    stray = paths.container("b1", "ep-a")
    objects.write_bytes(stray, b"RDEP", {})
    report = sweep(paths, SweepConfig(grace_s=0, scratch=None), now=time.time() + LATER)
    assert report.orphans == [] and Path(stray).exists() and "no catalog" in report.notes[0]
    # a row committed between the listing and the deletion: the re-check keeps its container
    _ingest(paths.root, tmp_path / "land", "b9", 3, True, monkeypatch)
    import robodata.ingest.sweep as sw

    first = sw.Referenced
    calls = []

    def late_row(p, names=None):
        calls.append(names)
        refs = first(p, names)
        if names is None:  # the first pass has not seen the row yet
            refs.hashes = refs.of([f"{p.containers}/b9/none.rdep"])
        return refs

    monkeypatch.setattr(sw, "Referenced", late_row)
    report = sweep(paths, SweepConfig(grace_s=0, scratch=None), now=time.time() + LATER)
    assert [c is None for c in calls] == [True, False]
    assert report.orphans == [stray] and all(Path(u).exists() for u in _catalog_uris(paths))


def _catalog_uris(paths: IngestPaths) -> list[str]:
    return [u for u in pl.read_delta(paths.catalog)["uri"].to_list() if u]


def test_gc_cli_dry_run_lists_and_removes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBODATA_SCRATCH", str(tmp_path / "scratch"))
    from typer.testing import CliRunner

    from robodata.cli import app

    paths = IngestPaths(str(tmp_path / "state"))
    objects.write_bytes(paths.container("b1", "ep-a"), b"RDEP", {})
    out = CliRunner().invoke(app, ["gc", "--root", paths.root, "--dry-run", "--grace-hours", "0", "--no-scratch"])
    assert out.exit_code == 0, out.output
    report = json.loads(out.output.strip().splitlines()[-1])
    assert report["dry_run"] is True and report["listed"] == 1 and report["deleted"] == 0
