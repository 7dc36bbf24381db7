import json

import numpy as np
import pytest

from robodata.container import EpisodeReader
from robodata.ingest.align import aligned_tracks
from robodata.ingest.convert import convert
from robodata.ingest.importers import open_raw
from robodata.ingest.landing.scan import scan
from robodata.ingest.raw import RawEpisodeError
from robodata.ingest.synth import SynthConfig, synthesize
from robodata.ingest.synth.lerobot import write_lerobot
from robodata.ingest.topics import TopicMap, TopicRule
from robodata.ingest.workers.binpack import balance, first_fit_decreasing, makespan
from tests.core.helpers_ingest import SMALL, write_ros2_mcap


def _roundtrip(uri, kind, out, topic_map=None):
    raw = open_raw(str(uri), kind, topic_map)
    al = aligned_tracks(raw)
    res = convert(raw, al, out)
    return raw, al, res, EpisodeReader.open(res.uri)


def test_legacy_alignment_removes_device_offsets(tmp_path):
    (ep,) = synthesize(SynthConfig(episodes=1, clock_offset_max_s=0.08, **SMALL), tmp_path / "land")
    raw, al, res, r = _roundtrip(ep, "legacy-jpeg", tmp_path / "ep.rdep")
    truth = json.loads((ep / "synth_truth.json").read_text())["offsets_ns"]
    for cam, off in truth.items():
        assert abs(al.timing[cam].clock_offset_ms + off / 1e6) < 1.0  # fit recovers -offset within 1 ms
    assert al.alignment_error_ms < 1.0
    starts = [r.read_window(0, 5, [c])[c].t[0] for c in truth]
    assert np.ptp(starts) < 0.15 and res.frames["cam_left"] == 20


def test_ros2_cdr_mcap_with_custom_topic_and_raw_images(tmp_path):
    tm = TopicMap.default().extended(
        TopicRule("/gripper/force", "array", stream="gripper_force", field="data", units="N")
    )
    for raw_image in (False, True):
        p = write_ros2_mcap(tmp_path / f"r{raw_image}.mcap", raw_image=raw_image)
        raw, al, res, r = _roundtrip(p, "mcap", tmp_path / f"o{raw_image}.rdep", tm)
        assert set(r.meta.streams) >= {"cam_front", "joint_pos", "joint_cur", "gripper_force"}
        assert abs(al.timing["cam_front"].clock_offset_ms - 3.0) < 0.01  # header stamp 3 ms before receive
        w = r.read_window(0, 3, ["cam_front", "gripper_force"])
        assert len(w["cam_front"].data) == 20 and w["gripper_force"].data.shape == (20, 2)
        assert not raw.issues


def test_unknown_topic_is_reported_not_fatal(tmp_path):
    p = write_ros2_mcap(tmp_path / "u.mcap", extra_topic=None, unknown_topic="/mystery")
    raw = open_raw(str(p), "mcap")
    assert any("/mystery" in i and i.startswith("unknown_topic:") for i in raw.issues)


def test_truncated_mcap_raises_clear_error(tmp_path):
    p = write_ros2_mcap(tmp_path / "t.mcap")
    p.write_bytes(p.read_bytes()[:3000])
    with pytest.raises(RawEpisodeError, match="truncated or corrupt MCAP"):
        open_raw(str(p), "mcap")


@pytest.mark.parametrize("version,codec", [("v2.1", "h264"), ("v3.0", "av1")])
def test_lerobot_datasets(tmp_path, version, codec):
    root = write_lerobot(
        tmp_path / f"lr-{version}", version, episodes=2, frames_per_episode=12, height=64, width=64, codec=codec
    )
    items = sorted(scan(str(tmp_path)), key=lambda i: i.uri)
    assert [i.kind for i in items] == [f"lerobot-{version}"] * 2
    for i, it in enumerate(items):
        raw, al, res, r = _roundtrip(it.uri, it.kind, tmp_path / f"{i}.rdep")
        assert res.frames == {"top": 12, "wrist": 12}
        assert r.meta.streams["joint_pos"].shape == (6,) and r.meta.task == "pick_place"
        w = r.read_window(0, 5, ["top", "joint_pos"])
        assert w["top"].data.shape == (12, 64, 64, 3) and len(w["joint_pos"].t) == 12
        assert al.alignment_error_ms < 1.0
    assert root.exists()


def test_binpack_balances_heavy_tails():
    rng = np.random.default_rng(0)
    sizes = list(rng.pareto(1.5, 500) + 1)
    bins = balance(sizes, 8)
    assert sorted(i for b in bins for i in b) == list(range(500))
    assert makespan(sizes, bins) <= 1.01 * max(sum(sizes) / 8, max(sizes))
    ffd = first_fit_decreasing([5, 4, 3, 3, 2, 2, 1], 7)
    assert all(sum([5, 4, 3, 3, 2, 2, 1][i] for i in b) <= 7 for b in ffd) and len(ffd) == 3


def test_convert_returns_the_facts_a_reader_finds_without_reopening(tmp_path):
    (ep,) = synthesize(SynthConfig(episodes=1, **SMALL), tmp_path / "land")
    _, _, res, r = _roundtrip(ep, "legacy-jpeg", tmp_path / "ep.rdep")
    assert (res.footer_offset, res.footer_length) == (r.footer_offset, r.footer_length)
    assert res.layout_version == r.layout_version and res.duration_s == r.meta.duration_s
    assert res.size_bytes == (tmp_path / "ep.rdep").stat().st_size
