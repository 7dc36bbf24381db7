"""Issue 37: a MixedDataset through the loader's own entry points (PatternSampler over its index,
PatternLoader / BatchLoader with batch slots and workers, resumable), and `preset_for` refusing a
manifest whose corpora name their streams differently (pointing to MixPattern)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.mixing_data import build
from robodata.catalog.table import Catalog
from robodata.curate.manifest import read_manifest
from robodata.curate.run import curate
from robodata.curate.spec import spec_from_dict
from robodata.dataset import LoaderConfig, MixedDataset, MixPattern, PatternDataset, PatternLoader, PatternSampler
from robodata.errors import ConfigError
from tests.core.test_dataset_mixture import PATTERN as MIX_PATTERN

PATTERN = MIX_PATTERN | {"action": {"length": 4}}


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mixload")
    cat = Catalog(str(tmp / "cat"))
    cat.backfill(build(tmp / "eps", 2, 3.0))
    weights = {"aloha_sim": 5, "bridge": 1, "pusht": 1, "go2": 1}  # aloha drawn past its own samples
    spec = {"version": 1, "name": "mixload", "mix": {"by": "source_dataset", "weights": weights}}
    info, _ = curate(spec_from_dict(spec | {"split": {"val_fraction": 0}}), cat, tmp / "m")
    return info.path, read_manifest(info.path)


def _same(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_a_batch_of_ids_maps_each_episode_onto_contiguous_ids(manifest):
    ds = MixedDataset(manifest[1], MixPattern.from_dict(PATTERN))
    ids = np.arange(len(ds))
    groups, local = ds._locate_many(ids)
    assert [(int(g), int(j)) for g, j in zip(groups, local, strict=True)] == [ds.locate(int(i)) for i in ids]
    assert len(ds.index) == len(ds) and int(ds.index.counts.sum()) == len(ds)
    rows = [int(ds.batch([int(i)])["episode_index"][0]) for i in ids]
    runs = np.repeat(np.arange(len(ds.index.counts)), ds.index.counts)  # the index's episode of each id
    assert len({(r, e) for r, e in zip(rows, runs, strict=True)}) == len(set(runs))  # one row per run
    with pytest.raises(IndexError):
        ds.batch([len(ds)])
    ds.close()


@pytest.mark.parametrize("workers", [0, 1])
def test_the_pattern_loader_serves_a_mixed_dataset_and_resumes(manifest, workers):
    ds = MixedDataset(manifest[1], MixPattern.from_dict(PATTERN))
    cfg = LoaderConfig(batch_size=8, num_workers=workers, slot_min_bytes=1024)
    sampler = PatternSampler(ds.index, seed=3, shuffle="block", block_size=4)
    keys = list(PatternSampler(ds.index, seed=3, shuffle="block", block_size=4))
    for k in range(0, len(keys) - 3, 4):  # a block keeps to one episode
        block = ds.batch(keys[k : k + 4])
        assert len(set(block["episode_index"].tolist())) == 1
    loader = PatternLoader(ds, sampler, cfg)
    got = []
    for i, b in enumerate(loader):
        _same(b, ds.batch(keys[8 * i : 8 * i + 8]))
        assert b["state"].shape[1:] == (1, 14) and b["front"].shape[1:] == (2, 32, 48, 3)
        got.append(b["t"].clone())
        if i == 1:
            state = loader.state_dict()
            break
    again = PatternLoader(ds, PatternSampler(ds.index, seed=3, shuffle="block", block_size=4), cfg)
    again.load_state_dict(state)
    _same(next(iter(again)), ds.batch(keys[16:24]))
    ds.close()


def test_preset_for_refuses_a_manifest_whose_corpora_name_their_streams_differently(manifest):
    path, m = manifest
    with pytest.raises(ConfigError, match=r"mixes 4 corpora.*aloha_sim: cam_high,cam_left_wrist.*MixPattern"):
        PatternDataset.from_manifest(path, "vla")
    one = m.filter(np.array([s == "bridge" for s in m.column("source_dataset").to_pylist()]))
    from robodata.dataset.pattern import preset_for

    assert preset_for(one, "vla").windows[0].streams == ("image_0",)  # one corpus: the preset as before
