"""Issue 37: a curation spec's camera alias map (robodata.curate.camera_aliases): validated up front,
resolves the roles of cameras the catalog left without one, lets a spec require a role, lands in the
manifest's camera_roles (so a read pattern asks by role), and enters the spec hash only when declared."""

from __future__ import annotations

import polars as pl
import pytest

from bench.mixing_data import build
from robodata.catalog.table import Catalog
from robodata.curate.camera_aliases import with_aliases
from robodata.curate.manifest import read_manifest
from robodata.curate.run import curate
from robodata.curate.spec import spec_from_dict
from robodata.dataset.mixpattern import MixPattern
from robodata.dataset.mixture import MixedDataset
from robodata.errors import ConfigError

BASE = {"version": 1, "name": "alias", "split": {"val_fraction": 0}}
FRONT = {"front": ["cam_high", "image", "image_0", "top"]}


@pytest.mark.parametrize(
    "cameras, says",
    [
        ({"state": ["x"]}, "not state/action"),
        ({"": ["x"]}, "printable name"),
        ({"front": []}, "list the camera names"),
        ({"front": ["a"], "wrist": ["a"]}, "listed under 'front' too"),
        ({"front": "cam_high"}, "cameras.front: expected a list"),
        ({"front": [""]}, "is not a camera name"),
    ],
)
def test_a_bad_alias_map_is_refused_up_front_naming_the_field(cameras, says):
    with pytest.raises(ConfigError, match=says):
        spec_from_dict(BASE | {"cameras": cameras})


def test_the_alias_map_enters_the_spec_hash_only_when_declared():
    plain = spec_from_dict(BASE)
    assert spec_from_dict(BASE | {"cameras": {}}).spec_hash() == plain.spec_hash()
    assert spec_from_dict(BASE | {"cameras": FRONT}).spec_hash() != plain.spec_hash()


def test_a_catalog_role_is_kept_and_an_unknown_one_resolved_by_name():
    df = pl.DataFrame(
        {
            "cameras": [["image_0", "w"], ["cam_high"], ["top"], None],
            "camera_roles": [["", "wrist"], ["front"], None, None],
        },
        schema={"cameras": pl.List(pl.String), "camera_roles": pl.List(pl.String)},
    )
    got = with_aliases(FRONT | {"scene": ["w"]}, df.lazy()).collect()["camera_roles"].to_list()
    assert got == [["front", "wrist"], ["front"], ["front"], None]  # w keeps its catalog role "wrist"


def test_a_spec_requires_a_role_and_the_manifest_carries_the_resolved_roles(tmp_path):
    cat = Catalog(str(tmp_path / "cat"))
    cat.backfill(build(tmp_path / "eps", 1, 2.0))  # aloha (cam_high: front by name), bridge, pusht, go2 (none)
    need_front = {"filters": [{"column": "camera_roles", "op": "contains", "value": "front"}]}
    info, _ = curate(spec_from_dict(BASE | need_front | {"cameras": FRONT}), cat, tmp_path / "m")
    got = read_manifest(info.path)
    by = dict(zip(got.column("source_dataset").to_pylist(), got.column("camera_roles").to_pylist(), strict=True))
    assert by == {"aloha_sim": ["front", "wrist"], "bridge": ["front"], "pusht": ["front"]}  # go2: no camera
    # without the alias map only the camera whose name says so has the role
    info, _ = curate(spec_from_dict(BASE | need_front | {"name": "plain"}), cat, tmp_path / "m")
    assert read_manifest(info.path).column("source_dataset").to_pylist() == ["aloha_sim"]
    # a pattern asking for `front` by role alone (no aliases of its own) reads every row's camera
    pattern = {"name": "p", "hz": 10, "cameras": {"front": []}, "camera": {"length": 1}, "resize": [32, 48]}
    ds = MixedDataset(got, MixPattern.from_dict(pattern | {"state": {"length": 0}, "action": {"length": 1}}))
    b = ds.batch(list(range(len(ds))))
    assert bool(b["front_present"].all()) and not ds.unusable
    ds.close()


def test_the_budget_orders_route_resolves_the_roles_as_the_plain_scan(tmp_path):
    cat = Catalog(str(tmp_path / "cat"))
    cat.backfill(build(tmp_path / "eps", 2, 2.0))
    need_front = [{"column": "camera_roles", "op": "contains", "value": "front"}]
    mix = {"by": "source_dataset", "weights": {"bridge": 1, "pusht": 1, "go2": 1}, "default_weight": 0}
    spec = BASE | {"version": 2, "filters": need_front, "cameras": FRONT, "mix": mix, "budget": {"total_hours": 1}}
    info, selection = curate(spec_from_dict(spec), cat, tmp_path / "m")
    assert selection.evaluated_by == "budget order", selection.evaluated_by
    got = read_manifest(info.path)
    assert sorted(set(got.column("source_dataset").to_pylist())) == ["bridge", "pusht"]
    assert {tuple(r) for r in got.column("camera_roles").to_pylist()} == {("front",)}
