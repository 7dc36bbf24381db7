"""Issue 37, catalog facts: stream roles from the source's declaration or the stream's name (never the
first array), and the mixing facts carried from the catalog into the manifest by every route."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest

from robodata.catalog.maintenance import OptimizeConfig, optimize
from robodata.catalog.table import Catalog
from robodata.container import StreamSpec
from robodata.container.roles import camera_role, stream_roles
from robodata.curate.manifest import read_manifest
from robodata.curate.run import curate
from robodata.curate.spec import spec_from_dict
from tests.core.test_curate_golden import golden_catalog


def _streams(**kinds: tuple[str, int]) -> dict[str, StreamSpec]:
    out = {}
    for name, (kind, width) in kinds.items():
        shape = (8, 8, 3) if kind == "video" else (width,)
        out[name] = StreamSpec(name, kind, 10.0, shape)
    return out


def test_state_and_actions_by_name_not_the_first_array():
    streams = _streams(aaa_extra=("array", 3), state=("array", 2), actions=("array", 4), image=("video", 0))
    streams |= _streams(wrist_image=("video", 0), cam_high=("video", 0))
    roles = stream_roles(streams, {})
    assert (roles.state, roles.action) == ("state", "actions")  # not aaa_extra (first alphabetically)
    assert roles.camera_roles(["image", "wrist_image", "cam_high"]) == ["", "wrist", "front"]
    declared = stream_roles(streams, {"roles": {"state": "aaa_extra", "action": "state", "cameras": {"image": "top"}}})
    assert (declared.state, declared.action, declared.cameras["image"]) == ("aaa_extra", "state", "top")
    # a declared stream that is not an array of the episode is not used; an episode without any has none
    assert stream_roles(streams, {"roles": {"state": "image"}}).state == "state"
    assert stream_roles(_streams(x=("array", 2)), {}).state == ""
    assert camera_role("observation_images_left_wrist") == "wrist" and camera_role("image_0") == ""


FACTS = {
    "robot_type": ["aloha", "widowx", "pusht"],
    "source_format": ["lerobot", "rlds", "zarr"],
    "source_dataset": ["a", "b", "c"],
    "control_hz": [50.0, 5.0, 10.0],
    "state_dim": [14, 7, 2],
    "action_dim": [14, 7, 2],
    "language": ["", "put the spoon", ""],
    "state_stream": ["joint_pos", "state", "state"],
    "action_stream": ["cmd", "action", "action"],
}


@pytest.fixture(scope="module")
def catalog(tmp_path_factory) -> Catalog:
    """The golden catalog with mixing facts on every row (three corpora by row number)."""
    cat = golden_catalog(tmp_path_factory.mktemp("facts") / "catalog")
    df = pl.from_arrow(cat.table().to_pyarrow_table())
    assert isinstance(df, pl.DataFrame)
    k = pl.int_range(pl.len()) % 3
    cols = {c: pl.lit(pl.Series(v)).get(k) for c, v in FACTS.items()}
    df = df.with_columns(**cols, camera_roles=pl.col("cameras").list.eval(pl.lit("front")))
    optimized = Catalog(str(tmp_path_factory.mktemp("facts2") / "catalog"))
    optimized.backfill(df.to_arrow())
    optimize(optimized, None, OptimizeConfig(row_group_rows=1024, split_salt="bench"))
    return optimized


@pytest.mark.parametrize("version, budget", [(1, None), (1, {"total_hours": 20}), (2, {"total_hours": 20})])
def test_the_manifest_carries_the_mixing_facts(catalog, tmp_path, version, budget):
    spec = {"version": version, "name": "facts", "mix": {"by": "source_dataset", "weights": {"a": 3, "b": 1}}}
    spec |= {"filters": [{"column": "duration_s", "op": "between", "value": [0, 1000]}]}  # the golden NaNs out
    spec |= {"budget": budget} if budget else {}
    if version == 2:  # the groups named: the budget order's route
        spec["mix"]["default_weight"] = 0
        spec["split"] = {"salt": "bench"}
    info, selection = curate(spec_from_dict(spec), catalog, tmp_path)
    got = read_manifest(info.path)
    named = {"a", "b"} if version == 2 else {"a", "b", "c"}
    assert got.num_rows > 0 and set(got.column("source_dataset").to_pylist()) == named
    want = pl.from_arrow(catalog.table().to_pyarrow_table()).filter(
        pl.col("episode_id").is_in(got.column("episode_id").to_pylist())
    )
    cols = [*FACTS, "camera_roles"]
    mine = pl.from_arrow(got.select(["episode_id", *cols])).sort("episode_id")
    assert mine.equals(want.select("episode_id", *cols).sort("episode_id"))
    if version == 2:  # the budget order's route (row groups under a threshold) carries them too
        assert selection.evaluated_by.startswith("budget order"), selection.evaluated_by


def test_an_old_manifest_reads_with_the_facts_as_nulls(tmp_path):
    from robodata.catalog.schema import MANIFEST_BASE_SCHEMA
    from robodata.curate.manifest import with_mixing_columns

    old = MANIFEST_BASE_SCHEMA.empty_table()
    assert with_mixing_columns(old).column("robot_type").type == pa.string()
