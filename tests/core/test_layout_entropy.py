"""H.264's entropy coder as a layout setting (VideoSettings.entropy): CAVLC reaches the encoder and
the stored bitstream, round-trips through the container and a LayoutPlan, is refused for codecs
without it, and the advisor weighs its cheaper decode against its bytes."""

import dataclasses

import numpy as np
import pytest

from robodata.codecs.nal_check import h264_entropy
from robodata.container import EpisodeReader, Layout, TopicGroup, VideoSettings
from robodata.container.calibration import Calibration, CodecPoint
from robodata.container.plan import LayoutPlan
from robodata.errors import RobodataError
from robodata.layout.advisor import advise
from robodata.layout.calibration import calibrate
from robodata.layout.config import AdvisorConfig, StoreModel
from tests.core.helpers_container import CAMS, write_small
from tests.core.test_layout_advisor import CFG, VLA, WAM, episode  # noqa: F401  # the module's episode fixture


def _layout(entropy: str) -> Layout:
    return Layout(
        groups=(
            TopicGroup("cameras", CAMS, 1.0, VideoSettings(gop=10, crf=20, bframes=2, entropy=entropy)),
            TopicGroup("proprio", ("joint_pos", "cmd"), 2.0),
            TopicGroup("events", ("events",), 60.0),
        )
    )


@pytest.mark.parametrize("entropy", ["cabac", "cavlc"])
def test_the_entropy_coder_reaches_the_stored_bitstream(tmp_path, entropy):
    p = tmp_path / f"{entropy}.rdep"
    written = write_small(p, duration_s=1.5, layout=_layout(entropy))
    r = EpisodeReader.open(str(p))
    assert r.layout.group_of(CAMS[0]).video.entropy == entropy  # recorded in the container's layout
    # the PPS's entropy_coding_mode_flag, and x264's own record of its options (the SEI of the first keyframe)
    assert h264_entropy(r.codec_extradata(CAMS[0])) == entropy
    chunk = next(c for c in r.chunks if any(x.stream == CAMS[0] for x in c.parts))
    part = next(x for x in chunk.parts if x.stream == CAMS[0])
    from robodata.codecs.arrays import decode_packets

    first = decode_packets(r.source.read(chunk.offset + part.offset, part.length)).column("data")[0].as_py()
    assert (b"cabac=0" if entropy == "cavlc" else b"cabac=1") in first
    got = r.read_window(0.0, 0.5, [CAMS[0]])[CAMS[0]].data  # decodes, and is the picture written
    assert np.abs(got.astype(int) - written["frames"][CAMS[0]][: len(got)]).mean() < 8
    r.close()


def test_cabac_layouts_keep_their_version_and_plans_round_trip(tmp_path):
    # the one plan of docs/lerobot-peer.md, written before the field: the same layout version
    one = Layout(
        groups=(
            TopicGroup(
                "cameras",
                ("cam_high", "cam_left_wrist", "cam_right_wrist"),
                2.0,
                VideoSettings("h264", 15, 23, "veryfast", 2),
            ),
            TopicGroup("proprio", ("joint_pos", "cmd"), 30.0),
        )
    )
    assert one.version == "v1-008ab4db9401"
    cavlc = _layout("cavlc")
    assert cavlc.version != _layout("cabac").version  # a different encoding, a different layout
    plan = LayoutPlan(pattern={}, layout=cavlc, page_size=65536)
    plan.save(tmp_path / "plan.json")
    back = LayoutPlan.load(tmp_path / "plan.json")
    assert back.layout == cavlc and back.layout.group_of(CAMS[0]).video.entropy == "cavlc"
    assert back.version == cavlc.version


def test_an_entropy_coder_the_codec_lacks_is_refused_naming_the_field():
    for codec in ("hevc", "av1"):
        with pytest.raises(RobodataError, match="entropy"):
            VideoSettings(codec=codec, entropy="cavlc")
        with pytest.raises(RobodataError, match="entropies"):
            AdvisorConfig(codec=codec, entropies=("cavlc",))
        assert AdvisorConfig(codec=codec).search_entropies() == ("cabac",)
    with pytest.raises(RobodataError, match="entropy"):
        VideoSettings(entropy="arithmetic")
    assert AdvisorConfig().search_entropies() == ("cabac", "cavlc")
    # a container footer naming it for HEVC is refused the same way
    bad = _layout("cabac").to_dict()
    bad["groups"][0]["video"].update(codec="hevc", entropy="cavlc")
    with pytest.raises(RobodataError, match="entropy"):
        Layout.from_dict(bad)


@pytest.fixture(scope="module")
def cabac_cal(episode):  # noqa: F811
    """A synthetic CABAC calibration (fixed costs, not this machine's: the choices below must not
    follow the load) over the episode's own array bytes; CAVLC points are made from it below."""
    r = EpisodeReader.open(episode)
    arrays = calibrate(r, dataclasses.replace(CFG, entropies=("cabac",), crfs=(23,)), {0}).array_part_bytes
    r.close()
    points = [
        CodecPoint(
            23, bf, (1800.0, 300.0, 100.0 if bf else 0.0), (4e-4, 1e-4, 6e-5 if bf else 0.0), 1500.0, 3.5e-4, 40, 40
        )
        for bf in (0, 2, 3)
    ]
    return Calibration(
        "h264", "veryfast", 96, 128, points, 2e-5, 5e-5, 1e-4, 1e-5, 1e-5, 1e-9, arrays,
        video_part_s=1e-4, pool_s=2e-4, frame_s=3e-5, packet1_s=1e-5, packet_s=1e-5,
    )  # fmt: skip


def _with_cavlc(cal: Calibration, decode_x: float, bytes_x: float) -> Calibration:
    cavlc = [
        dataclasses.replace(
            p,
            entropy="cavlc",
            decode_s=tuple(x * decode_x for x in p.decode_s),
            intra_decode_s=p.intra_decode_s * decode_x,
            bytes=tuple(x * bytes_x for x in p.bytes),
            intra_bytes=p.intra_bytes * bytes_x,
        )
        for p in cal.points
    ]
    return dataclasses.replace(cal, points=list(cal.points) + cavlc)


def _chosen_entropy(plan: LayoutPlan) -> str:
    return plan.layout.group_of(CAMS[0]).video.entropy


PREDICTED = dataclasses.replace(CFG, verify_top=0, choose="predicted", samples=8)


def test_the_advisor_picks_cavlc_where_decode_dominates(episode, cabac_cal):  # noqa: F811
    cal = _with_cavlc(cabac_cal, decode_x=0.5, bytes_x=1.1)
    plan = advise(VLA, [episode], PREDICTED, calibration=cal)
    assert _chosen_entropy(plan) == "cavlc", plan.alternatives
    assert "/cavlc/" in plan.chosen
    # both patterns of one layout too, and the plan carries the points it chose by
    two = advise([(VLA, 1.0), (WAM, 1.0)], [episode], PREDICTED, calibration=cal)
    assert _chosen_entropy(two) == "cavlc", two.alternatives
    assert {p["entropy"] for p in two.calibration["points"]} == {"cabac", "cavlc"}
    # searched only where asked: the configuration may hold the advisor to CABAC
    held = advise(VLA, [episode], dataclasses.replace(PREDICTED, entropies=("cabac",)), calibration=cal)
    assert _chosen_entropy(held) == "cabac"


def test_the_advisor_keeps_cabac_where_bytes_dominate(episode, cabac_cal):  # noqa: F811
    cal = _with_cavlc(cabac_cal, decode_x=0.4, bytes_x=3.0)
    # read from a slow store with a cold cache, three times the bytes cost more than the decode saved
    slow = dataclasses.replace(PREDICTED, objective="cold", store=StoreModel(bandwidth_bps=2e6))
    assert _chosen_entropy(advise(VLA, [episode], slow, calibration=cal)) == "cabac"
    # on local disk the same trade goes the other way: CPU alone, the decode wins
    assert _chosen_entropy(advise(VLA, [episode], PREDICTED, calibration=cal)) == "cavlc"
    # the same decode cost for more bytes: the least storage wins the tie
    tie = _with_cavlc(cabac_cal, decode_x=1.0, bytes_x=1.3)
    assert _chosen_entropy(advise(VLA, [episode], PREDICTED, calibration=tie)) == "cabac"


def test_the_source_reference_is_encoded_never_copied(tmp_path):
    """`advise --source` over a LeRobot AV1 set with GOP 2 (the G1 dataset's shape): the stream-copy
    gate would keep the AV1, and the calibration times the reference's chunks as H.264."""
    from robodata.ingest.synth.lerobot import write_lerobot
    from robodata.layout.sources import SOURCE_VIDEO, convert_sources

    src = write_lerobot(tmp_path / "lr", "v3.0", episodes=1, frames_per_episode=30, codec="av1", gop=2)
    paths, ref = convert_sources([str(src)], tmp_path / "ref")
    r = EpisodeReader.open(paths[0])
    cams = [s for s, sp in r.meta.streams.items() if sp.kind == "video"]
    v = r.layout.group_of(cams[0]).video
    assert (v.codec, v.preset, v.crf) == (SOURCE_VIDEO.codec, SOURCE_VIDEO.preset, SOURCE_VIDEO.crf)
    assert ref["via"]["video"]["codec"] == "h264"
    r.close()


def test_a_cabac_layouts_dict_is_what_it_was_before_the_field():
    """Readers that predate the field read a CABAC container's footer (its video keys are the old ones)."""
    assert "entropy" not in _layout("cabac").to_dict()["groups"][0]["video"]
    assert _layout("cavlc").to_dict()["groups"][0]["video"]["entropy"] == "cavlc"
    assert Layout.from_dict(_layout("cabac").to_dict()) == _layout("cabac")
