"""Issue 39: an MCAP / ROS bag / RLDS item is read once by an ingest run. Its alignment reads it whole,
so the aligned_tracks worker converts it in that read into a staged container that the episodes
stage commits (robodata.ingest.steps.one_pass). The containers are those of a separate
conversion, frame for frame; a staged container is committed only under the settings it was made
with, never for a refused episode, and leaves nothing behind."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

import robodata.codecs as codecs
import robodata.ingest.steps.aligned_tracks as aligned_step
import robodata.ingest.steps.episodes as episodes_step
from robodata.container import EpisodeReader
from robodata.container.meta import VideoSettings
from robodata.ingest.landing.batch import write_manifest
from robodata.ingest.landing.scan import LandingCursor, new_items
from robodata.ingest.qc import QCSelection, QCThresholds
from robodata.ingest.settings import IngestSettings
from robodata.ingest.steps import one_pass
from robodata.ingest.steps.aligned_tracks import align_batch
from robodata.ingest.steps.episodes import convert_batch
from robodata.ingest.steps.qc_results import pre_qc
from robodata.ingest.steps.raw_episodes import observe
from robodata.ingest.synth.episode import SynthConfig, make_episode
from robodata.ingest.synth.mcap import write_mcap_episode
from robodata.ingest.tables import IngestPaths

CFG = SynthConfig(episodes=2, duration_s=1.5, cameras=("top",), height=48, width=64, format="mcap")
SETTINGS = IngestSettings(workers=1)


@pytest.fixture(scope="module")
def landing(tmp_path_factory) -> Path:
    land = tmp_path_factory.mktemp("land")
    for i in range(CFG.episodes):
        write_mcap_episode(make_episode(CFG, i), land)
    return land


def _batch(landing: Path, root: Path) -> IngestPaths:
    paths = IngestPaths(str(root))
    write_manifest(paths, "b1", new_items(str(landing), LandingCursor()))
    observe(paths, "b1")
    return paths


def _opens(monkeypatch) -> list[str]:
    """The landing uris staged_raw opens, from the alignment and the episodes stage."""
    seen: list[str] = []
    for mod in (aligned_step, episodes_step):
        real = mod.staged_raw

        def counting(uri, *a, _real=real, **k):
            seen.append(uri)
            return _real(uri, *a, **k)

        monkeypatch.setattr(mod, "staged_raw", counting)
    return seen


def _run(paths: IngestPaths, s: IngestSettings, s_convert: IngestSettings | None = None) -> dict:
    align_batch(paths, "b1", s)
    pre_qc(paths, "b1", s.qc)
    return convert_batch(paths, "b1", s_convert or s)


def _streams(path: str) -> dict[str, np.ndarray]:
    r = EpisodeReader.open(path)
    try:
        win = r.read_window(0.0, r.meta.duration_s + 1.0, list(r.meta.streams))
        return {k: np.asarray(v.data) for k, v in win.items()}
    finally:
        r.close()


def _staged(paths: IngestPaths) -> list[Path]:
    return sorted(Path(paths.staged_folder("b1")).glob("*")) if Path(paths.staged_folder("b1")).exists() else []


def _reproducible_x264(monkeypatch) -> None:
    """x264 as ingest sets it up, plus cpu-independent: on an AVX-512 host the same small noisy
    frames encoded twice gave other bytes now and then (docs/container-format.md), and this test
    compares two conversions pixel for pixel."""
    spec = codecs.video_codec("h264")

    def options(*args, **kw) -> dict[str, str]:
        opts = spec.options(*args, **kw)
        return {**opts, "x264-params": opts["x264-params"] + ":cpu-independent=1"}

    monkeypatch.setitem(codecs._REGISTRY, "h264", dataclasses.replace(spec, options=options))


def test_an_mcap_is_read_once_and_converts_as_a_separate_read_would(landing, tmp_path, monkeypatch):
    _reproducible_x264(monkeypatch)
    paths = _batch(landing, tmp_path / "one")
    opens = _opens(monkeypatch)
    out = _run(paths, SETTINGS)
    uris = paths.read("aligned_tracks", "b1", ["uri"]).column("uri").to_pylist()
    assert sorted(opens) == sorted(uris) and len(uris) == CFG.episodes  # each item opened once, in alignment
    assert out["converted"] == out["converted_in_alignment"] == CFG.episodes and out["failed"] == 0
    assert not Path(paths.staged_folder("b1")).exists()  # committed, the staged folder removed

    monkeypatch.setattr(one_pass, "applies", lambda kind: False)  # the same batch read twice, as before
    apart = _batch(landing, tmp_path / "two")
    out2 = _run(apart, SETTINGS)
    assert out2["converted"] == CFG.episodes and out2["converted_in_alignment"] == 0
    rows = {r["episode_id"]: r for r in paths.read("conversions", "b1").to_pylist()}
    rows2 = {r["episode_id"]: r for r in apart.read("conversions", "b1").to_pylist()}
    assert rows.keys() == rows2.keys()
    for ep, r in rows.items():
        assert r["container_uri"] == paths.container("b1", ep)
        facts = ("ok", "duration_s", "frames_min", "state_steps", "layout_version")
        assert {k: r[k] for k in facts} == {k: rows2[ep][k] for k in facts}
        a, b = _streams(r["container_uri"]), _streams(rows2[ep]["container_uri"])
        assert a.keys() == b.keys() and len(a) >= 2
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def test_a_container_staged_under_other_settings_is_converted_again(landing, tmp_path, monkeypatch):
    paths = _batch(landing, tmp_path)
    opens = _opens(monkeypatch)
    align_batch(paths, "b1", SETTINGS)
    staged = {r["uri"]: json.loads(r["staged_json"]) for r in paths.read("aligned_tracks", "b1").to_pylist()}
    other = dataclasses.replace(SETTINGS, video=dataclasses.replace(VideoSettings(), crf=VideoSettings().crf + 6))
    assert one_pass.fingerprint(other) != one_pass.fingerprint(SETTINGS)
    assert one_pass.fingerprint(dataclasses.replace(SETTINGS, workers=4)) == one_pass.fingerprint(SETTINGS)
    pre_qc(paths, "b1", SETTINGS.qc)
    out = convert_batch(paths, "b1", other)
    assert out["converted"] == CFG.episodes and out["converted_in_alignment"] == 0
    assert len(opens) == 2 * CFG.episodes and _staged(paths) == []
    for r in paths.read("conversions", "b1").to_pylist():  # written at the other CRF: smaller
        assert r["ok"] and r["size_bytes"] < staged[r["uri"]]["size_bytes"], (r, staged[r["uri"]])


def test_a_blocked_episode_is_not_staged_and_a_vanished_one_is_converted_again(landing, tmp_path):
    strict = dataclasses.replace(SETTINGS, qc=QCSelection(thresholds=QCThresholds(joint_abs_max=1e-6)))
    paths = _batch(landing, tmp_path / "blocked")
    align_batch(paths, "b1", strict)
    assert _staged(paths) == []
    assert all(r["staged_json"] is None for r in paths.read("aligned_tracks", "b1").to_pylist())
    pre_qc(paths, "b1", strict.qc)
    out = convert_batch(paths, "b1", strict)
    assert out["converted"] == 0 and out["skipped_quarantined"] == CFG.episodes

    paths = _batch(landing, tmp_path / "vanished")
    align_batch(paths, "b1", SETTINGS)
    staged = _staged(paths)
    assert len(staged) == CFG.episodes
    staged[0].unlink()  # a sweep or an operator removed it before the commit
    (staged[0].parent / "stray.rdep").write_bytes(b"x")  # a worker died after staging: no row names it
    pre_qc(paths, "b1", SETTINGS.qc)
    out = convert_batch(paths, "b1", SETTINGS)
    assert out["converted"] == CFG.episodes and out["converted_in_alignment"] == CFG.episodes - 1
    assert not Path(paths.staged_folder("b1")).exists()


def test_a_refused_duplicate_leaves_no_staged_container(tmp_path):
    land, other = tmp_path / "land", tmp_path / "other"
    land.mkdir()
    other.mkdir()
    write_mcap_episode(make_episode(CFG, 0), land)  # two recordings claiming one episode_id
    write_mcap_episode(make_episode(CFG, 0), other, quality=80).rename(land / "zz-second.mcap")
    paths = _batch(land, tmp_path / "state")
    out = align_batch(paths, "b1", SETTINGS)
    assert out["duplicate_ids"] == 1
    rows = paths.read("aligned_tracks", "b1").to_pylist()
    kept = [r for r in rows if r["ok"]]
    assert len(kept) == 1 and json.loads(kept[0]["staged_json"])["ok"]
    assert [r["staged_json"] for r in rows if not r["ok"]] == [None]
    assert [p.name for p in _staged(paths)] == [Path(paths.staged_container("b1", kept[0]["uri"])).name]
