"""`robodata view MANIFEST --sample N` logs exactly what the loader returns for that sample, and
`--index`/`--episode` open the manifest's row."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

pytest.importorskip("rerun")

from typer.testing import CliRunner  # noqa: E402

from robodata.cli import app  # noqa: E402
from robodata.curate.manifest import content_hash_v1  # noqa: E402
from robodata.dataset.dataset import PatternDataset  # noqa: E402
from robodata.dataset.sampler import PatternSampler  # noqa: E402
from tests.core.helpers_container import CAMS  # noqa: E402
from tests.core.helpers_dataset import write_manifest_of_small_episodes  # noqa: E402
from tests.core.helpers_viz import rrd_columns  # noqa: E402


@pytest.fixture(scope="module")
def manifest(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("viz_manifest")
    path = write_manifest_of_small_episodes(d, 2, 4.5, b"", b"spec", 1)
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    meta[b"robodata.manifest_hash"] = content_hash_v1(table.replace_schema_metadata(None), "spec", 1).encode()
    pq.write_table(table.replace_schema_metadata(meta), path)
    return path


def _view(*args: str) -> dict:
    r = CliRunner().invoke(app, ["view", *args, "--quiet"])
    assert r.exit_code == 0, r.output + repr(r.exception)
    return json.loads(r.output.strip().splitlines()[-1])


@pytest.mark.parametrize("pattern,position", [("vla", 37), ("wam", 1)])
def test_sample_is_what_the_loader_returns(tmp_path: Path, manifest: Path, pattern: str, position: int):
    rrd = tmp_path / "s.rrd"
    out = _view(str(manifest), "--sample", str(position), "--pattern", pattern, "--seed", "3", "--save", str(rrd))
    # the loader, independently: the same dataset, sampler order and batch
    ds = PatternDataset.from_manifest(manifest, pattern)
    sampler = PatternSampler(ds.index, seed=3)
    anchor = ds.index.locate(next(iter(sampler.order(position))), 3)
    want = {k: v[0].numpy() for k, v in ds.batch([anchor]).items()}
    assert out["sample"]["row"] == anchor.row and out["sample"]["t"] == pytest.approx(anchor.t)
    cols = rrd_columns(rrd)
    for c in CAMS:
        img = cols[f"/sample/{c}"]
        frames = np.stack(
            [np.asarray(b[0] if isinstance(b[0], list) else b, dtype=np.uint8) for b in img["Image:buffer"]]
        )
        assert np.array_equal(frames.reshape(want[c].shape), want[c])
    state = np.asarray(cols["/sample/joint_pos"]["Scalars:scalars"])
    assert np.allclose(state, want["joint_pos"].reshape(len(state), -1))
    # the episode around it: video over the sample's window (from its keyframe), so it can be compared
    t = np.asarray(cols["/cameras/cam_left"]["episode_time"])
    lo, hi = out["sample"]["window"]
    assert t.min() <= max(lo, 0) * 1e9 + 1e6 and t.max() <= hi * 1e9 + 1e6


def test_index_and_episode_open_the_row(tmp_path: Path, manifest: Path):
    a = _view(str(manifest), "--index", "1", "--save", str(tmp_path / "a.rrd"))
    b = _view(str(manifest), "--episode", "ep1", "--save", str(tmp_path / "b.rrd"))
    assert a["frames"] == b["frames"] and a["frames"]["wrist"] == 90
    r = CliRunner().invoke(app, ["view", str(manifest), "--index", "9", "--save", str(tmp_path / "c.rrd")])
    assert r.exit_code == 2 and "outside [0, 2)" in r.output
    r = CliRunner().invoke(app, ["view", str(manifest), "--index", "0"])
    assert r.exit_code != 0 and "exactly one of --save" in r.output
