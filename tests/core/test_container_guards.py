"""Declared sizes, footer structure and header: what the reader refuses, and with which error."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from bench.robustness_container import BytesSource, with_footer
from bench.robustness_container_payload import BOMB_ROWS, lying_prefix, rebuild, zstd_bomb
from robodata.codecs.image import ImageError
from robodata.container import EpisodeReader
from robodata.container.limits import ReaderConfig
from robodata.errors import ConfigError, ContainerError, ContainerLimitError, RobodataError
from tests.core.helpers_container import first_part, footer_doc, write_small


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    p = tmp_path_factory.mktemp("guards") / "ep.rdep"
    data = write_small(p, duration_s=2.0)
    raw, doc, off, length = footer_doc(p)
    return {"path": p, "raw": raw, "doc": doc, "off": off, "len": length, "data": data}


def _open(data: bytes, **kw):
    return EpisodeReader.open(BytesSource(data, "ep.rdep"), **kw)


def _edited(original, edit) -> bytes:
    doc = copy.deepcopy(original["doc"])
    edit(doc)
    return with_footer(original["raw"], original["off"], doc)


def test_zstd_bomb_is_refused_before_it_is_decompressed(original):
    doc = original["doc"]
    ci, pi = first_part(doc, "joint_pos")
    bomb = zstd_bomb(BOMB_ROWS, 7, "joint_pos")
    assert len(bomb) < 100_000  # 40M rows x 36 B = 1.44 GB once decoded
    t0 = doc["chunks"][ci]["parts"][pi][4]
    data = rebuild(original["raw"], doc, {(ci, pi): bomb}, {(ci, pi): (t0, t0, BOMB_ROWS)})
    r = _open(data)
    with pytest.raises(ContainerLimitError, match="max_expansion") as ei:  # 44 KB read, 1.44 GB declared
        r.read_window(0.0, 0.001, ["joint_pos"])
    assert ei.value.chunk == ci and ei.value.path == "ep.rdep"
    with pytest.raises(ContainerLimitError, match="max_decode_bytes"):  # and over the absolute cap
        _open(data, config=ReaderConfig(max_expansion=1 << 20)).read_window(0.0, 0.001, ["joint_pos"])
    np.testing.assert_array_equal(r.read_window(0.0, 10.0, ["cmd"])["cmd"].data, original["data"]["cmd"])
    with pytest.raises(ContainerError, match="prefix declares"):  # a length prefix its zstd frame contradicts
        _open(rebuild(original["raw"], doc, {(ci, pi): lying_prefix(zstd_bomb(1000, 7, "joint_pos"))})).read_window(
            0.0, 0.001, ["joint_pos"]
        )


def test_decode_caps_are_configurable_and_validated(original):
    # 6,000 bytes: under the 7,200 of the proprio part, over the 3.6-4.2k of a camera's part, whose
    # size varies with the encoding (libx264 does not give the same bytes every time here)
    small = ReaderConfig(max_decode_bytes=6000, max_frame_bytes=64 * 48 * 3 * 4)
    r = _open(original["raw"], config=small)
    with pytest.raises(ContainerLimitError, match="max_decode_bytes"):  # 200 x (7 floats + a time)
        r.read_window(0.0, 0.05, ["joint_pos"])
    assert list(r.read_window(0.0, 2.0, ["events"])["events"].data) == ["start", "grasp"]
    with pytest.raises(ContainerLimitError, match="max_frame_bytes"):
        r.read_window(0.0, 1.0, ["wrist"])
    assert len(r.read_window(0.0, 0.1, ["wrist"])["wrist"].t) == 2
    with pytest.raises(ContainerLimitError, match="max_footer_bytes"):
        _open(original["raw"], config=ReaderConfig(max_footer_bytes=1024))
    for bad in ({"max_decode_bytes": 0}, {"max_frame_bytes": -1}, {"max_footer_bytes": 2.5}):
        with pytest.raises(ConfigError):
            ReaderConfig(**bad)
    with pytest.raises(ConfigError):
        _open(original["raw"], config={"max_decode_bytes": 1})


@pytest.mark.parametrize(
    "hint",
    [(-1, 100), (16, -5), (1 << 62, 100), (16, 1 << 62), (10**30, 10**30), (0, 0), ("16", "9"), (1.5, 2), "off+1"],
)
def test_bad_footer_hints_are_container_errors(original, hint):
    if hint == "off+1":
        hint = (original["off"] + 1, original["len"])
    with pytest.raises(ContainerError, match="hint"):
        _open(original["raw"], footer_offset=hint[0], footer_length=hint[1])
    ok = _open(original["raw"], footer_offset=original["off"], footer_length=original["len"])
    assert ok.meta.episode_id == "ep-test"


def test_header_magic_version_and_flags_are_checked(original, tmp_path):
    raw = original["raw"]
    for head, why in ((b"XDEP", "magic"), (b"RDEP\x02\x00", "version"), (b"RDEP\x01\x00\x01\x00", "flags")):
        with pytest.raises(ContainerError, match=why):
            _open(head + raw[len(head) :])
    # a file larger than the first tail read opened with hints: checked by the first read next to the header
    big = tmp_path / "big.rdep"
    write_small(big, duration_s=6.0, h=96, w=128)
    fine = EpisodeReader.open(big)
    assert fine.source.size() > 64 * 1024
    bad = b"RDEP\x07\x00" + big.read_bytes()[6:]
    r = _open(bad, footer_offset=fine.footer_offset, footer_length=fine.footer_length)
    with pytest.raises(ContainerError, match="version 7"):
        r.read_window(0.0, 0.5, ["cam_left"])


def _dup_chunk(doc):
    doc["chunks"].insert(1, copy.deepcopy(doc["chunks"][1]))


def _drop_part(doc):
    doc["chunks"][0]["parts"].pop()


def _dup_part(doc):
    doc["chunks"][0]["parts"][1] = list(doc["chunks"][0]["parts"][0])


def _swap_chunks(doc):
    doc["chunks"][0], doc["chunks"][1] = doc["chunks"][1], doc["chunks"][0]


def _rename_stream(doc):
    doc["meta"]["streams"]["cmd2"] = dict(doc["meta"]["streams"].pop("cmd"), name="cmd2")


def _shorter_duration(doc):
    doc["meta"]["duration_s"] = 0.5


def _unsafe_name(doc):
    s = doc["meta"]["streams"]
    s["../x"] = dict(s.pop("cmd"), name="../x")
    for g in doc["layout"]["groups"]:
        g["streams"] = ["../x" if n == "cmd" else n for n in g["streams"]]
    for c in doc["chunks"]:
        for p in c["parts"]:
            p[0] = "../x" if p[0] == "cmd" else p[0]


def _types(doc):
    doc["chunks"][2]["off"] = str(doc["chunks"][2]["off"])


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (_dup_chunk, "chunks"),
        (_drop_part, "parts cover"),
        (_dup_part, "twice"),
        (_swap_chunks, r"chunks\[0\]"),
        (_rename_stream, "no topic group"),
        (_shorter_duration, "duration_s"),
        (_unsafe_name, "stream names"),
        (_types, "integer"),
        (lambda d: d.__setitem__("chunks", {}), "list"),
        (lambda d: d["meta"].__setitem__("streams", []), "object"),
        (lambda d: d["codec_data"].__setitem__("wrist", "not base64!"), "base64"),
        (lambda d: d["meta"]["streams"]["joint_pos"].__setitem__("shape", [-7]), "outside"),
        (lambda d: d["meta"]["streams"]["joint_pos"].__setitem__("dtype", "U8"), "numeric"),
    ],
)
def test_inconsistent_footer_with_valid_crc_is_a_container_error(original, edit, why):
    with pytest.raises(ContainerError, match=why) as ei:
        _open(_edited(original, edit))
    assert ei.value.path == "ep.rdep"


def test_part_pointed_at_another_stream_of_its_group_is_caught_on_read(original):
    # a proprio chunk's 'cmd' part (same shape and dtype as joint_pos) relabelled as its only
    # 'joint_pos' part, the file re-laid with valid CRCs: only the part's own stream tag tells
    doc = copy.deepcopy(original["doc"])
    c = next(c for c in doc["chunks"] if c["group"] == "proprio")
    cmd = next(p for p in c["parts"] if p[0] == "cmd")
    c["parts"] = [cmd]
    cmd[0] = "joint_pos"
    r = _open(rebuild(original["raw"], doc, {}))
    with pytest.raises(ContainerError, match="holds stream 'cmd'"):
        r.read_window(0.0, 10.0, ["joint_pos"])


def test_part_times_edited_inside_the_chunk_span_fail_on_read(original):
    def later_start(doc):  # the wrist part claims to start later; the chunk span still covers it
        c = next(c for c in doc["chunks"] if c["group"] == "cameras" and c["i"] > 0)
        p = next(p for p in c["parts"] if p[0] == "wrist")
        p[4] += 1

    r = _open(_edited(original, later_start))
    with pytest.raises(ContainerError, match="span"):
        r.read_window(0.0, 10.0, ["wrist"])


def test_errors_are_in_the_robodata_tree():
    assert issubclass(ImageError, RobodataError) and issubclass(ImageError, ValueError)
    assert issubclass(ContainerLimitError, ContainerError)


def test_part_table_verifies_fetched_video_parts_and_bad_targets_are_container_errors(original):
    r = _open(original["raw"])
    (chunk, part, blob), *_ = r.fetch_parts({"wrist": (0, 10**9)})
    assert r.part_table(chunk, part, blob).num_rows == part.count
    other = next(p for p in chunk.parts if p.stream == "cam_left")
    with pytest.raises(ContainerError, match="holds stream 'wrist'"):
        r.part_table(chunk, other, blob)
    with pytest.raises(ContainerError, match="cannot read a container"):
        EpisodeReader.open(12345)


def test_batch_frame_path_verifies_parts_like_read_window(original):
    # the dataset's batch decoder (fetch_streams) reads parts itself: the same edited part that
    # read_window refuses must be refused there too, not decoded as if its entry were true
    from robodata.dataset.frames import fetch_streams

    def fewer_packets(doc):
        c = next(c for c in doc["chunks"] if c["group"] == "cameras" and c["i"] > 0)
        next(p for p in c["parts"] if p[0] == "wrist")[6] -= 1

    assert len(fetch_streams(_open(original["raw"]), {"wrist": (0.0, 10.0)})["wrist"].pts) > 0
    r = _open(_edited(original, fewer_packets))
    with pytest.raises(ContainerError, match="index entry says"):
        fetch_streams(r, {"wrist": (0.0, 10.0)})


@pytest.mark.parametrize(
    ("version", "said"),
    [("1", r"'1' \(a JSON string\)"), (2, r"2 \(a JSON number\)"), (True, r"True \(a JSON boolean\)")],
)
def test_a_footer_version_that_is_not_this_readers_says_what_it_is(original, version, said):
    """Issue 44: version "1" read "container version 1 not supported (this reader: 1)"."""
    data = _edited(original, lambda doc: doc.update(version=version))
    reads = "this reader reads container version 1, an integer"
    with pytest.raises(ContainerError, match=rf"footer field 'version' is {said}: {reads}"):
        _open(data)
