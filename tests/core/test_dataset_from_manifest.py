"""PatternDataset.from_manifest: a manifest file in, a dataset out, in one line."""

from __future__ import annotations

import os

import polars as pl
import pyarrow.parquet as pq
import pytest

from robodata.container import EpisodeReader
from robodata.curate.manifest import ManifestError, write_manifest
from robodata.curate.select import Selection
from robodata.dataset import PatternDataset, ReadPattern, StreamWindow
from robodata.errors import ConfigError
from tests.core.helpers_container import CAMS, write_small
from tests.core.helpers_dataset import RATES, manifest


@pytest.fixture(scope="module")
def manifest_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("from_manifest")
    paths = [str(root / f"ep{i}.rdep") for i in range(2)]
    for p in paths:
        write_small(p, duration_s=5.0)
    hints = [(EpisodeReader.open(p).footer_offset, EpisodeReader.open(p).footer_length) for p in paths]
    table = manifest(paths, [5.0, 5.0], sizes=[os.path.getsize(p) for p in paths], footers=hints)
    info = write_manifest(Selection(pl.from_arrow(table), 3, "spec-hash", {}), root, "m")
    return info.path


def test_a_preset_is_laid_over_the_manifests_cameras_and_rates(manifest_file):
    ds = PatternDataset.from_manifest(manifest_file, "wam")
    cams = ds.pattern.video[0]
    assert cams.streams == tuple(CAMS) and cams.every == max(1, round(RATES[CAMS[0]] / 10))
    state = next(w for w in ds.pattern.windows if w.kind == "array" and "joint_pos" in w.streams)
    action = next(w for w in ds.pattern.windows if w.kind == "array" and "cmd" in w.streams)
    assert state.every == round(RATES["joint_pos"] / 10) and action.every == round(RATES["cmd"] / 10)  # both 10 Hz
    item = ds[0]
    assert item[CAMS[0]].dtype.is_floating_point is False and item[CAMS[0]].shape[-1] == 3
    assert len(ds) > 0 and len(PatternDataset.from_manifest(manifest_file, "vla")) > len(ds)


def test_an_explicit_pattern_and_what_is_refused(manifest_file, tmp_path):
    pat = ReadPattern("one", (StreamWindow("c", (CAMS[0],), "video", length=1),), anchor_stride_s=1.0)
    assert PatternDataset.from_manifest(manifest_file, pat).pattern is pat
    with pytest.raises(ConfigError, match="preset"):
        PatternDataset.from_manifest(manifest_file, "no-such-preset")
    altered = tmp_path / "altered.parquet"
    t = pq.read_table(manifest_file)
    pq.write_table(t.set_column(0, "episode_id", t.column("episode_id").cast("large_string")).slice(0, 1), altered)
    with pytest.raises(ManifestError):
        PatternDataset.from_manifest(altered, "wam")
