"""Previews (small PNGs in markdown), QC findings placed at their times, the sample muxer's
re-muxing of length-prefixed H.264, and progress reporting."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from robodata.container import EpisodeReader
from robodata.progress import progress
from robodata.viz.paramsets import START, length_prefixed_to_annexb
from robodata.viz.preview import batch_preview, manifest_preview, quarantine_preview
from robodata.viz.qc import QcFinding, StreamMarks, finding_time, locate
from robodata.viz.samples import SampleMuxer
from tests.core.helpers_container import CAMS, write_small


def _pngs(md: str) -> list[Image.Image]:
    return [Image.open(io.BytesIO(base64.b64decode(b))) for b in re.findall(r"base64,([A-Za-z0-9+/=]+)\)", md)]


@pytest.fixture(scope="module")
def episodes(tmp_path_factory) -> list[str]:
    d = tmp_path_factory.mktemp("viz_preview")
    out = []
    for i in range(2):
        p = d / f"ep{i}.rdep"
        write_small(p, duration_s=3.0)
        out.append(str(p))
    return out


def test_batch_preview_has_a_strip_per_camera_and_a_joint_plot(episodes: list[str]):
    p = batch_preview([*episodes, "/nonexistent.rdep"], episodes=3, thumbs=3, height=32)
    assert set(p.images) == {f"strip_{c}" for c in CAMS} | {"joints"}
    imgs = _pngs(p.markdown)
    assert len(imgs) == 4
    strip = Image.open(io.BytesIO(p.images["strip_wrist"]))
    assert strip.height == 2 * 34  # a row per readable episode
    assert "/nonexistent.rdep: cannot preview" in p.markdown
    assert p.nbytes < 64_000


def test_quarantine_preview_shows_frames_around_the_failure(episodes: list[str]):
    f = QcFinding("post", "gaps", False, True, "cmd: gap of 500 ms > 80 ms (4 periods)")
    p = quarantine_preview([(episodes[0], [f])], frames=4, height=32)
    assert "gap of 500 ms" in p.markdown and len(_pngs(p.markdown)) == 1
    assert Image.open(io.BytesIO(next(iter(p.images.values())))).height == len(CAMS) * 34
    assert "none with frames" in quarantine_preview([]).markdown


def test_manifest_preview_counts_the_mix():
    m = pa.table({"site": ["a", "a", "b"], "task": ["x", "y", "y"], "duration_s": [1.0, 2.0, 3.0]})
    p = manifest_preview(m)
    assert "3 episodes" in p.markdown and len(_pngs(p.markdown)) == 1
    assert _pngs(p.markdown)[0].width == 3 * 240  # site, task (no robot column), duration histogram


def test_findings_are_placed_at_the_gap_and_the_peak(tmp_path: Path):
    marks = StreamMarks()
    t = np.array([0, 10, 20, 70, 80], dtype=np.int64)
    v = np.array([[0.0], [1.0], [-3.0], [0.5], [0.1]])
    marks.see("joint_pos", t[:3], v[:3])
    marks.see("joint_pos", t[3:], v[3:])  # the gap spans the two calls
    gap = QcFinding("pre", "gaps", False, True, "cmd: gap of 1 ms > 0 ms; joint_pos: gap of 50 ns > 1 ns")
    assert finding_time(gap, marks) == 20
    assert finding_time(QcFinding("pre", "joints", False, True, "joint_pos: range [-3, 1]"), marks) == 20
    assert finding_time(QcFinding("pre", "rate", False, True, "joint_pos: 90 Hz"), marks) == 0
    # on a container: the largest joint_pos |value| of write_small's sin(t + j) curves
    ep = tmp_path / "ep.rdep"
    data = write_small(ep, duration_s=2.0)
    r = EpisodeReader.open(ep)
    peak = locate(r, QcFinding("pre", "joints", False, True, "joint_pos: range exceeds"))
    i = int(np.argmax(np.abs(data["joint_pos"]).max(axis=1)))
    assert peak == pytest.approx(data["tj"][i] / 1e9)
    cam_gap = locate(r, QcFinding("pre", "gaps", False, True, "wrist: gap of 9 ms > 1 ms"))
    assert 0 <= cam_gap <= 2.0


@settings(max_examples=30, derandomize=True, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=40), min_size=1, max_size=6), st.sampled_from([1, 2, 4]))
def test_length_prefixed_nal_units_become_annex_b(nals: list[bytes], size: int):
    nals = [n[: (1 << (8 * size)) - 1] for n in nals]
    packed = b"".join(len(n).to_bytes(size, "big") + n for n in nals)
    assert length_prefixed_to_annexb(packed, size) == b"".join(START + n for n in nals)


def test_avcc_extradata_goes_in_front_of_keyframes_as_annex_b():
    sps, pps = b"\x67\x64\x00\x0a\xac", b"\x68\xee\x3c\x80"
    avcc = bytes([1, 0x64, 0, 0x0A, 0xFF, 0xE1]) + len(sps).to_bytes(2, "big") + sps + b"\x01"
    avcc += len(pps).to_bytes(2, "big") + pps
    m = SampleMuxer("h264", avcc)
    idr = b"\x65\x88\x84"
    packets = pa.table(
        {
            "pts": [0, 1],
            "t_ns": [0, 5],
            "key": [True, False],
            "data": [len(idr).to_bytes(4, "big") + idr, b"\x00\x00\x00\x02\x41\x9a"],
        }
    )
    s = m.samples(packets)
    assert s.data.to_pylist() == [START + sps + START + pps + START + idr, START + b"\x41\x9a"]


def test_progress_lines_bar_and_quiet():
    buf = io.StringIO()
    with progress("work", 3, "chunks", out=buf, interval_s=0.0, tty=False) as step:
        for _ in range(3):
            step(1)
    lines = buf.getvalue().splitlines()
    assert lines[-1].startswith("work: 3/3 chunks (100%)") and lines[-1].endswith("(done)") and len(lines) == 4
    assert "chunks/s" in lines[0] and "ETA" in lines[0]
    bar = io.StringIO()
    with progress("work", 2, "chunks", out=bar, tty=True) as step:
        step(2)
    assert "2/2" in bar.getvalue() and "chunks/s" in bar.getvalue()
    q = io.StringIO()
    with progress("work", 2, out=q, quiet=True) as step:
        step(2)
    assert q.getvalue() == ""


def test_hvcc_extradata_parameter_sets_become_annex_b():
    vps, sps, pps = b"\x40\x01\x0c", b"\x42\x01\x01\x01", b"\x44\x01\xc1"
    rec = bytearray(21) + bytes([0xF0 | 3, 3])  # 22 header bytes (length size 4), 3 arrays
    for typ, nal in ((32, vps), (33, sps), (34, pps)):
        rec += bytes([typ]) + (1).to_bytes(2, "big") + len(nal).to_bytes(2, "big") + nal
    m = SampleMuxer("hevc", bytes(rec))
    packets = pa.table({"pts": [0], "t_ns": [0], "key": [True], "data": [b"\x00\x00\x00\x03\x26\x01\xaf"]})
    assert m.samples(packets).data.to_pylist() == [START + vps + START + sps + START + pps + START + b"\x26\x01\xaf"]
