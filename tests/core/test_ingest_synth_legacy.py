import json

import numpy as np
import pytest
from PIL import Image

from robodata.container import EpisodeReader
from robodata.errors import ConfigError
from robodata.ingest.legacy import RawEpisodeError, fit_clock, import_legacy
from robodata.ingest.synth import SynthConfig, synthesize

CFG = SynthConfig(
    episodes=2,
    duration_s=2.0,
    height=48,
    width=64,
    fps=15.0,
    state_hz=50.0,
    clock_offset_max_s=0.08,
    jitter_frac=0.1,
    drop_prob=0.05,
    seed=7,
)


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    root = tmp_path_factory.mktemp("landing")
    return root, synthesize(CFG, root)


def test_synth_writes_legacy_layout_with_motion_jitter_and_offsets(landing):
    root, paths = landing
    assert len(paths) == 2 and all((p / "_COMPLETE").exists() for p in paths)
    ep = paths[0]
    meta = json.loads((ep / "meta.json").read_text())
    assert set(meta["cameras"]) == {"cam_left", "cam_right", "wrist"}
    jpgs = sorted((ep / "cam_left").glob("*.jpg"))
    assert 20 <= len(jpgs) < 30  # ~2 s at 15 fps minus drops
    a = np.asarray(Image.open(jpgs[0])).astype(int)
    b = np.asarray(Image.open(jpgs[-1])).astype(int)
    assert np.abs(a - b).mean() > 3  # the scene moves
    t = np.array([int(x) for x in (ep / "cam_left" / "timestamps.csv").read_text().split()[1:]])
    dt = np.diff(t)
    assert np.all(dt > 0) and dt.std() > 0  # jittered, monotonic
    truth = json.loads((ep / "synth_truth.json").read_text())["offsets_ns"]
    assert len(set(truth.values())) == 3 and max(abs(v) for v in truth.values()) > 1e6
    assert not list(root.glob("*.partial"))


def test_synth_is_deterministic(tmp_path):
    cfg = SynthConfig(episodes=1, duration_s=0.5, height=32, width=32, fps=10.0, seed=3)
    a = synthesize(cfg, tmp_path / "a")[0]
    b = synthesize(cfg, tmp_path / "b")[0]
    assert (a / "cam_left" / "000003.jpg").read_bytes() == (b / "cam_left" / "000003.jpg").read_bytes()
    assert (a / "clock_sync.json").read_text() == (b / "clock_sync.json").read_text()


def test_synth_config_validates():
    with pytest.raises(ConfigError, match="even"):
        SynthConfig(height=47)
    with pytest.raises(ConfigError, match="format"):
        SynthConfig(format="avi")


def test_import_legacy_aligns_clocks(landing, tmp_path):
    _, paths = landing
    res = import_legacy(paths[0], tmp_path / "ep.rdep")
    assert max(res.alignment_error_ns.values()) < 1e6  # sub-ms fit residual
    r = EpisodeReader.open(tmp_path / "ep.rdep")
    truth = json.loads((paths[0] / "synth_truth.json").read_text())["offsets_ns"]
    raw_t = {c: np.array([int(x) for x in (paths[0] / c / "timestamps.csv").read_text().split()[1:]]) for c in truth}
    win = r.read_window(0, 10, list(truth))
    # After alignment, first frames of all cameras sit near the same instant although their
    # device clocks differ by tens of ms.
    starts = [win[c].t[0] for c in truth]
    raw_starts = [raw_t[c][0] / 1e9 for c in truth]
    assert np.ptp(starts) < 0.02 < np.ptp(raw_starts) + 0.02
    assert res.frames["cam_left"] == len(win["cam_left"].t)
    assert r.meta.extra["success"] in (True, False)


def test_import_legacy_bad_jpeg_and_incomplete(landing, tmp_path):
    import shutil

    _, paths = landing
    bad = tmp_path / "bad"
    shutil.copytree(paths[1], bad)
    victim = sorted((bad / "wrist").glob("*.jpg"))[3]
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(RawEpisodeError, match="not a decodable JPEG"):
        import_legacy(bad, tmp_path / "out" / "bad.rdep")
    assert not list((tmp_path / "out").glob("*"))  # nothing half-written left behind
    (bad / "_COMPLETE").unlink()
    with pytest.raises(RawEpisodeError, match="_COMPLETE"):
        import_legacy(bad, tmp_path / "out" / "bad.rdep")


def test_fit_clock_recovers_offset_and_drift():
    dev = np.linspace(0, 1e10, 10)
    host = 1.0001 * dev - 3e7
    fit = fit_clock([[int(d), int(h)] for d, h in zip(dev, host, strict=True)])
    assert abs(fit.drift - 1.0001) < 1e-7 and abs(fit.offset + 3e7) < 10 and fit.residual_ns < 1
    with pytest.raises(ValueError):
        fit_clock([[1, 2]])


def test_mcap_synth(tmp_path):
    from mcap.reader import make_reader

    cfg = SynthConfig(episodes=1, duration_s=1.0, height=32, width=32, fps=10.0, state_hz=20.0, format="mcap")
    (p,) = synthesize(cfg, tmp_path)
    with open(p, "rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        topics = {c.topic for c in summary.channels.values()}
        counts = summary.statistics.channel_message_counts
    assert {"/cam_left/image/compressed", "/joint_states", "/events"} <= topics
    by_topic = {summary.channels[cid].topic: n for cid, n in counts.items()}
    assert by_topic["/cam_left/image/compressed"] == 10 and by_topic["/joint_states"] == 20
