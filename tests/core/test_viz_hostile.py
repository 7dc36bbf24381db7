"""`robodata view` over damaged codec extradata and packets: a clean error naming the stream,
where the reader refuses the same bytes, never an IndexError or a raw libav error (issue 43)."""

from __future__ import annotations

import base64
import struct
from pathlib import Path

import pytest

pytest.importorskip("rerun")

from typer.testing import CliRunner  # noqa: E402

from bench.robustness_container import with_footer  # noqa: E402
from bench.robustness_container_payload import BOMB_ROWS, rebuild, zstd_bomb  # noqa: E402
from bench.robustness_viewer import packet_part, to_avcc, video_parts, view_case  # noqa: E402
from robodata.cli import app  # noqa: E402
from robodata.container import EpisodeReader, Layout, TopicGroup, VideoSettings  # noqa: E402
from robodata.errors import CodecError, ContainerError  # noqa: E402
from robodata.viz.paramsets import avcc, hvcc, length_prefixed_to_annexb, obus, parse_extradata  # noqa: E402
from tests.core.helpers_container import CAMS, first_part, footer_doc, write_small  # noqa: E402

AVCC_HEAD = bytes([1, 0x64, 0, 0x0A, 0xFF, 0xE1])
EXTRADATA = {
    "garbage": bytes(range(7, 60, 3)),
    "avcc_sps_longer_than_record": AVCC_HEAD + b"\x00\x40\x67\x64",
    "avcc_no_pps_count": AVCC_HEAD + b"\x00\x02\x67\x64",
    "avcc_pps_count_lies": AVCC_HEAD + b"\x00\x02\x67\x64\x05\x00\x02\x68",
    "annexb_cut": None,  # the stream's own, cut in the middle of its SPS
    "empty": b"",
}


def _layout(bframes: int = 0) -> Layout:
    return Layout(
        groups=(
            TopicGroup("cameras", CAMS, 1.0, VideoSettings(gop=10, crf=30, bframes=bframes)),
            TopicGroup("proprio", ("joint_pos", "cmd"), 2.0),
            TopicGroup("events", ("events",), 60.0),
        )
    )


@pytest.fixture(scope="module")
def episodes(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("viz-hostile")
    out = {}
    for name, bframes in (("plain", 0), ("bframes", 2)):
        out[name] = root / f"{name}.rdep"
        write_small(out[name], duration_s=1.0, layout=_layout(bframes), h=24, w=32)
    return out


def _with_extradata(src: Path, dst: Path, stream: str, extradata: bytes) -> Path:
    raw, doc, off, _ = footer_doc(src)
    doc["codec_data"][stream] = base64.b64encode(extradata).decode()
    dst.write_bytes(with_footer(raw, off, doc))
    return dst


def _view(path: Path, tmp_path: Path):
    return CliRunner().invoke(app, ["view", str(path), "--save", str(tmp_path / "out.rrd"), "--quiet"])


@pytest.mark.parametrize("layout", ["plain", "bframes"])
@pytest.mark.parametrize("case", sorted(EXTRADATA))
def test_bad_extradata_is_a_clean_error_naming_the_stream(episodes, tmp_path: Path, layout: str, case: str):
    src = episodes[layout]
    good = EpisodeReader.open(src).codec_extradata("wrist")
    extradata = EXTRADATA[case] if EXTRADATA[case] is not None else good[:9]
    path = _with_extradata(src, tmp_path / "bad.rdep", "wrist", extradata)
    with pytest.raises(ContainerError):  # the reader refuses these bytes
        EpisodeReader.open(path).read_window(0, 1.0, ["wrist"])
    r = _view(path, tmp_path)
    assert r.exit_code == 2, (r.output, r.exception)
    assert "error: ContainerError" in r.output and "'wrist'" in r.output, r.output


def test_lying_packet_length_prefix_is_a_clean_error(episodes, tmp_path: Path):
    good = to_avcc(_item(episodes["plain"]))
    assert view_case(good["data"], "avcc") == "logged"  # the avcC form plays as it is
    ci, pi, stream, table = next(v for v in video_parts(good) if v[2] == "wrist")
    data = table.column("data").to_pylist()
    data[0] = struct.pack(">I", len(data[0]) + 100) + data[0][4:]
    lying = rebuild(good["data"], good["doc"], {(ci, pi): packet_part(table, data, stream)})
    bad = _write(tmp_path / "bad.rdep", lying)
    out = _view(bad, tmp_path)
    assert out.exit_code == 2 and "error: ContainerError" in out.output and "'wrist'" in out.output, out.output


def test_zstd_bomb_is_refused_by_the_decode_cap(episodes, tmp_path: Path):
    raw, doc, _, _ = footer_doc(episodes["plain"])
    ci, pi = first_part(doc, "joint_pos")
    p = doc["chunks"][ci]["parts"][pi]
    bomb = zstd_bomb(BOMB_ROWS, 7, "joint_pos")
    bad = _write(tmp_path / "bomb.rdep", rebuild(raw, doc, {(ci, pi): bomb}, {(ci, pi): (p[4], p[4], BOMB_ROWS)}))
    out = _view(bad, tmp_path)
    assert out.exit_code == 2 and "ContainerLimitError" in out.output and "max_expansion" in out.output, out.output


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _item(path: Path) -> dict:
    raw, doc, off, length = footer_doc(path)
    return {"name": path.stem, "data": raw, "doc": doc, "footer": (off, length)}


@pytest.mark.parametrize(
    "parse, data",
    [
        (lambda b: avcc(b), AVCC_HEAD + b"\x00\x40\x67"),
        (lambda b: avcc(b), b"\x01\x64"),
        (lambda b: hvcc(b), bytes(22) + b"\x05"),
        (lambda b: hvcc(b), bytes(22) + b"\x01\x20\x00\x01\x00\x09\x40"),
        (lambda b: obus(b, "x"), b"\x0a\x80"),  # size field cut
        (lambda b: obus(b, "x"), b"\x0a\x05\x00"),  # declares 5 bytes, 1 remains
        (lambda b: obus(b, "x"), b"\x8a\x00"),  # forbidden bit
        (lambda b: length_prefixed_to_annexb(b, 4), b"\x00\x00\x00\x09\x65"),
        (lambda b: length_prefixed_to_annexb(b, 4), b"\x00\x00\x01\x65\x00\x00"),
        (lambda b: parse_extradata("h264", b), b"\x00\x00\x01\x00\x00\x01\x67"),  # empty NAL unit
        (lambda b: parse_extradata("av1", b), b"\x81\x01"),
    ],
)
def test_parsers_refuse_what_does_not_parse(parse, data: bytes):
    with pytest.raises(CodecError):
        parse(data)
