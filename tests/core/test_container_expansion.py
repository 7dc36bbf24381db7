"""A few KB cannot buy GBs (issue 44, item 7): what a read decompresses is bounded by what it read
(ReaderConfig.max_expansion, expansion_floor_bytes) and a part's declared rows are checked against
its index entry, both before anything is allocated."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from bench.robustness_container import BytesSource, build_corpus
from bench.robustness_container_payload import rebuild, zstd_bomb
from bench.robustness_decode import build_cases, measure
from robodata.container import EpisodeReader, ReaderConfig
from robodata.errors import ConfigError, ContainerError, ContainerLimitError


@pytest.fixture(scope="module")
def corpus():
    with tempfile.TemporaryDirectory() as tmp:
        return build_corpus(Path(tmp))


@pytest.fixture(scope="module")
def cases(corpus):
    return build_cases(corpus)


def test_a_48kb_container_declaring_1gb_under_the_decode_cap_is_refused_before_it_is_allocated(cases, tmp_path):
    data, start, streams = cases["array_old_cap_beside_window"]
    assert len(data) < 50_000  # 28M rows x 36 B = 1.008 GB, under max_decode_bytes (1 GiB)
    path = tmp_path / "bomb.rdep"
    path.write_bytes(data)
    m = measure(path, start, streams)  # a fresh process: its peak RSS is this read's
    assert m["outcome"].startswith("ContainerLimitError") and "max_expansion" in m["outcome"], m["outcome"]
    assert m["peak_mb"] - m["base_mb"] < 64, m  # was ~2 GB, then a ContainerError


@pytest.mark.parametrize("name", ["events_old_cap", "video_packets_old_cap"])
def test_events_and_video_parts_are_bounded_the_same_way(cases, name):
    data, start, streams = cases[name]
    r = EpisodeReader.open(BytesSource(data, name))
    with pytest.raises(ContainerLimitError, match="max_expansion"):
        r.read_window(start, start + 0.001, streams)


def test_under_the_floor_a_read_may_decompress_any_ratio_over_it_only_max_expansion(corpus):
    one = corpus[0]
    doc = one["doc"]
    ci, pi = next(
        (ci, pi) for ci, c in enumerate(doc["chunks"]) for pi, p in enumerate(c["parts"]) if p[0] == "joint_pos"
    )
    rows = 50_000  # 1.8 MB of zeros at t = 0 from ~2 KB: honest as far as its entry goes
    data = rebuild(one["data"], doc, {(ci, pi): zstd_bomb(rows, 7, "joint_pos")}, {(ci, pi): (0, 0, rows)})
    got = EpisodeReader.open(BytesSource(data, "x")).read_window(0.0, 0.001, ["joint_pos"])  # under the floor
    assert got["joint_pos"].data.shape == (rows, 7)
    tight = ReaderConfig(max_expansion=100, expansion_floor_bytes=1024)
    with pytest.raises(ContainerLimitError, match="max_expansion"):
        EpisodeReader.open(BytesSource(data, "x"), config=tight).read_window(0.0, 0.001, ["joint_pos"])
    for bad in ({"max_expansion": 0}, {"max_expansion": 2.5}, {"expansion_floor_bytes": 10}):
        with pytest.raises(ConfigError):
            ReaderConfig(**bad)


def test_a_part_whose_batches_declare_other_rows_than_its_entry_is_refused_before_decoding(corpus):
    one = corpus[0]
    doc = one["doc"]
    ci, pi, p = next(
        (ci, pi, p) for ci, c in enumerate(doc["chunks"]) for pi, p in enumerate(c["parts"]) if p[0] == "joint_pos"
    )
    bomb = zstd_bomb(500_000, 7, "joint_pos")  # 18 MB declared: under the floor
    data = rebuild(one["data"], doc, {(ci, pi): bomb}, {(ci, pi): (p[4], p[5], p[6])})  # entry keeps its count
    with pytest.raises(ContainerError, match="batches declare 500000 rows, its index entry says"):
        EpisodeReader.open(BytesSource(data, "x")).read_window(0.0, 0.001, ["joint_pos"])
