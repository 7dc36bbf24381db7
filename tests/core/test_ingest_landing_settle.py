"""Landing entries are claimed only once whole (robodata.ingest.landing.settle through the sensor's
tick): copied in chunks, moved in before their marker, uploaded under a temporary name, truncated."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from robodata.ingest.landing.launches import BatchPolicy, LaunchState, tick
from robodata.ingest.landing.scan import LandingItem
from robodata.ingest.landing.settle import format_complete
from robodata.ingest.landing.stagger import StaggerPolicy
from robodata.ingest.synth import SynthConfig, synthesize
from robodata.ingest.tables import IngestPaths

TINY = dict(duration_s=0.5, height=16, width=16, fps=4.0, state_hz=10.0, cameras=("cam_left",))
POLICY = BatchPolicy(settle_s=2.0, incomplete_after_s=60.0)
NOW = 2_000_000_000.0  # the ticks' clock; the files' mtimes are real (and older)


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    synthesize(SynthConfig(episodes=1, format="mcap", seed=1, **TINY), src / "mcap")
    synthesize(SynthConfig(episodes=1, format="jpeg", seed=2, **TINY), src / "jpeg")
    return src


class Landing:
    def __init__(self, tmp: Path):
        self.dir, self.paths, self.state, self.t = tmp / "landing", IngestPaths(str(tmp / "state")), LaunchState(), NOW
        self.dir.mkdir(parents=True)

    def tick(self, dt: float = 3.0) -> list[str]:
        """One sensor tick `dt` seconds after the last; the names it claimed."""
        self.t += dt
        t = tick(self.state, str(self.dir), self.paths, POLICY, StaggerPolicy(run_s=0), now=self.t)
        return [i["name"] for b in t.new_batches for i in _items(self.paths, b)]


def _items(paths: IngestPaths, batch: str) -> list[dict]:
    import json

    return json.loads(Path(paths.batch_manifest(batch)).read_text())["items"]


def test_an_mcap_copied_in_chunks_is_claimed_once_whole_and_unchanged(tmp_path, sources):
    (src,) = (sources / "mcap").glob("*.mcap")
    land = Landing(tmp_path)
    data, dst = src.read_bytes(), land.dir / src.name
    with open(dst, "wb") as f:
        for i in range(0, len(data) - 1, max(1, len(data) // 4)):
            f.write(data[i : i + len(data) // 4])
            f.flush()
            if f.tell() < len(data):
                assert land.tick(30.0) == []  # a long pause mid-copy: settled, but not an MCAP's end yet
    assert dst.read_bytes() == data
    assert land.tick(0.5) == []  # the last chunk changed it: seen again
    assert land.tick() == [src.name]  # unchanged over two ticks >= settle_s apart
    assert land.tick() == [] and land.state.settling.seen == {}


def test_a_truncated_recording_is_claimed_after_waiting_so_that_it_gets_its_row(tmp_path, sources):
    (src,) = (sources / "mcap").glob("*.mcap")
    land = Landing(tmp_path)
    (land.dir / src.name).write_bytes(src.read_bytes()[:-100])
    assert land.tick() == [] and land.tick(30.0) == []
    assert land.tick(31.0) == [src.name]  # settled for incomplete_after_s: ingestion quarantines it


def test_a_folder_moved_in_before_its_marker_waits_and_one_copied_marker_first_waits_for_its_files(tmp_path, sources):
    (ep,) = [p for p in (sources / "jpeg").iterdir() if p.is_dir()]
    land = Landing(tmp_path)
    dst = land.dir / ep.name
    shutil.copytree(ep, dst, ignore=shutil.ignore_patterns("_COMPLETE"))
    assert land.tick() == [] and land.tick() == []  # unrecognized (no marker yet): waits
    (dst / "_COMPLETE").write_bytes((ep / "_COMPLETE").read_bytes())
    assert land.tick() == [] and land.tick() == [ep.name]

    other = Landing(tmp_path / "b")
    dst = other.dir / ep.name
    dst.mkdir()
    (dst / "_COMPLETE").write_bytes((ep / "_COMPLETE").read_bytes())  # `cp -r` order: _COMPLETE sorts first
    for f in sorted(p for p in ep.rglob("*") if p.is_file() and p.name != "_COMPLETE"):
        (dst / f.relative_to(ep)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, dst / f.relative_to(ep))
        assert other.tick(1.0) == []  # a file more on every tick: never the same twice
    assert other.tick() == [ep.name]  # the last tick saw it whole; unchanged 3 s later


def test_an_unrecognized_file_is_claimed_once_settled(tmp_path):
    land = Landing(tmp_path)
    (land.dir / "flight.ulg").write_bytes(b"ULog" * 100)
    assert land.tick() == [] and land.tick() == ["flight.ulg"]  # its row names what it looks like


def test_temporary_names_are_never_claimed_and_the_renamed_entry_is(tmp_path, sources):
    (src,) = (sources / "mcap").glob("*.mcap")
    land = Landing(tmp_path)
    part = land.dir / (src.name + ".part")
    shutil.copy2(src, part)
    assert land.tick() == [] and land.tick() == [] and land.state.settling.seen == {}
    os.rename(part, land.dir / src.name)
    assert land.tick() == [] and land.tick() == [src.name]


def test_an_entry_still_settling_is_claimed_after_the_watermark_passed_it(tmp_path, sources):
    (src,) = (sources / "mcap").glob("*.mcap")
    land = Landing(tmp_path)
    slow = land.dir / "a-slow.mcap"
    slow.write_bytes(src.read_bytes()[:-8])  # not whole: waits
    later = land.dir / src.name
    shutil.copyfile(src, later)
    os.utime(slow, (os.stat(later).st_mtime - 5,) * 2)
    assert land.tick() == [] and land.tick() == [src.name]  # the cursor's watermark is past a-slow now
    with open(slow, "ab") as f:
        f.write(src.read_bytes()[-8:])
    os.utime(slow, (os.stat(later).st_mtime - 5,) * 2)  # an mtime older than the watermark (a copy keeping it)
    assert land.tick() == [] and land.tick() == ["a-slow.mcap"]


def test_hdf5_is_whole_when_as_long_as_its_superblock_says(tmp_path):
    path = tmp_path / "episode_0.hdf5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(10_000)
    item = LandingItem(str(path), "hdf5", path.stat().st_size, 0.0, path.name)
    assert format_complete(item)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert not format_complete(item)
