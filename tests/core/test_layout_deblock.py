"""The in-loop deblocking filter as a layout setting (VideoSettings.deblock): switched off, it
reaches the stored bitstream (FFmpeg's decode is the same with and without its own loop filter),
round-trips through the container and a LayoutPlan, keeps every older layout's version, is
refused for codecs whose encoder cannot switch it off, and the advisor weighs its cheaper decode
against its quality floor."""

import dataclasses

import av
import numpy as np
import pytest

from robodata.codecs import video_codec
from robodata.container import EpisodeReader, Layout, TopicGroup, VideoSettings
from robodata.container.calibration import Calibration
from robodata.container.plan import LayoutPlan
from robodata.dataset.frames import fetch_streams
from robodata.errors import RobodataError
from robodata.layout.advisor import advise
from robodata.layout.config import AdvisorConfig
from tests.core.helpers_container import CAMS, write_small
from tests.core.test_layout_advisor import CFG, VLA, WAM, episode  # noqa: F401  # the module's episode fixture
from tests.core.test_layout_entropy import cabac_cal  # noqa: F401  # a synthetic calibration (fixed costs)


def _layout(deblock: bool, codec: str = "h264") -> Layout:
    return Layout(
        groups=(
            TopicGroup("cameras", CAMS, 1.0, VideoSettings(codec, gop=10, crf=30, bframes=2, deblock=deblock)),
            TopicGroup("proprio", ("joint_pos", "cmd"), 2.0),
            TopicGroup("events", ("events",), 60.0),
        )
    )


def _decode(r: EpisodeReader, cam: str, options: dict[str, str]) -> list[np.ndarray]:
    """Every frame of `cam`, FFmpeg's own decoder (not robodata's) over the stored packets."""
    f = fetch_streams(r, {cam: (0.0, 1e9)})[cam]
    ctx = av.CodecContext.create(video_codec(r.layout.group_of(cam).video.codec).decoder, "r")
    ctx.extradata = r.codec_extradata(cam)
    ctx.options = options
    out = []
    for i in range(len(f.pts)):
        pkt = av.Packet(f.data[i].as_py())
        pkt.pts, pkt.dts = int(f.pts[i]), int(f.dts[i])
        out += [fr.to_ndarray(format="yuv420p") for fr in ctx.decode(pkt)]
    out += [fr.to_ndarray(format="yuv420p") for fr in ctx.decode(None)]
    return out


@pytest.mark.parametrize("codec", ["h264", "hevc"])
def test_deblocking_off_reaches_the_stored_bitstream(tmp_path, codec):
    on, off = tmp_path / "on.rdep", tmp_path / "off.rdep"
    written = write_small(on, duration_s=1.5, layout=_layout(True, codec))
    write_small(off, duration_s=1.5, layout=_layout(False, codec))
    r_on, r_off = EpisodeReader.open(str(on)), EpisodeReader.open(str(off))
    assert r_off.layout.group_of(CAMS[0]).video.deblock is False  # recorded in the container's layout
    assert r_on.layout.group_of(CAMS[0]).video.deblock is True
    skip = {"skip_loop_filter": "all"}
    # with the filter in the stream, skipping it changes pixels; switched off by the encoder, the
    # decoder has nothing left to skip: every frame is the same
    a, b = _decode(r_on, CAMS[0], {}), _decode(r_on, CAMS[0], skip)
    assert len(a) == len(b) > 10 and any(not np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    a, b = _decode(r_off, CAMS[0], {}), _decode(r_off, CAMS[0], skip)
    assert len(a) == len(b) > 10 and all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    got = r_off.read_window(0.0, 0.5, [CAMS[0]])[CAMS[0]].data  # robodata's own read: the picture written
    assert np.abs(got.astype(int) - written["frames"][CAMS[0]][: len(got)]).mean() < 10
    r_on.close()
    r_off.close()


def test_older_layouts_keep_their_version_and_plans_round_trip(tmp_path):
    assert "deblock" not in _layout(True).to_dict()["groups"][0]["video"]  # the footer readers already know
    assert _layout(True).version == Layout.from_dict(_layout(True).to_dict()).version
    off = _layout(False)
    assert off.to_dict()["groups"][0]["video"]["deblock"] is False
    assert off.version != _layout(True).version  # a different encoding, a different layout
    plan = LayoutPlan(pattern={}, layout=off, page_size=65536)
    plan.save(tmp_path / "plan.json")
    back = LayoutPlan.load(tmp_path / "plan.json")
    assert back.layout == off and back.version == off.version


def test_deblocking_off_is_refused_where_the_encoder_lacks_it_naming_the_field():
    with pytest.raises(RobodataError, match="deblock"):
        VideoSettings(codec="av1", deblock=False)
    with pytest.raises(RobodataError, match="deblock"):
        VideoSettings(deblock=0)  # type: ignore[arg-type]  # a YAML 0 is not a boolean
    with pytest.raises(RobodataError, match="deblocks"):
        AdvisorConfig(codec="av1", deblocks=(False,))
    assert AdvisorConfig(codec="av1").search_coders() == (("cabac", True),)
    assert AdvisorConfig(codec="hevc").search_coders() == (("cabac", True), ("cabac", False))
    assert len(AdvisorConfig().search_coders()) == 4
    assert AdvisorConfig(entropies=("cavlc",), deblocks=(False,)).search_coders() == (("cavlc", False),)
    # a container footer with deblock false for AV1, or not a boolean, is refused the same way
    bad = _layout(False).to_dict()
    bad["groups"][0]["video"]["codec"] = "av1"
    with pytest.raises(RobodataError, match="deblock"):
        Layout.from_dict(bad)


def _with_nodeblock(cal: Calibration, decode_x: float, psnr_db: float) -> Calibration:
    off = [
        dataclasses.replace(
            p,
            deblock=False,
            decode_s=tuple(x * decode_x for x in p.decode_s),
            intra_decode_s=p.intra_decode_s * decode_x,
            bytes=tuple(x * 1.02 for x in p.bytes),
            intra_bytes=p.intra_bytes * 1.02,
            psnr_db=psnr_db,
            intra_psnr_db=psnr_db,
        )
        for p in cal.points
    ]
    return dataclasses.replace(cal, points=list(cal.points) + off)


PREDICTED = dataclasses.replace(CFG, verify_top=0, choose="predicted", samples=8)


def _deblock(plan: LayoutPlan) -> bool:
    return plan.layout.group_of(CAMS[0]).video.deblock


def test_the_advisor_switches_deblocking_off_within_the_quality_floor(episode, cabac_cal):  # noqa: F811
    cheap = _with_nodeblock(cabac_cal, decode_x=0.7, psnr_db=39.0)
    plan = advise(VLA, [episode], PREDICTED, calibration=cheap)
    assert _deblock(plan) is False and "/nodeblock/" in plan.chosen, plan.alternatives
    two = advise([(VLA, 1.0), (WAM, 1.0)], [episode], PREDICTED, calibration=cheap)
    assert _deblock(two) is False
    assert {p["deblock"] for p in two.calibration["points"]} == {True, False}
    # below the floor (median 37 dB) it is never chosen, however cheap
    blocky = _with_nodeblock(cabac_cal, decode_x=0.3, psnr_db=36.0)
    assert _deblock(advise(VLA, [episode], PREDICTED, calibration=blocky)) is True
    # and searched only where asked
    held = dataclasses.replace(PREDICTED, deblocks=(True,))
    assert _deblock(advise(VLA, [episode], held, calibration=cheap)) is True


@pytest.mark.parametrize("value", [0, 1, "false", None])
def test_a_footer_whose_deblock_is_not_a_boolean_is_refused_naming_it(tmp_path, value):
    """A footer edited behind a recomputed CRC: `deblock` 0, 1, "false" or null is a ContainerError
    naming the field, never read as a setting (an int 0 would pass a truthiness check)."""
    import json

    from bench.robustness_container import BytesSource
    from bench.robustness_container_payload import with_footer
    from robodata.errors import ContainerError

    p = tmp_path / "off.rdep"
    write_small(p, duration_s=0.5, layout=_layout(False))
    data = p.read_bytes()
    r = EpisodeReader.open(str(p))
    off, length = r.footer_offset, r.footer_length
    r.close()
    doc = json.loads(data[off : off + length])
    video = next(g["video"] for g in doc["layout"]["groups"] if g.get("video"))
    assert video["deblock"] is False  # what the writer recorded
    video["deblock"] = value
    with pytest.raises(ContainerError, match="deblock"):
        EpisodeReader.open(BytesSource(with_footer(data, off, doc), "off"))
