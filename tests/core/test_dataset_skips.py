"""Issue 24: one episode that cannot serve a sample never refuses a manifest or fails a batch:
it is skipped and reported, the other episodes serve."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from robodata.dataset import DatasetConfig, PatternDataset
from robodata.dataset.pattern import preset_for
from robodata.errors import ConfigError
from tests.core.helpers_container import write_small
from tests.core.helpers_dataset import RATES, manifest


def _with_rates(table: pa.Table, row: int, rates: dict) -> pa.Table:
    col = table.column("stream_rates_json").to_pylist()
    col[row] = json.dumps(rates, sort_keys=True)
    return table.set_column(table.schema.get_field_index("stream_rates_json"), "stream_rates_json", pa.array(col))


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    root = tmp_path_factory.mktemp("skips")
    out = [str(root / f"ep{i}.rdep") for i in range(3)]
    for p in out:
        write_small(p, duration_s=5.0)
    return out


def test_an_episode_lacking_a_stream_is_skipped_and_reported_not_the_manifest(paths):
    table = _with_rates(manifest(paths, [5.0] * 3), 1, {**RATES, "joint_pos": 0.0})  # fps 0 upstream
    pattern = preset_for(table, "wam")
    with pytest.warns(UserWarning, match="1 of 3 episodes cannot serve"):
        ds = PatternDataset(table, pattern)
    assert ds.index.counts[1] == 0 and ds.index.counts[0] > 0 and list(ds.index.unusable.values()) == [1]
    rows = {int(ds[i]["episode_index"]) for i in range(0, len(ds), 7)}
    assert 1 not in rows and rows <= {0, 2}
    with pytest.raises(ConfigError, match="no episode of the manifest"):
        PatternDataset(_with_rates(manifest(paths[:1], [5.0]), 0, {**RATES, "joint_pos": 0.0}), pattern)


@pytest.mark.parametrize("bad_uri", ["deleted", ""])
def test_a_missing_container_is_skipped_and_its_samples_come_from_other_episodes(paths, tmp_path, bad_uri):
    uris = [paths[0], str(tmp_path / "gone.rdep") if bad_uri else "", paths[2]]
    table = manifest(uris, [5.0] * 3)
    ds = PatternDataset(table, preset_for(table, "wam"))
    with pytest.warns(UserWarning, match="row 1 cannot serve"):
        batch = ds.batch(list(range(len(ds))))
    assert set(batch["episode_index"].tolist()) == {0, 2} and len(batch["t"]) == len(ds)
    assert 1 in ds.skipped and ("gone.rdep" in ds.skipped.rows[1] or "no container" in ds.skipped.rows[1])


def test_episodes_all_shorter_than_the_pattern_make_an_empty_dataset_weights_or_not(paths):
    """Not the weights error (it named weights that were fine): the same empty dataset, with a warning."""
    table = manifest(paths[:2], [0.5, 0.6])  # 4 s WAM windows fit in neither; curation's weights
    pattern = preset_for(table, "wam")
    for use_weights in (True, False):
        with pytest.warns(
            UserWarning, match=r"no episode of the manifest is long enough for pattern 'wam' \(longest 0.60 s\)"
        ):
            ds = PatternDataset(table, pattern, config=DatasetConfig(use_weights=use_weights))
        assert len(ds) == 0
        ds.close()
