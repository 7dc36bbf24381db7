"""Advice as users train: presets at the data's own rates through `robodata advise PRESET --source`
(a 30 Hz and a 15 Hz source), one layout for several patterns with weights (each within a stated
fraction of its own best), and the quality floor on the calibration frames' 1st percentile and median."""

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from robodata.cli import app
from robodata.container.calibration import CodecPoint
from robodata.dataset.pattern import ReadPattern, StreamWindow
from robodata.errors import ConfigError
from robodata.ingest.synth import SynthConfig, synthesize
from robodata.layout.advisor import advise
from robodata.layout.candidates import meets_floor, searched_gops
from robodata.layout.config import AdvisorConfig
from robodata.layout.inputs import weighted_spec
from robodata.layout.mix import Weighted, camera_groups, mix_of, nearest_floor, scores, union
from tests.core.test_layout_advisor import CFG, VLA, WAM, episode  # noqa: F401  # the module's episode fixture
from tests.core.test_layout_entropy import PREDICTED, cabac_cal  # noqa: F401  # a synthetic calibration

ADVISOR = "gops: [1, 10]\ncrfs: [23]\ncamera_spans_s: [1.0]\narray_spans_s: [2.0]\nsamples: 4\nmin_psnr_db: 20.0\n"


@pytest.mark.parametrize("hz", [30.0, 15.0])
def test_advise_preset_over_source_is_at_the_sources_rates(hz, tmp_path):
    """The documented path with a preset name: a LeRobot-like source with state at the camera rate.
    At 100 Hz (the preset's default) WAM's 4 s state window would span 13 s of a 30 Hz stream and
    no sample of a 6 s episode would fit."""
    land = tmp_path / "land"
    synthesize(
        SynthConfig(episodes=1, duration_s=6.0, cameras=("cam_a",), height=48, width=64, fps=hz, state_hz=hz), land
    )
    (tmp_path / "adv.yaml").write_text(ADVISOR)
    for name in ("wam", "vla"):
        out = tmp_path / f"{name}.json"
        res = CliRunner(env={"COLUMNS": "200"}).invoke(
            app,
            ["advise", name, "--source", str(land), "--config", str(tmp_path / "adv.yaml"), "--out", str(out)]
            + ["--quick", "--quiet"],
        )
        assert res.exit_code == 0, res.output
        pat = ReadPattern.from_dict(json.loads(out.read_text())["pattern"])
        win = {w.name: w for w in pat.windows}
        if name == "wam":  # every window: 4 s at the step nearest 10 Hz of its own rate
            for w in pat.windows:
                assert w.length * w.every / hz == pytest.approx(4.0, abs=0.15), w
        else:
            assert win["action"].length == 50 and pat.anchor_stride_s == pytest.approx(1 / hz)


def test_one_layout_for_two_weighted_patterns(episode):  # noqa: F811
    cfg = dataclasses.replace(CFG, gops=(1, 2, 10, 40), samples=8, loader="dataset")
    plan = advise([(VLA, 1.0), (WAM, 1.0)], [episode], cfg)
    assert [p["name"] for p in plan.patterns] == ["vla", "wam"]
    assert sum(p["weight"] for p in plan.patterns) == pytest.approx(1.0)
    for p in plan.patterns:  # the chosen layout against each pattern's own best, predicted and measured
        assert 0 < p["of_best_predicted"] <= 1.0 and 0 < p["of_best_measured"] <= 1.0
    # each pattern's own best is among the measured alternatives: what "of its best" is measured against
    labels = [a["label"] for a in plan.alternatives if "measured_ms" in a]
    assert any(x.endswith("(best for vla)") for x in labels) or any(x.endswith("(best for wam)") for x in labels)
    # one layout holds every stream either pattern reads, hot
    assert plan.layout.group_of("cmd").name == plan.layout.group_of("joint_pos").name == "proprio"
    assert set(plan.layout.group_of("cam_left").streams) == set(VLA.video[0].streams)
    # with one pattern nothing of the mix is recorded
    assert advise(VLA, [episode], dataclasses.replace(cfg, verify_top=1)).patterns == []


def test_cli_advise_several_patterns_writes_one_plan(episode, tmp_path):  # noqa: F811
    cfg = tmp_path / "adv.yaml"
    cfg.write_text(
        "gops: [2, 10]\ncrfs: [23]\ncamera_spans_s: [1.0]\narray_spans_s: [2.0]\nsamples: 4\nverify_top: 1\n"
    )
    out = tmp_path / "plan.json"
    res = CliRunner(env={"COLUMNS": "200"}).invoke(
        app, ["advise", "vla:3", "wam:1", "-e", episode, "--config", str(cfg), "--out", str(out), "--quick"]
    )
    assert res.exit_code == 0, res.output
    assert "pattern vla (weight 0.75)" in res.output and "pattern wam (weight 0.25)" in res.output
    plan = json.loads(out.read_text())
    assert plan["pattern"]["name"] == "vla+wam" and len(plan["patterns"]) == 2
    res = CliRunner().invoke(app, ["advise", "vla:0", "-e", episode])
    assert res.exit_code == 2 and "weight" in res.output


def test_mix_rules():
    assert weighted_spec("vla:2.5") == ("vla", 2.5) and weighted_spec("wam") == ("wam", 1.0)
    assert weighted_spec("dir:x/p.yaml") == ("dir:x/p.yaml", 1.0)  # not a number: part of a file name
    with pytest.raises(ConfigError, match="weight"):
        weighted_spec("vla:-1")
    mix = mix_of([(WAM, 1.0), (VLA, 3.0)])
    assert [(m.pattern.name, m.weight) for m in mix] == [("vla", 0.75), ("wam", 0.25)]
    with pytest.raises(ConfigError, match="share a name"):
        mix_of([VLA, VLA])
    with pytest.raises(ConfigError):
        mix_of([])
    u = union(mix)  # the lead's windows, then what the other reads beside them
    assert u.streams == VLA.streams and u.name == "vla+wam"
    split = ReadPattern("split", (StreamWindow("one", ("cam_left",), "video", length=2),))
    with pytest.raises(ConfigError, match="one camera grouping"):
        camera_groups(mix_of([VLA, split]))
    # score: weighted cost relative to each pattern's best; the floor is on the worst pattern
    m2 = [Weighted(VLA, 0.5), Weighted(WAM, 0.5)]
    got = scores([{"vla": 1.0, "wam": 4.0}, {"vla": 1.1, "wam": 1.0}, {"vla": 2.0, "wam": 3.0}], m2, 0.8)
    assert got[0] == (pytest.approx(2.5), pytest.approx(0.25), False)
    assert got[1][2] and got[1][0] == pytest.approx(1.05)
    assert [s[2] for s in got] == [False, True, False]
    # the candidates the advisor measures beside the score's best: the highest worst-pattern best / cost first
    costs = [{"vla": 1.0, "wam": 4.0}, {"vla": 1.1, "wam": 1.0}, {"vla": 2.0, "wam": 3.0}]
    assert nearest_floor(costs, m2) == [1, 2, 0]


def test_quality_floor_is_on_the_first_percentile_and_the_median():
    cfg = AdvisorConfig()
    assert (cfg.min_psnr_db, cfg.median_psnr_db) == (35.0, 37.0)

    def point(p1: float, med: float, mean: float = 40.0) -> CodecPoint:
        return CodecPoint(23, 0, (1, 1, 1), (1, 1, 1), 1, 1, mean, mean, 0.0, p1, med, p1, med)

    assert meets_floor(point(35.5, 37.5), cfg, False)
    assert not meets_floor(point(34.9, 40.0), cfg, False)  # a few bad frames: the 1st percentile fails
    assert not meets_floor(point(36.0, 36.9), cfg, True)
    old = CodecPoint(23, 0, (1, 1, 1), (1, 1, 1), 1, 1, 38.0, 36.0)  # a calibration saved before p1/median
    assert old.quality(False) == (38.0, 38.0) and not meets_floor(old, cfg, True)
    with pytest.raises(ConfigError):
        AdvisorConfig(mix_floor=0.0)


def test_windows_reading_every_kth_frame_also_search_gops_aligned_to_k():
    cfg = AdvisorConfig(gops=(1, 2, 10, 40))
    assert searched_gops(VLA.video[0], cfg) == [1, 2, 10, 40]  # every frame: the configuration's
    assert searched_gops(WAM.video[0], cfg) == [1, 2, 4, 10, 12, 40]  # every 4th: rounded up to 4k too
    # the real case (docs/lerobot-peer.md): WAM every 3rd frame at 30 fps, GOP 12 between 10 and 15
    wam30 = dataclasses.replace(WAM.video[0], every=3)
    assert {9, 12, 21} <= set(searched_gops(wam30, AdvisorConfig())) - set(AdvisorConfig().gops)


def test_the_mix_floor_changes_the_choice(episode, cabac_cal):  # noqa: F811
    """A synthetic calibration (fixed costs): VLA weighs 9 to WAM's 1. The weighted score alone picks
    a short GOP that serves WAM at well under half its own best; a floor some candidate keeps moves
    the choice to it; a floor none keeps falls back to the score."""
    cfg = dataclasses.replace(PREDICTED, gops=(2, 4, 8, 10, 40), entropies=("cabac",), camera_spans_s=(1.0,))

    def chosen(floor: float) -> tuple[str, float, float]:
        plan = advise(
            [(VLA, 9.0), (WAM, 1.0)], [episode], dataclasses.replace(cfg, mix_floor=floor), calibration=cabac_cal
        )
        # each pattern's own best (what advising it alone picks) is among the alternatives
        assert {"(best for vla)", "(best for wam)"} <= {a["label"][-14:] for a in plan.alternatives}
        ms = [{n: x["predicted_ms"] for n, x in a["patterns"].items()} for a in plan.alternatives]
        worst = [min(min(m[n] for m in ms) / c[n] for n in c) for c in ms]  # each one's worst pattern, of its best
        return plan.chosen, min(p["of_best_predicted"] for p in plan.patterns), max(worst[1:-2], default=0.0)

    loose, loose_worst, nearest = chosen(0.01)  # every candidate keeps it: the weighted score alone
    kept, kept_worst, _ = chosen(0.6)
    assert loose_worst < 0.6 <= kept_worst and kept != loose, (loose, kept)
    assert "/b3/" in kept  # the compromise reads WAM's every 4th frame as reference frames
    # where the score wins, the candidate nearest the floor is still offered (and measured)
    assert nearest >= kept_worst
    assert chosen(0.99)[0] == loose  # no candidate keeps it: the score decides
