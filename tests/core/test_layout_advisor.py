"""The advisor follows the read pattern: short GOPs for random single frames, long GOPs with
skippable B-frames for subsampled windows; the CLI prints and writes the plan."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from robodata.cli import app
from robodata.dataset.pattern import ReadPattern, StreamWindow
from robodata.errors import ConfigError
from robodata.layout.advisor import advise, predict_layout
from robodata.layout.config import AdvisorConfig
from robodata.layout.workload import sample_anchors
from tests.core.helpers_container import CAMS, write_small

FPS = 20.0
VLA = ReadPattern(
    "vla",
    (
        StreamWindow("cameras", CAMS, "video", length=2, every=1, offset=-1),
        StreamWindow("state", ("joint_pos",), "array", length=1),
        StreamWindow("action", ("cmd",), "array", length=10),
    ),
    anchor_stride_s=1 / FPS,
)
WAM = ReadPattern(
    "wam",
    (
        StreamWindow("cameras", CAMS, "video", length=8, every=4),
        StreamWindow("state", ("joint_pos",), "array", length=10, every=10),
    ),
    anchor_stride_s=1.0,
)
CFG = AdvisorConfig(
    gops=(1, 2, 4, 10, 20, 40),
    crfs=(23,),
    camera_spans_s=(1.0, 2.0),
    array_spans_s=(1.0, 4.0),
    samples=12,
    rounds=1,
    verify_top=2,
    min_psnr_db=25.0,
    loader="reader",  # the read_window model frame for frame (the default follows PatternDataset)
)


@pytest.fixture(scope="module")
def episode(tmp_path_factory):
    p = tmp_path_factory.mktemp("adv") / "ep.rdep"
    write_small(p, duration_s=6.0, fps=FPS, h=96, w=128)
    return str(p)


def test_vla_gets_short_gops_wam_gets_long_gops_with_skippable_b_frames(episode):
    vla = advise(VLA, [episode], CFG)
    wam = advise(WAM, [episode], CFG)
    gv, gw = vla.layout.group_of("cam_left"), wam.layout.group_of("cam_left")
    assert gv.video.gop <= 4, vla.alternatives
    assert gw.video.gop >= 10 and gw.video.bframes == 3, wam.alternatives  # every=4 -> 3 B between references
    assert set(gv.streams) == set(CAMS)
    # arrays the pattern reads share one group; what it never reads is kept out of the hot groups
    assert vla.layout.group_of("joint_pos").name == vla.layout.group_of("cmd").name == "proprio"
    assert vla.layout.group_of("events").name == "cold"
    assert wam.layout.group_of("cmd").name == "cold"
    for plan in (vla, wam):
        assert plan.chosen in [a["label"] for a in plan.alternatives]
        assert all("measured_ms" in a for a in plan.alternatives[:2])
        assert plan.page_size in CFG.page_sizes
    # the model itself says so: the VLA layout reads VLA samples with fewer decoded frames than the WAM layout
    from robodata.container import EpisodeReader
    from robodata.layout.calibration import calibrate

    r = EpisodeReader.open(episode)
    cal = calibrate(r, CFG, {0, 3})
    smp = sample_anchors([r.meta], VLA, 16)
    on_own = predict_layout(vla.layout, VLA, cal, [r.meta], smp)
    on_wam = predict_layout(wam.layout, VLA, cal, [r.meta], smp)
    assert on_own.frames_decoded < on_wam.frames_decoded


def test_quality_floor_and_bad_patterns(episode):
    cfg = AdvisorConfig(
        gops=(4, 20),
        crfs=(23, 35),
        camera_spans_s=(1.0,),
        array_spans_s=(2.0,),
        samples=4,
        rounds=1,
        verify_top=1,
        min_psnr_db=99.0,
    )
    plan = advise(VLA, [episode], cfg)
    assert plan.layout.group_of("cam_left").video.crf == 23  # nothing meets the floor: best quality offered
    bad = ReadPattern("bad", (StreamWindow("cameras", ("cam_left", "nope"), "video", length=2),))
    with pytest.raises(ConfigError, match="nope"):
        advise(bad, [episode], cfg)
    with pytest.raises(ConfigError):
        AdvisorConfig(gops=())
    with pytest.raises(ConfigError):
        AdvisorConfig(choose="measured", verify_top=0)


def test_cli_advise_prints_and_writes_plan(episode, tmp_path):
    cfg = tmp_path / "adv.yaml"
    cfg.write_text(
        "gops: [2, 10]\ncrfs: [23]\ncamera_spans_s: [1.0]\narray_spans_s: [2.0]\nsamples: 6\nmin_psnr_db: 25.0\n"
    )
    out = tmp_path / "plan.json"
    res = CliRunner(env={"COLUMNS": "200"}).invoke(
        app, ["advise", "vla", "-e", episode, "--config", str(cfg), "--out", str(out), "--quick"]
    )
    assert res.exit_code == 0, res.output
    assert "chosen:" in res.output and "predicted ms" in res.output
    plan = json.loads(out.read_text())
    assert plan["layout_version"].startswith("v1-") and plan["pattern"]["name"] == "vla"
    res = CliRunner().invoke(app, ["advise", "vla", "-e", str(tmp_path / "missing.rdep")])
    assert res.exit_code == 2 and "no such episode" in res.output


def test_measure_through_reader_and_dataset_agree_on_what_is_read(episode):
    from robodata.container import EpisodeReader
    from robodata.layout.measure import measure, read_sample

    r = EpisodeReader.open(episode)
    smp = sample_anchors([r.meta], WAM, 4, seed=3)
    sample = read_sample(r, WAM, smp[0].t)
    assert sample["cam_left"].data.shape[0] == 8  # length frames, every 4th
    assert np.allclose(np.diff(sample["cam_left"].t), 4 / FPS, atol=1e-6)
    assert sample["joint_pos"].data.shape[0] == 10  # every 10th of 100 Hz over ~1.4 s
    got = {loader: measure({"a": [r]}, WAM, smp, rounds=1, loader=loader)["a"] for loader in ("reader", "dataset")}
    assert all(m.cpu_s > 0 and m.bytes > 0 for m in got.values())
    with pytest.raises(ValueError):
        measure({"a": [r]}, WAM, smp, loader="nope")
